"""`kcsim shadow`: a live ZooKeeper-mode Kafka cluster watched, its changes written as events.

`command` is the command: it reads the znodes (kazoo: get, get_children, exists and
watches), follows the cluster and writes the events to a file or, through
`kafka_output`, to a Kafka topic. `model` is pure: znode values and the changes between
two observations -> CONTRACT §1 events. `zk_failures` says why a connection failed.
A KRaft shadow will live beside it.

May import: `controller`, `schemas`, `streaming.clients`, `streaming.importers`
(the shared `state_field`). Never the job, the lake or the insight commands.
"""
