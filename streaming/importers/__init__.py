"""`kcsim import`: a real cluster's history, read from its logs, as CONTRACT §1 events.

`command` is the command (it picks the importer); `output` the destination and report
both importers share. `zk_logs` reads a ZooKeeper-mode controller's controller.log and
state-change.log (`zk_log_lines` parses the lines, the pure `zk_log_model` turns them
into events); `kraft_log` reads a KRaft `__cluster_metadata` log (`kraft_log_decoder`
runs Kafka's own decoder, the pure `kraft_log_model` turns records into the KRaft
controller's inputs, CONTRACT §5).
`state_field` is the `state` an imported event carries, shared with the shadow.

May import: `controller`, `schemas`, `streaming.jars`, `streaming.local_clusters.processes`
(the decoder's JVM). Never the job, the lake, the shadow or the insight commands.
"""
