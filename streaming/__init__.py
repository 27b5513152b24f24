"""Everything that touches Spark, Delta, Kafka or ZooKeeper, around the pure core.

`cli` is `kcsim` (`python -m streaming` too): each command lives in its package and is
imported only when it runs. `jars` finds and fetches the JVM jars.

    job/             `kcsim run`: the Spark Structured Streaming job, the request sink
    lake/            the Spark session and the Delta tables, written and read
    shadow/          `kcsim shadow`: a live ZooKeeper-mode cluster -> events
    importers/       `kcsim import`: controller logs or a KRaft log -> events
    insight/         `kcsim state`, `history`, `report`, `whatif`
    chaos/           `kcsim produce`: scenario and chaos events to Kafka
    local_clusters/  `kcsim kafka-local`: local Kafka, ZooKeeper and Spark clusters
    clients/         Kafka and ZooKeeper client settings

Arrows go one way (tests/test_layers.py checks them): commands (job, shadow,
importers, insight, chaos) build on lake, local_clusters and clients, which build on
`controller` and `schemas`; `controller` and `schemas` never import `streaming`.
"""
