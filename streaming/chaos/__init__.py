"""`kcsim produce`: scenario or chaos events produced to a Kafka topic.

`generator` is pure: `ChaosGenerator`, seeded random faults against a described
cluster, kept sensible by tracking the cluster with the core itself. `produce` is the
command: records from a scenario file or the generator, and a kafka-python producer.

`live_zk` and `live_kraft` drive real local clusters (`streaming.local_clusters`) with
seeded chaos, each operation waiting for its effect; `soak` runs one of them for minutes
against a cluster with its `kcsim shadow` and `kcsim run` (as child processes) and
measures what they lose, duplicate and diverge, their memory and a kill's latency.

May import: `controller`, `streaming.clients`, `streaming.jars`, `streaming.local_clusters`,
`streaming.shadow` (the ZooKeeper shadow's saved view). Never the job, the lake, the
importers or the insight commands (the soak runs the job as a process and reads its lake
with `deltalake`).
"""
