"""`kcsim import zk-logs|kraft-log DIR --out EVENTS`: a cluster's logs -> CONTRACT §1 events.

Two subcommands, each with its own options and exit statuses, and the importer that
reads the logs: `zk_logs` (a ZooKeeper-mode cluster's controller.log and state-change.log
files) or `kraft_log` (a KRaft cluster's `__cluster_metadata` log).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from streaming.importers import kraft_log, zk_logs
from streaming.importers.zk_logs import DEFAULT_PATTERN

ZK_LOGS_EXITS = """exit status:
  0  every line was understood (lines of a known, benign kind are skipped and counted)
  1  some lines were not understood (the first are listed, with their files and lines);
     the events of the rest are written
  2  bad usage: no directory there, no controller.log* or state-change.log* under it,
     a bad --pattern
"""
KRAFT_LOG_EXITS = """exit status:
  0  the log was decoded whole
  1  the decoder stopped on a problem (printed); the events before it are written
  2  bad usage: no __cluster_metadata directory there, Kafka's jars missing
"""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", required=True, help="events file, a directory of event files, or - (stdout)"
    )
    parser.add_argument("--cluster", default="default", help="the cluster name the events carry")
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")


def configure(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="source", metavar="zk-logs|kraft-log", required=True)
    zk = kinds.add_parser(
        "zk-logs",
        help="a ZooKeeper-mode cluster's controller.log and state-change.log files",
        description="a ZooKeeper-mode cluster's controller.log* and state-change.log* files "
        "(several brokers, rotations) -> events carrying `observed`",
        epilog=ZK_LOGS_EXITS,
        formatter_class=parser.formatter_class,
    )
    zk.add_argument(
        "dir", type=Path, help="directory holding the brokers' logs (searched recursively)"
    )
    _common(zk)
    zk.add_argument(
        "--pattern",
        default=DEFAULT_PATTERN,
        help="log4j ConversionPattern of the logs (default: Kafka's, %(default)s)",
    )
    kraft = kinds.add_parser(
        "kraft-log",
        help="a KRaft cluster's __cluster_metadata log",
        description="a KRaft cluster's __cluster_metadata-0 directory (segments and "
        "snapshots, read with Kafka's own decoder) -> events carrying `observed`",
        epilog=KRAFT_LOG_EXITS,
        formatter_class=parser.formatter_class,
    )
    kraft.add_argument(
        "dir", type=Path, help="the __cluster_metadata-0 directory (segments and snapshots)"
    )
    _common(kraft)
    kraft.add_argument(
        "--from-snapshot",
        action="store_true",
        help="start at the latest snapshot, not at the log's first record",
    )


def main(args: argparse.Namespace) -> int:
    if args.source == "kraft-log":
        return kraft_log.main(args)
    return zk_logs.main(args)
