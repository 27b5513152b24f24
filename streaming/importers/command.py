"""`kcsim import zk-logs|kraft-log DIR --out EVENTS`: a cluster's logs -> CONTRACT §1 events.

The command's arguments, and which importer reads the logs: `zk_logs` (a ZooKeeper-mode
cluster's controller.log and state-change.log files) or `kraft_log` (a KRaft cluster's
`__cluster_metadata` log).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streaming.importers import kraft_log, zk_logs
from streaming.importers.zk_logs import DEFAULT_PATTERN


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        choices=["zk-logs", "kraft-log"],
        help="zk-logs: a ZooKeeper-mode cluster's controller logs; kraft-log: a KRaft "
        "cluster's __cluster_metadata log directory",
    )
    parser.add_argument(
        "dir",
        type=Path,
        help="zk-logs: directory with the brokers' logs (recursive); kraft-log: the "
        "__cluster_metadata-0 directory (segments and snapshots)",
    )
    parser.add_argument(
        "--out", required=True, help="events file, a directory of event files, or - (stdout)"
    )
    parser.add_argument("--cluster", default="default", help="the events' cluster name")
    parser.add_argument(
        "--pattern",
        help="zk-logs: log4j ConversionPattern of the logs (default: Kafka's, "
        f"'{DEFAULT_PATTERN.replace('%', '%%')}')",
    )
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")
    parser.add_argument(
        "--from-snapshot",
        action="store_true",
        help="kraft-log: start at the latest snapshot, not at the log's first record",
    )


def main(args: argparse.Namespace) -> int:
    if args.source == "kraft-log":
        if args.pattern is not None:
            print("kcsim import: --pattern is for zk-logs (a KRaft log is binary)", file=sys.stderr)
            return 2
        return kraft_log.main(args)
    if args.from_snapshot:
        print("kcsim import: --from-snapshot is for kraft-log", file=sys.stderr)
        return 2
    return zk_logs.main(args)
