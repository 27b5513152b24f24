"""`kcsim whatif` on examples/whatif: the same events under two settings, each run a replay
in its own process. Totals and differing final leaders are asserted exactly (SPEC §9: an
unclean election needs `unclean.leader.election.enable`; SPEC §12.3: the auto rebalance
acts on a broker whose imbalance ratio exceeds `leader.imbalance.per.broker.percentage`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.cli import main

WHATIF = Path(__file__).resolve().parents[3] / "examples" / "whatif"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["whatif", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_two_broker_failure_unclean_false_vs_true(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "whatif.html"
    lines = run(
        capsys,
        str(WHATIF / "two-broker-failure.jsonl"),
        "--set",
        "unclean.leader.election.enable=false",
        "--vs",
        "unclean.leader.election.enable=true",
        "--report",
        str(page),
    )
    # offline partition-events, unclean elections, leader changes, requests, rejected
    # (then the KRaft engine's records, ELR and last-known-leader elections)
    assert lines[1].split()[-8:-3] == ["10", "0", "12", "62", "0"]
    assert lines[2].split()[-8:-3] == ["0", "2", "10", "54", "0"]
    assert lines[4] == "final leaders that differ (2 partitions):"
    # orders-0 (ISR [1, 2]) and orders-1 (ISR [2, 1]) lose their whole ISR: clean, they
    # wait for broker 2 (the last ISR member); unclean, replicas 3 and 4 take over
    assert [line.split() for line in lines[6:8]] == [
        ["default", "orders", "0", "2", "3"],
        ["default", "orders", "1", "2", "4"],
    ]
    text = page.read_text(encoding="utf-8")
    assert 'id="whatif-0"' in text and "run 1: unclean.leader.election.enable=true" in text


def test_rebalance_threshold_10_vs_25_percent(capsys: pytest.CaptureFixture[str]) -> None:
    lines = run(
        capsys,
        str(WHATIF / "rebalance.jsonl"),
        "--set",
        "leader.imbalance.per.broker.percentage=10",
        "--vs",
        "leader.imbalance.per.broker.percentage=25",
    )
    assert lines[1].split()[-8:-3] == ["0", "0", "24", "86", "0"]
    assert lines[2].split()[-8:-3] == ["0", "0", "23", "80", "0"]
    # broker 1 is preferred for all 8 partitions and leads 7: a ratio of 1/8 = 12.5 %,
    # over 10 % (ledger-7 moves back to broker 1), under 25 % (it stays on broker 3)
    assert lines[4] == "final leaders that differ (1 partition):"
    assert lines[6].split() == ["default", "ledger", "7", "1", "3"]


def test_same_settings_give_the_same_leaders(capsys: pytest.CaptureFixture[str]) -> None:
    lines = run(
        capsys,
        str(WHATIF / "rebalance.jsonl"),
        "--vs",
        "leader.imbalance.per.broker.percentage=10",
        "--vs",
        "auto.leader.rebalance.enable=true",
    )
    assert lines[1].split()[-8:-3] == lines[2].split()[-8:-3] == lines[3].split()[-8:-3]
    assert lines[5] == "final leaders: the same in every run"


def test_bad_setting_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["whatif", str(WHATIF / "rebalance.jsonl"), "--vs", "no.such.key=1"]
    assert main(argv) == 2
    assert "no.such.key" in capsys.readouterr().err


@pytest.mark.parametrize(
    "order",
    [
        ["EVENTS", "--set", "SET", "--vs", "VS"],
        ["--vs", "VS", "EVENTS", "--set", "SET"],
        ["--set", "SET", "--vs", "VS", "EVENTS"],
    ],
    ids=["events-first", "events-between", "events-last"],
)
def test_events_may_come_before_between_or_after_the_options(
    capsys: pytest.CaptureFixture[str], order: list[str]
) -> None:
    """`--vs` takes one argument, so EVENTS after it is EVENTS, not a setting (SPEC §12.3:
    the run at 25 % leaves ledger-7 on broker 3)."""
    words = {
        "EVENTS": str(WHATIF / "rebalance.jsonl"),
        "SET": "leader.imbalance.per.broker.percentage=10",
        "VS": "leader.imbalance.per.broker.percentage=25",
    }
    lines = run(capsys, *(words.get(w, w) for w in order))
    assert lines[1].split()[:2] == ["0", "leader.imbalance.per.broker.percentage=10"]
    assert lines[2].split()[:2] == ["1", "leader.imbalance.per.broker.percentage=25"]
    assert lines[6].split() == ["default", "ledger", "7", "1", "3"]


def test_one_vs_changes_several_settings_comma_separated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run 1 turns the rebalance off and raises the threshold: the totals of a run without
    rebalance (no check acts, SPEC §12.3), not those of the 25 % run."""
    lines = run(
        capsys,
        "--vs",
        "auto.leader.rebalance.enable=false,leader.imbalance.per.broker.percentage=25",
        str(WHATIF / "rebalance.jsonl"),
        "--vs",
        "auto.leader.rebalance.enable=false",
    )
    assert lines[2].split()[1:3] == [
        "auto.leader.rebalance.enable=false",
        "leader.imbalance.per.broker.percentage=25",
    ]
    assert lines[2].split()[-8:-3] == lines[3].split()[-8:-3]
    assert lines[1].split()[-8:-3] == ["0", "0", "24", "86", "0"]
    assert lines[2].split()[-8:-3] != lines[1].split()[-8:-3]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--vs", "unclean.leader.election.enable=true"], "kcsim whatif: missing EVENTS"),
        (
            ["--vs", "unclean.leader.election.enable=true", "--set", "delete.topic.enable=true"],
            "kcsim whatif: missing EVENTS",
        ),
        (
            [
                str(WHATIF / "rebalance.jsonl"),
                "--vs",
                "auto.leader.rebalance.enable=false",
                "leader.imbalance.per.broker.percentage=25",
            ],
            "'leader.imbalance.per.broker.percentage=25' is not EVENTS: each --vs takes one "
            "argument",
        ),
        (
            [
                str(WHATIF / "rebalance.jsonl"),
                "--vs",
                "auto.leader.rebalance.enable=false",
                str(WHATIF / "two-broker-failure.jsonl"),
            ],
            "kcsim whatif: one EVENTS, got 2",
        ),
    ],
    ids=["no-events", "no-events-after-set", "two-settings-after-one-vs", "two-events"],
)
def test_a_missing_or_stray_events_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    assert main(["whatif", *argv]) == 2
    captured = capsys.readouterr()
    assert error in captured.err and captured.out == ""


def test_a_vs_without_key_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_status:
        main(["whatif", str(WHATIF / "rebalance.jsonl"), "--vs", "unclean"])
    assert exit_status.value.code == 2
    assert "argument --vs: expected KEY=VALUE[,KEY=VALUE...], got 'unclean'" in (
        capsys.readouterr().err
    )
