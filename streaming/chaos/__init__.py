"""`kcsim produce`: scenario or chaos events produced to a Kafka topic.

`generator` is pure: `ChaosGenerator`, seeded random faults against a described
cluster, kept sensible by tracking the cluster with the core itself. `produce` is the
command: records from a scenario file or the generator, and a kafka-python producer.

May import: `controller`, `streaming.clients`. Never the job, the lake, the shadow,
the importers or the insight commands.
"""
