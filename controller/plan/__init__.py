"""`kcsim plan`'s pure planner (CONTRACT §6): a proposed operation applied to a copy of a
cluster's state through the core's front door (`controller.simulator.Simulator`), measured
step by step, judged, and where it fails, a safe version proposed.

* `steps`: what an operation is made of (a roll, a reassignment in
  `kafka-reassign-partitions`' JSON format, a decommission, a file of events);
* `view`: the cluster as the front door's `partition_state`/`brokers`/`topics` rows show
  it, with the vital signs kept per partition as rows change;
* `planner`: applies the steps and measures each;
* `search`: the proposals (a safe roll order or holds, a decommission's reassignment).

Nothing here imports Spark, Delta or Kafka, and nothing reads the engine's internals: the
planner sees only table rows, so it works alike for every engine behind the front door.
"""
