"""`kcsim`: one entry point; each command lives in its own module.

A command module exposes `configure(parser)` and `main(args) -> int`. Modules are imported
only when their command runs, so `kcsim replay` never loads Spark. `COMMANDS` holds, per
command, its module, its help, its exit statuses (the help's epilog) and the shared
options it uses (settings, `--engine`, `--verbose`): a command is given no option it
would ignore. `HelpFormatter` ends each option's help with its default.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from controller.config import ENGINE_KEY, ENGINES, ConfigError, Settings

SETTINGS = "settings"  # --config FILE, --set KEY=VALUE
ENGINE = "engine"  # --engine zk|kraft (the same as --set kcsim.engine=...)
VERBOSE = "verbose"  # --verbose: Spark's and Kafka's WARN lines too

USAGE_ERROR = "  2  bad usage: an unknown option, a missing or unreadable input\n"


@dataclass(frozen=True, slots=True)
class Command:
    """One command: its module (`configure(parser)`, `main(args)`), its one-line help, the
    shared options it takes (and uses), and what its exit statuses mean."""

    module: str
    help: str
    exits: str
    shared: tuple[str, ...] = ()


COMMANDS: dict[str, Command] = {
    "replay": Command(
        "controller.replay.command",
        "apply an event log through the core, no Spark",
        "  0  done; no event was rejected\n"
        "  1  done, but some events were rejected (the count and the first reasons are\n"
        "     printed; all are in OUT/rejected_events.jsonl)\n"
        "  2  bad usage or configuration: an unknown option or setting, a missing input,\n"
        "     an output directory that cannot be written\n"
        "  3  an internal error (a bug in kcsim; the traceback is printed)\n",
        (SETTINGS, ENGINE),
    ),
    "run": Command(
        "streaming.job.command",
        "the Spark Structured Streaming job (Delta tables)",
        "  0  the job stopped cleanly (--once: everything there was applied)\n"
        "  1  the job failed while running (the error is printed)\n"
        "  2  bad usage or configuration, or a source, sink or lake that cannot be used\n"
        "     (checked before Spark starts; nothing is created)\n",
        (SETTINGS, ENGINE, VERBOSE),
    ),
    "state": Command(
        "streaming.insight.state",
        "show cluster state from the lake (time travel), or Kafka's describe views",
        "  0  the state was printed\n"
        "  2  bad usage, no lake there, or a version or time the lake does not hold\n",
        (VERBOSE,),
    ),
    "history": Command(
        "streaming.insight.history",
        "a partition's changes, event by event, with each event's time",
        "  0  the partition's changes were printed\n"
        "  1  the lake holds no change of that partition\n"
        "  2  bad usage, no lake there, or --cluster needed (the lake holds several)\n",
        (VERBOSE,),
    ),
    "show": Command(
        "streaming.insight.show",
        "print a lake table (divergences, violations, ...) as a table or JSON lines",
        "  0  the rows were printed (none may match)\n"
        "  2  bad usage, no lake there, or a filter the table has no column for\n",
        (VERBOSE,),
    ),
    "kafka-local": Command(
        "streaming.local_clusters.kafka_local",
        "a local Kafka: KRaft single node, --nodes N KRaft cluster, or --zk cluster",
        "  0  done\n"
        "  1  the action failed (the error is printed: a cluster that did not start, a\n"
        "     topic Kafka refused, ...)\n" + USAGE_ERROR,
    ),
    "produce": Command(
        "streaming.chaos.produce",
        "produce scenario or chaos events to Kafka",
        "  0  every record was produced\n"
        "  1  Kafka could not be reached, or some records failed (the count is printed)\n"
        "  2  bad usage: an unknown option or setting, a missing scenario, a bad\n"
        "     --command-config\n",
        (SETTINGS,),
    ),
    "shadow": Command(
        "streaming.shadow.command",
        "watch a Kafka cluster (ZooKeeper mode or KRaft), write its events",
        "  0  stopped cleanly (--once: the present state was written; else SIGTERM/SIGINT)\n"
        "  1  the cluster or the output was lost for good (the error is printed)\n"
        "  2  bad usage or configuration (a bad --zookeeper-config or --command-config)\n",
    ),
    "import": Command(
        "streaming.importers.command",
        "ZooKeeper-mode controller logs (zk-logs) or a KRaft log (kraft-log) -> events",
        "  see `kcsim import zk-logs --help` and `kcsim import kraft-log --help`\n",
    ),
    "report": Command(
        "streaming.insight.report",
        "one offline HTML page of plots of a replay or a lake",
        "  0  the page was written\n" + USAGE_ERROR,
    ),
    "whatif": Command(
        "streaming.insight.whatif",
        "the same events under two or more settings, side by side",
        "  0  every run was compared\n"
        "  1  a run's output could not be read back (the error is printed)\n"
        "  2  bad usage or configuration: an unknown setting, a --vs that is not\n"
        "     KEY=VALUE, missing EVENTS\n",
        (SETTINGS, ENGINE),
    ),
    "plan": Command(
        "streaming.plan.command",
        "preview a roll, reassignment or decommission, by step",
        "  0  no step leaves a partition without a leader or under its min.insync.replicas\n"
        "  2  bad usage or input\n"
        "  4  some step does (a deployment pipeline can gate on it)\n",
        (SETTINGS,),
    ),
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; each option's help ends with its default,
    unless the help already says it or there is none to say (None, False, empty)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
            or not action.option_strings
            or "default" in text
        ):
            return text
        return f"{text} (default: %(default)s)"


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
        named = [
            o.partition("=")[2].strip()
            for o in overrides
            if o.partition("=")[0].strip() == ENGINE_KEY
        ]
        if named and named[-1] != engine:
            print(
                f"kcsim: --engine {engine} wins over --set {ENGINE_KEY}={named[-1]}",
                file=sys.stderr,
            )
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


def add_verbose_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose", action="store_true", help="also print Spark's and Kafka's WARN lines"
    )


SHARED = {
    SETTINGS: add_settings_arguments,
    ENGINE: add_engine_argument,
    VERBOSE: add_verbose_argument,
}


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, str | None]:
    parser = argparse.ArgumentParser(
        prog="kcsim",
        description=__doc__.splitlines()[0],
        epilog="exit status: 0 done, 1 the work failed, 2 bad usage; each command's own "
        "meanings are in `kcsim COMMAND --help`",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kcsim {kcsim_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, spec in COMMANDS.items():
        command = sub.add_parser(
            name,
            help=spec.help,
            description=spec.help,
            epilog="exit status:\n" + spec.exits,
            formatter_class=HelpFormatter,
        )
        if name == chosen:
            for option in spec.shared:
                SHARED[option](command)
            importlib.import_module(spec.module).configure(command)
    return parser, chosen if chosen in COMMANDS else None


def take_loose_words(
    parser: argparse.ArgumentParser, chosen: str | None, args: argparse.Namespace, extras: list[str]
) -> None:
    """Words argparse left over. argparse fills a list positional from the first run of
    words only, so a command whose positional words may also follow its options (whatif's
    EVENTS) names that list in `LOOSE_POSITIONAL` and gets them there; anything else, or
    an unknown option, is argparse's own error."""
    module = importlib.import_module(COMMANDS[chosen].module) if chosen is not None else None
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
    try:
        return int(importlib.import_module(COMMANDS[chosen].module).main(args))
    except BrokenPipeError:
        # the reader went away (`kcsim show ... | head`): not an error of the command;
        # stdout pointed at /dev/null so the interpreter's flush at exit fails no more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
