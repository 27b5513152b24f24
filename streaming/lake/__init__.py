"""The lake: the Spark session and the Delta tables, written and read.

`spark_session` builds the one SparkSession (Delta, the Kafka connector, quiet logs from
`log4j2-quiet.properties`); `tables` is the lake itself (`Lake`: one Delta table per
`schemas.TABLES` entry, exactly-once commits); `delta_append`, `delta_merge` and
`delta_files` write and read a local table's files without a Spark job;
`spark_schemas` maps `schemas` types to Spark and Arrow; `local_reader` and
`time_travel` read a lake (at a version or time) without Spark.

May import: `controller`, `schemas`, `streaming.jars`. Never another `streaming`
subpackage: the job, the insight commands and the tests build on the lake, not the
other way round.
"""
