"""`kcsim run`: the Spark Structured Streaming job (CONTRACT §3).

A streaming query over event files (or a Kafka topic) whose `foreachBatch` orders the
micro-batch's events, applies them through the core and writes the outputs to the Delta
lake (`streaming.lake.tables`), one commit per changed table, exactly once per batch.

The command's arguments and its options (`Options`); the query is `query`'s (exactly
once per batch), its sources `sources`' (files or a Kafka topic), the fleet mode
`fleet`'s. Two ways to apply a batch:

* driver (default): ONE long-lived `Simulator` in the driver holds every cluster; it is
  rebuilt from Delta when the query starts (`Simulator.from_tables`) and then only fed
  the batches, so per-batch work is proportional to the batch, not to the clusters.
* fleet (`--fleet`): the batch's events are grouped by cluster and cogrouped with those
  clusters' state rows (read from Delta, only the clusters present in the batch), and
  `applyInPandas` rebuilds each cluster's `Simulator` on an executor, applies its events
  and returns the output rows; the driver writes them. Clusters are independent in the
  core, so this equals per-cluster replays; it scales out over executors, and needs no
  state anywhere between batches (a restart is the same as any batch). The price: a
  batch costs in proportion to the size of the clusters it touches (their state is
  reloaded and shipped every batch), so it suits fleets of many small or medium
  clusters; one huge cluster is served better by the driver mode. Keeping per-cluster
  contexts alive on executors (transformWithStateInPandas) would remove the reload but
  serialize each touched context into the state store every batch and tie the
  checkpoint to the context's pickled form; not done. On any master but local, `main`
  ships the core to the executors as a zip (`streaming.job.ship_core`), so they need not
  have kcsim installed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

from streaming.clients.kafka_address import kafka_target
from streaming.clients.kafka_config import KafkaClientConfig, add_command_config
from streaming.job.file_source import is_remote
from streaming.job.options import DEFAULT_TRIGGER_SECONDS, Options
from streaming.job.os_memory import arrow_on_the_c_heap
from streaming.job.query import run
from streaming.job.request_sink import SinkError
from streaming.job.sources import FileSource
from streaming.metrics import Metrics


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        metavar="file:DIR|kafka:HOST:PORT/TOPIC",
        help="where events come from (or --bootstrap-server with --topic)",
    )
    parser.add_argument(
        "--bootstrap-server",
        "--bootstrap",
        dest="bootstrap",
        metavar="HOST:PORT",
        help="the Kafka cluster of --topic and --sink-topic (as Kafka's tools take it)",
    )
    parser.add_argument(
        "--topic", help="the events' topic: the same as --source kafka:BOOTSTRAP/TOPIC"
    )
    parser.add_argument("--lake", required=True, help="Delta lake directory")
    parser.add_argument("--once", action="store_true", help="process what is there and stop")
    parser.add_argument(
        "--checkpoint", help="checkpoint directory (default <lake>/_checkpoints/run)"
    )
    parser.add_argument(
        "--trigger-seconds",
        type=float,
        default=DEFAULT_TRIGGER_SECONDS,
        help=f"processing-time trigger interval (default {DEFAULT_TRIGGER_SECONDS})",
    )
    parser.add_argument(
        "--max-files-per-trigger",
        type=int,
        help="file source: files per batch (default: every new file)",
    )
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        choices=("earliest", "latest"),
        help="Kafka source: where a new query starts (default earliest)",
    )
    parser.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        help="Kafka source: records per batch (default: every new record)",
    )
    parser.add_argument(
        "--sink",
        metavar="kafka:HOST:PORT/TOPIC",
        help="also produce the controller's output to Kafka: its requests (zk), or its "
        "metadata records (kraft) (default: none)",
    )
    parser.add_argument(
        "--sink-topic",
        metavar="TOPIC",
        help="the same as --sink kafka:BOOTSTRAP/TOPIC, with --bootstrap-server",
    )
    add_command_config(parser, " for the source and sink", ", passed to Spark as kafka.* options")
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="apply clusters in parallel on executors (default: one cluster after another "
        "on the driver)",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on 127.0.0.1:PORT/metrics (default: none)",
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark conf (repeatable)"
    )


def kafka_endpoints(args: argparse.Namespace) -> None:
    """--bootstrap-server with --topic / --sink-topic written into --source / --sink."""
    args.source = kafka_target(args.source, args.bootstrap, args.topic, "--source", "--topic")
    args.sink = kafka_target(args.sink, args.bootstrap, args.sink_topic, "--sink", "--sink-topic")
    if args.source is None:
        raise ValueError("give --source file:DIR|kafka:HOST:PORT/TOPIC, or --bootstrap-server "
                         "with --topic")  # fmt: skip
    if args.bootstrap is not None and args.topic is None and args.sink_topic is None:
        raise ValueError("--bootstrap-server is used with --topic or --sink-topic")


def main(args: argparse.Namespace) -> int:
    try:
        kafka_endpoints(args)
        options = Options.from_args(args)
    except ValueError as error:
        print(f"kcsim run: {error}", file=sys.stderr)
        return 2
    if problem := preflight(options):
        print(f"kcsim run: {problem}", file=sys.stderr)
        return 2
    try:
        metrics = _metrics(getattr(args, "metrics_port", None))
    except OSError as error:
        print(f"kcsim run: --metrics-port {args.metrics_port}: {error}", file=sys.stderr)
        return 2
    from pyspark.errors import StreamingQueryException

    from streaming.job.ship_core import is_local_master, ship_core
    from streaming.lake.spark_session import build_session

    spark = build_session(
        "kcsim-run", options.master, options.spark_conf, verbose=getattr(args, "verbose", False)
    )
    arrow_on_the_c_heap()  # so that release_freed_memory returns Arrow's freed pages too
    try:
        with tempfile.TemporaryDirectory(prefix="kcsim-core-") as shipped:
            if not is_local_master(options.master):
                # executors elsewhere need not have kcsim: they get the core with the job
                ship_core(spark.sparkContext, Path(shipped))
            return run(spark, options, metrics=metrics)
    except StreamingQueryException as error:
        print(f"kcsim run: the query failed: {query_failure(error)}", file=sys.stderr)
        return 1
    finally:
        spark.stop()


def _metrics(port: int | None) -> Metrics | None:
    """`--metrics-port`: the job's metrics, served before Spark starts (OSError: the port
    cannot be listened on)."""
    if port is None:
        return None
    metrics = Metrics("run")
    bound = metrics.serve(port)
    print(f"kcsim run: metrics on http://127.0.0.1:{bound}/metrics", file=sys.stderr)
    return metrics


def preflight(options: Options) -> str | None:
    """What stops the run before Spark starts (one line), or None: the source, the sink and
    the lake are checked as `produce` checks its bootstrap, in seconds, and nothing is
    created. Without this, a missing directory was a Python traceback and an unreachable
    bootstrap 3 minutes of retries ending in a Java stack."""
    source = options.source
    if isinstance(source, FileSource):
        if problem := source.check():
            return problem
    elif problem := kafka_unreachable(source.bootstrap, source.client, "--source"):
        return problem
    if options.sink is not None and (
        problem := kafka_unreachable(options.sink.bootstrap, options.sink.client, "--sink")
    ):
        return problem
    for what, path in (("lake", options.lake), ("checkpoint", options.checkpoint)):
        if problem := unwritable(what, path):
            return problem
    return None


def unwritable(what: str, path: str) -> str | None:
    """Why a local directory cannot be used as the `what`, or None (it exists, or can be
    made: its nearest existing parent is a writable directory). Remote ones are Spark's."""
    if is_remote(path):
        return None
    if os.path.exists(path):
        if not os.path.isdir(path):
            return f"the {what} {path} is not a directory"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"the {what} directory {path} cannot be written"
        return None
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"the {what} {path} cannot be made: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the {what} {path} cannot be made: {parent} cannot be written"
    return None


def kafka_unreachable(bootstrap: str, client: KafkaClientConfig, option: str) -> str | None:
    """Why the Kafka cluster at `bootstrap` cannot be reached, or None: a bootstrap with
    `produce`'s client settings (given up after `BOOTSTRAP_TIMEOUT_MS`, 15 s), and the
    refusal behind a failure said as `produce` says it."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    from streaming.clients.kafka_config import ClientFailures

    with ClientFailures(client) as failures:
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap,
                client_id="kcsim-run-check",
                **client.kafka_python(),
            )
        except (KafkaError, OSError, ValueError) as error:
            return f"{option}: cannot reach Kafka at {bootstrap}: {failures.explain(error)}"
    admin.close()
    return None


_FILE_NAME_ERROR = re.compile(r"EventFileNameError: (.+)")
# how a SinkError raised in foreachBatch reads in the query's exception
SINK_ERROR = f"{SinkError.__module__}.{SinkError.__qualname__}"


def query_failure(error: Exception) -> str:
    """The first line of a failed query's cause, with what an authentication failure
    means for kcsim (Spark's text holds the Kafka client's exception, never its config),
    or the sink's own error (the last line of the Python traceback in it)."""
    text = str(error)
    sink = re.search(rf"^{re.escape(SINK_ERROR)}: (.+)$", text, re.MULTILINE)
    if sink:
        return f"the sink failed: {sink.group(1)}"
    if "SaslAuthenticationException" in text or "Authentication failed" in text:
        return (
            "Kafka refused the SASL credentials (authentication failed: check the user and "
            "password of --kafka-config)"
        )
    if "SSLHandshakeException" in text or "SslAuthenticationException" in text:
        return "the TLS handshake with Kafka failed (check --kafka-config's ssl.* settings)"
    if found := _FILE_NAME_ERROR.search(text):  # raised in the batch, under Spark's text
        return found.group(1)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__
