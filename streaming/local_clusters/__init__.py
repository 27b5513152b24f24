"""Real clusters on this machine, for trying kcsim and for the tests.

`kafka_local` is `kcsim kafka-local` and its single-node KRaft broker; `kraft_cluster`
a KRaft cluster of N combined nodes; `zk_cluster` a ZooKeeper-mode Kafka 3.7.1 cluster;
`spark_standalone` a Spark standalone master and workers. `processes` launches, finds
and stops their JVMs; `tls` makes their self-signed certificates.

May import: `streaming.jars`, `streaming.clients`, `controller` (settings). Never the
job, the lake, the shadow, the importers or the insight commands.
"""
