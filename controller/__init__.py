"""The controller core: pure, deterministic Python, no Spark, no I/O of its own.

At the top sit the modules both engines share: the front door (`simulator`, engine
dispatch), parsing (`parse`, `events`), settings (`config`, `java_text`,
`topic_configs`), values (`model`), table columns (`columns`), divergence, health,
invariants, snapshot and memory. The engines live in subpackages: `zk` (ZooKeeper
mode). `replay` is the `kcsim replay` command and its file formats.

`health`, `snapshot` and `divergence` still read the ZooKeeper engine's
`ControllerContext` (`zk.context`); they stay here because they are shared tables,
and move their ZooKeeper-specific parts only with a change of behaviour.

May import: `controller` itself and `schemas`. Never `streaming`, pyspark, delta,
kafka or kazoo (executors get only `controller` and `schemas`).
"""
