"""The one SparkSession factory: local Spark 4.2 with Delta Lake and the Kafka connector.

Sized for the project's machines (2 cores, 24 GiB): a 4 GiB driver, few shuffle
partitions (micro-batches are small), no UI, UTC session time zone.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.jars import spark_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


REDACTION_REGEX = "(?i)secret|password|token|access[.]?key|jaas|ssl[.]key|keystore[.]key"


def default_conf() -> dict[str, str]:
    return {
        "spark.jars": ",".join(spark_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Takes effect because the JVM is launched by this session (local mode).
        "spark.driver.memory": "4g",
        # One task per core: a batch's jobs are tiny, so a second wave of tasks is pure
        # scheduling cost (with the two settings below: a MERGE 1.43 -> 1.16 s, 2 cores).
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        # Delta's log replay before every MERGE reads the commits since the checkpoint as
        # one small-file scan and shuffles it: keep both to one wave of tasks.
        "spark.sql.files.maxPartitionNum": "2",
        # A MERGE rewrites every file holding a changed key: files of at most 10k rows
        # keep a small batch from rewriting a whole cluster's state (a 1-row MERGE into
        # 100k partitions: 1.4-1.9 s instead of 2.0-2.4 s). MERGE takes no writer options,
        # so this is the session's; appends lift it (streaming.lake.tables).
        "spark.sql.files.maxRecordsPerFile": "10000",
        # An Arrow table below this size is turned into rows in the driver, one thread,
        # before the job starts; at 0 the tasks convert it (a MERGE of 80k rows: 6.1 ->
        # 4.5 s; appends of 100k-500k rows 2-4x faster).
        "spark.sql.execution.arrow.localRelationThreshold": "0",
        "spark.sql.session.timeZone": "UTC",
        # ... and the JVM's: on another zone Delta checks every commit's checksum file list
        # by rebuilding the table's state in a Spark job (allFilesInCrc's verification)
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Loopback only: the machines have no other network, and no hostname lookups.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # Python workers use this interpreter (the one with kcsim installed).
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # Small Delta tables: few partitions for log replay, no Hive metastore.
        "spark.databricks.delta.snapshotPartitions": "1",
        # Every batch commits to several tables; keep each commit off the full log replay:
        # the file list comes from the commit's checksum file (a MERGE: 12 Spark jobs -> 5).
        "spark.databricks.delta.allFilesInCrc.enabled": "true",
        # ... for tables of up to 1000 files (default 50): a native MERGE reads the file list
        # there instead of running a Spark job (~2 s); 1M partitions' replica_state is 300
        # files, and the checksum file grows by ~0.5 KB a file.
        "spark.databricks.delta.allFilesInCrc.thresholdNumFiles": "1000",
        # The MERGE source is an in-memory Arrow relation, deterministic: no need to
        # materialize it before the two passes over it.
        "spark.databricks.delta.merge.materializeSource": "none",
        # Micro-batches are small: adaptive execution re-plans every shuffle stage as a
        # job of its own, which costs more than it saves at this size.
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.catalogImplementation": "in-memory",
        # kcsim names no table (every Delta table is read and written by path), but Spark
        # makes its warehouse directory at start: in the temporary directory, not as a
        # `spark-warehouse` left in whatever directory the user ran a command from.
        "spark.sql.warehouse.dir": str(Path(tempfile.gettempdir()) / "kcsim-spark-warehouse"),
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        # Redaction (Spark conf in the event log and UI, data source options in plans):
        # Spark's default pattern plus Kafka's secret-bearing options (`--kafka-config`:
        # kafka.sasl.jaas.config, kafka.ssl.key.password, PEM keys given inline).
        # (options are redacted by this and spark.sql.redaction.options.regex, `(?i)url`)
        "spark.redaction.regex": REDACTION_REGEX,
    }


QUIET_LOG4J2 = Path(__file__).with_name("log4j2-quiet.properties")


def quiet_conf() -> dict[str, str]:
    """Driver logging at ERROR (WARN lines only with --verbose)."""
    return {
        "spark.driver.extraJavaOptions": (
            f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{QUIET_LOG4J2}"
        )
    }


def build_session(
    app_name: str,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    *,
    verbose: bool = False,
) -> SparkSession:
    """A SparkSession with Delta + Kafka; `conf` entries win over the defaults.

    JVM-level settings (jars, driver memory, logging) only apply to the first session of
    a process, as with any PySpark session.
    """
    # Spark reads SPARK_LOCAL_IP before any setting, to pick the address it reports (else
    # it warns that the hostname is loopback and picks another interface's address). Only
    # the JVM this process launches reads it.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # pyspark 4.2 warns, on import and again when its pandas functions load, that it "does
    # not yet fully support pandas >= 3": kcsim uses pandas only through Arrow
    # conversions, which its tests cover. This one message is silenced for the process.
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    from pyspark.sql import SparkSession  # imported here: Spark is slow to import

    defaults = default_conf() if verbose else {**default_conf(), **quiet_conf()}
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # spark-submit turns spark.pyspark.python into the executors' interpreter, but a
    # session started from Python takes it from PYSPARK_PYTHON only (SparkContext's
    # pythonExec, which every Python function it ships names): set it from the setting.
    context = spark.sparkContext
    context.pythonExec = context.getConf().get("spark.pyspark.python", context.pythonExec)
    context.setLogLevel("WARN" if verbose else "ERROR")
    return spark
