"""`kcsim replay`: the core run over an event log with no Spark, tables as JSON lines.

May import: `controller` (the front door and the shared modules) and `schemas`.
Never `streaming`, pyspark, delta, kafka or kazoo.
"""
