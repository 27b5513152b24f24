"""`kcsim`: one entry point; each command lives in its own module.

A command module exposes `configure(parser)` and `main(args) -> int`. Modules are imported
only when their command runs, so `kcsim replay` never loads Spark.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from controller.config import ENGINE_KEY, ENGINES, ConfigError, Settings

COMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("controller.replay.command", "apply an event log through the core, no Spark"),
    "run": ("streaming.job.command", "the Spark Structured Streaming job (Delta tables)"),
    "state": ("streaming.insight.state", "show cluster state from the lake (time travel)"),
    "history": ("streaming.insight.history", "a partition's leader/ISR/epoch changes"),
    "kafka-local": (
        "streaming.local_clusters.kafka_local",
        "a local Kafka: KRaft single node, or --zk cluster",
    ),
    "produce": ("streaming.chaos.produce", "produce scenario or chaos events to Kafka"),
    "shadow": (
        "streaming.shadow.command",
        "watch a ZooKeeper-mode Kafka cluster, write its events",
    ),
    "import": (
        "streaming.importers.command",
        "ZooKeeper-mode controller logs or a KRaft log -> events",
    ),
    "report": ("streaming.insight.report", "one offline HTML page of plots of a replay or a lake"),
    "whatif": (
        "streaming.insight.whatif",
        "the same events under two or more settings, side by side",
    ),
    "plan": ("streaming.plan.command", "preview a roll, reassignment or decommission, by step"),
}


# the commands that apply events and offer `--engine` for `--set kcsim.engine=...`
ENGINE_COMMANDS = frozenset({"replay", "run", "whatif"})

EXIT_STATUSES = """\
exit status:
  0  done; nothing was rejected (`replay`), or the job stopped cleanly (`run`)
  1  `replay`: done, but some events were rejected (see rejected_events.jsonl);
     other commands: the work failed (an error is printed)
  2  bad usage or configuration: an unknown option or setting, a missing input,
     an output directory that cannot be written
  3  `replay`: an internal error (a bug in kcsim; the traceback is printed)
"""


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="Java .properties file of settings")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting; wins over --config (repeatable)",
    )


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        help=f"the controller to simulate: zk (Kafka 3.7's ZooKeeper mode, the default) or "
        f"kraft (Kafka 4.1.1's KRaft controller); the same as --set {ENGINE_KEY}=...",
    )


def load_settings(args: argparse.Namespace) -> Settings:
    overrides = list(getattr(args, "overrides", ()))
    engine = getattr(args, "engine", None)
    if engine is not None:
        # (written back, so a command that re-reads --set, as whatif does, sees it too)
        overrides.append(f"{ENGINE_KEY}={engine}")
        args.overrides = overrides
    return Settings.load(getattr(args, "config", None), overrides)


def kcsim_version() -> str:
    """The installed distribution's version; from pyproject.toml when run from a checkout
    that is not installed."""
    try:
        return metadata.version("kcsim")
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        with pyproject.open("rb") as handle:
            return str(tomllib.load(handle)["project"]["version"])


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, str | None]:
    parser = argparse.ArgumentParser(
        prog="kcsim",
        description=__doc__.splitlines()[0],
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kcsim {kcsim_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(
            name,
            help=help_text,
            epilog=EXIT_STATUSES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_settings_arguments(command)
        if name in ENGINE_COMMANDS:
            add_engine_argument(command)
        command.add_argument(
            "--verbose", action="store_true", help="also print Spark's and Kafka's WARN lines"
        )
        if name == chosen:
            importlib.import_module(module).configure(command)
    return parser, chosen if chosen in COMMANDS else None


def take_loose_words(
    parser: argparse.ArgumentParser, chosen: str | None, args: argparse.Namespace, extras: list[str]
) -> None:
    """Words argparse left over. argparse fills a list positional from the first run of
    words only, so a command whose positional words may also follow its options (whatif's
    EVENTS) names that list in `LOOSE_POSITIONAL` and gets them there; anything else, or
    an unknown option, is argparse's own error."""
    module = importlib.import_module(COMMANDS[chosen][0]) if chosen is not None else None
    name = getattr(module, "LOOSE_POSITIONAL", None)
    if name is None or any(word.startswith("-") for word in extras):
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    getattr(args, name).extend(extras)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, chosen = build_parser(argv)
    args, extras = parser.parse_known_args(argv)
    if extras:
        take_loose_words(parser, chosen, args, extras)
    if chosen is None:
        parser.print_help()
        return 2
    try:
        args.settings = load_settings(args)
    except (ConfigError, OSError) as error:
        print(f"kcsim: configuration error: {error}", file=sys.stderr)
        return 2
    return int(importlib.import_module(COMMANDS[chosen][0]).main(args))


if __name__ == "__main__":
    sys.exit(main())
