"""Each command takes only the options it uses, each with a help text showing its default,
and its own exit-status text; `import zk-logs|kraft-log` are subcommands with their own
options; `run` and `shadow` take Kafka's `--bootstrap-server HOST:PORT --topic T` as well
as `kafka:HOST:PORT/TOPIC`."""

from __future__ import annotations

import argparse

import pytest

from streaming.cli import COMMANDS, ENGINE, SETTINGS, VERBOSE, build_parser, main


def command_parser(*words: str) -> argparse.ArgumentParser:
    parser, _ = build_parser(list(words))
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for name in COMMANDS:
        parser = command_parser(name)
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            found += [(f"{name} {sub}", command_parser(name, sub)) for sub in subs[0].choices]
        else:
            found.append((name, parser))
    return found


@pytest.mark.parametrize(("name", "parser"), parsers(), ids=lambda v: str(v)[:20])
def test_every_option_has_a_help_text_showing_its_default(
    name: str, parser: argparse.ArgumentParser
) -> None:
    text = parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{name} {action.option_strings or action.dest}: no help"
        default = action.default
        if action.option_strings and default not in (None, False, [], argparse.SUPPRESS):
            shown = parser._get_formatter()._get_help_string(action) or ""
            assert "default" in shown, f"{name} {action.option_strings}: default not shown"
    assert "exit status:" in text


def test_each_command_has_its_own_exit_statuses() -> None:
    epilogs = {name: parser.epilog for name, parser in parsers()}
    assert len(set(epilogs.values())) == len(epilogs)
    assert "  3  an internal error" in (epilogs["replay"] or "")
    assert "  4  some step" in (epilogs["plan"] or "")
    assert "  1  the lake holds no change" in (epilogs["history"] or "")
    assert "replay" not in (epilogs["run"] or "")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_shared_options_only_where_used(name: str) -> None:
    shared = COMMANDS[name].shared
    options = {o for a in command_parser(name)._actions for o in a.option_strings}
    assert ("--config" in options) == (SETTINGS in shared) or name == "kafka-local"
    assert ("--set" in options) == (SETTINGS in shared)
    assert ("--engine" in options) == (ENGINE in shared) or name == "plan"
    assert ("--verbose" in options) == (VERBOSE in shared)


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--replay", "r", "--out", "o.html", "--verbose"],
        ["replay", "examples/events", "--out", "o", "--verbose"],
        ["import", "zk-logs", "d", "--out", "o", "--set", "a=b"],
        ["import", "zk-logs", "d", "--out", "o", "--from-snapshot"],
        ["import", "kraft-log", "d", "--out", "o", "--pattern", "%m%n"],
        ["shadow", "--zookeeper", "h:1", "--out", "file:o", "--config", "x.properties"],
        ["history", "--lake", "l", "--topic", "t", "--partition", "0", "--set", "a=b"],
    ],
)
def test_an_option_a_command_does_not_use_is_an_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """These were accepted and silently did nothing."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_import_subcommands_have_their_own_options() -> None:
    zk = {o for a in command_parser("import", "zk-logs")._actions for o in a.option_strings}
    kraft = {o for a in command_parser("import", "kraft-log")._actions for o in a.option_strings}
    assert "--pattern" in zk - kraft and "--from-snapshot" in kraft - zk
    assert {"--out", "--cluster", "--quiet"} <= zk & kraft


def _run_args(*words: str) -> argparse.Namespace:
    argv = ["run", "--lake", "lake", *words]
    parser, _ = build_parser(argv)
    return parser.parse_args(argv)


def test_run_takes_bootstrap_server_and_topic_for_source_and_sink() -> None:
    from streaming.job.command import kafka_endpoints

    args = _run_args("--bootstrap-server", "h:9092", "--topic", "ev", "--sink-topic", "out")
    kafka_endpoints(args)
    assert (args.source, args.sink) == ("kafka:h:9092/ev", "kafka:h:9092/out")
    args = _run_args("--source", "file:events", "--bootstrap-server", "h:1", "--sink-topic", "o")
    kafka_endpoints(args)
    assert (args.source, args.sink) == ("file:events", "kafka:h:1/o")
    args = _run_args("--source", "kafka:h:1/t")
    kafka_endpoints(args)
    assert (args.source, args.sink) == ("kafka:h:1/t", None)


@pytest.mark.parametrize(
    ("words", "error"),
    [
        (["--source", "file:e", "--bootstrap-server", "h:1", "--topic", "t"], "not both"),
        (["--topic", "t"], "--topic needs --bootstrap-server"),
        (["--bootstrap-server", "h:1"], "give --source"),
        (["--source", "file:e", "--bootstrap-server", "h:1"], "used with --topic"),
        ([], "give --source"),
    ],
)
def test_run_refuses_a_half_given_kafka_address_before_spark(
    words: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--lake", "lake", *words]) == 2
    assert error in capsys.readouterr().err


def test_shadow_takes_bootstrap_server_and_topic_for_its_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from streaming.clients.kafka_address import kafka_target

    argv = ["shadow", "--zookeeper", "h:2181", "--bootstrap-server", "k:9092", "--topic", "ev"]
    parser, _ = build_parser(argv)
    args = parser.parse_args(argv)
    assert kafka_target(args.out, args.bootstrap, args.topic, "--out", "--topic") == (
        "kafka:k:9092/ev"
    )
    assert main([*argv, "--out", "file:o"]) == 2
    assert "give --out or --bootstrap-server with --topic, not both" in capsys.readouterr().err
    assert main(["shadow", "--zookeeper", "h:2181"]) == 2
    assert "give --out" in capsys.readouterr().err
