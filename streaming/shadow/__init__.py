"""`kcsim shadow`: a live Kafka cluster followed, its changes written as events.

ZooKeeper mode: `command` reads the znodes (kazoo: get, get_children, exists and
watches), follows the cluster and writes the events to a file (`outputs`) or, through
`kafka_output`, to a Kafka topic. `model` is pure: znode values and the changes between
two observations -> CONTRACT §1 events. `zk_failures` says why a connection failed.

KRaft (`--metadata-log`): `kraft_shadow` polls the quorum's high watermark and feeds the
committed records of one node's metadata log, read by `metadata_log_tail` (a long-lived
JVM, `java/MetadataLogTail.java`, decoding with Kafka's own classes), to the log
importer's pure model; the same outputs.

May import: `controller`, `schemas`, `streaming.clients`, `streaming.importers`
(the shared `state_field`, the KRaft log model), `streaming.jars` and
`streaming.local_clusters` (the tail's jars and `java`). Never the job, the lake or the
insight commands.
"""
