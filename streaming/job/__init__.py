"""`kcsim run`: the Spark Structured Streaming job.

`command` holds the command, the query loop (one foreachBatch through the core per
micro-batch, exactly once across restarts), the sources (event files or a Kafka topic)
and the fleet mode; `request_sink` writes the controller's requests to a Kafka topic;
`ship_core` zips `controller` and `schemas` for executors without kcsim; `os_memory`
hands freed memory back to the operating system between batches.

May import: `controller`, `schemas`, `streaming.lake`, `streaming.clients`,
`streaming.jars`. Nothing imports the job but the CLI (and the tests).
"""
