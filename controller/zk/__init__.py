"""The ZooKeeper-mode controller engine (Kafka 3.7.1's KafkaController, SPEC.md).

Its modules carry the names of the Kafka classes they follow: the controller's cache
(`context`), the two state machines, the election algorithms, the request batch and
its log, topic deletion, reassignment, AlterPartition, on-demand elections and the
event handlers (`kafka_controller`).

May import: the shared core modules at the top of `controller` that sit below an engine
(`model`, `events`, `config`, `java_text`, `topic_configs`, `invariants`, `columns`,
`memory`) and `schemas`. Never the front door (`simulator`), `replay`, `streaming`, or
anything that touches Spark, Delta, Kafka or ZooKeeper.
"""
