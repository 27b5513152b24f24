"""`kcsim run`: the Spark Structured Streaming job.

`command` holds the command and its checks before Spark starts, `options` what a run
runs with, `query` the query loop (one foreachBatch through the core per micro-batch,
exactly once across restarts), `sources` the sources (event files or a Kafka topic),
`file_source` the streaming source that takes event files in name order, `fleet` the
fleet mode; `request_sink` writes the controller's requests to a Kafka topic;
`ship_core` zips `controller` and `schemas` for executors without kcsim; `os_memory`
hands freed memory back to the operating system between batches.

May import: `controller`, `schemas`, `streaming.lake`, `streaming.clients`,
`streaming.jars`. Nothing imports the job but the CLI (and the tests).
"""
