"""`kcsim plan` end to end (CONTRACT §6): state sources, the table, --json, --proposal,
--report, and exit statuses 0, 4 and 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.plan.steps import parse_reassignment_json
from streaming.cli import main

ROOT = Path(__file__).resolve().parents[3]
KRAFT_LOG = ROOT / "tests/data/kraft-4.1.1/__cluster_metadata-0"

STATE = [
    {"type": "broker_startup", "brokers": [1, 2, 3, 4]},
    {
        "type": "topic_creation",
        "topic": "orders",
        "assignment": {"0": [1, 2, 3], "1": [2, 3, 4], "2": [3, 4, 1], "3": [4, 1, 2]},
        "configs": {"min.insync.replicas": "2"},
    },
]
PAIRS = {
    "type": "topic_creation",
    "topic": "pairs",
    "assignment": {"0": [1, 2], "1": [3, 4]},
    "configs": {"min.insync.replicas": "2"},
}


def write_events(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def plan(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_safe_roll_exits_0_with_its_table_and_json(tmp_path, capsys) -> None:
    state = write_events(tmp_path / "state.jsonl", STATE)
    out_json = tmp_path / "plan.json"
    code, out, err = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1,2,3,4", "--json", str(out_json)
    )
    assert (code, err) == (0, "")
    assert "verdict: safe: every partition stays led and at or above min.insync.replicas" in out
    doc = json.loads(out_json.read_text())
    assert (doc["verdict"], doc["exit_status"], doc["engine"], doc["partitions"]) == (
        "safe",
        0,
        "zk",
        4,
    )
    assert [s["label"] for s in doc["steps"]][:2] == ["stop 1", "start 1"]
    assert [(s["under_min_isr"], s["offline"], s["under_replicated"]) for s in doc["steps"]] == [
        (0, 0, 3),
        (0, 0, 0),
    ] * 4
    assert doc["proposal"] is None
    assert doc["leaders_before"] == {"1": 1, "2": 1, "3": 1, "4": 1}
    # per step, the state after it of every partition it changed (before: all of them)
    assert doc["before"]["states"]["orders-0"] == {
        "leader": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3]
    }  # fmt: skip
    stop_1, start_1 = doc["steps"][:2]
    assert sorted(stop_1["states"]) == ["orders-0", "orders-2", "orders-3"]  # 1's replicas
    assert stop_1["states"]["orders-0"] == {"leader": 2, "isr": [2, 3], "replicas": [1, 2, 3]}
    assert start_1["states"]["orders-0"] == {
        "leader": 2, "isr": [2, 3, 1], "replicas": [1, 2, 3]
    }  # fmt: skip
    assert "states" not in doc["worst_step"]


def test_an_unsafe_roll_exits_4_naming_partitions_and_says_none_is_safe(tmp_path, capsys) -> None:
    state = write_events(tmp_path / "state.jsonl", [*STATE, PAIRS])
    code, out, table = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1,3", "--json", "-"
    )
    assert code == 4
    # --json -: stdout holds the JSON alone, for a pipeline; the table goes to stderr
    assert "worst step: 1 (stop 1)\n  under min.insync.replicas: pairs-0\n" in table
    assert "no safe order exists" in table
    doc = json.loads(out)
    assert doc["worst_step"]["under_min_isr_partitions"] == ["pairs-0"]
    assert [p["partition"] for p in doc["proposal"]["impossible"]] == ["pairs-0", "pairs-1"]


def test_a_queued_deletion_is_named_and_its_end_counted(tmp_path, capsys) -> None:
    """SPEC §15: a topic deleted while its replicas' broker is dead stays queued, its
    partitions without a leader, until that broker returns. A roll of the other brokers
    cannot mend them, and the proposal says they are being deleted; a step that starts
    the broker lets the deletion finish, and the plan counts the partitions before and
    after."""
    gone = {"type": "topic_creation", "topic": "gone", "assignment": {"0": [4], "1": [4]}}
    state = write_events(
        tmp_path / "state.jsonl",
        [*STATE, gone, {"type": "broker_failure", "broker": 4},
         {"type": "topic_deletion", "topic": "gone"}],
    )  # fmt: skip
    code, out, table = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1", "--json", "-"
    )
    assert code == 4
    assert table.startswith("kcsim plan: cluster default, 6 partitions, engine zk; ")
    doc = json.loads(out)
    assert (doc["partitions"], doc["partitions_after"]) == (6, 6)
    assert doc["before"]["offline_partitions"] == ["gone-0", "gone-1"]
    reasons = {p["partition"]: p["reason"] for p in doc["proposal"]["impossible"]}
    assert sorted(reasons) == ["gone-0", "gone-1", "orders-2", "orders-3"]  # orders: 4 is down
    assert (
        reasons["gone-0"]
        == reasons["gone-1"]
        == ("has no live leader before the first step (its topic is queued for deletion)")
    )
    assert reasons["orders-2"].endswith(
        "(down: [4]), min ISR 2: stopping any of them leaves it under min ISR"
    )
    start = write_events(tmp_path / "start.jsonl", [{"type": "broker_startup", "broker": 4}])
    code, out, table = plan(
        capsys, "--state", f"events:{state}", "--steps", str(start), "--json", "-"
    )
    assert code == 0
    assert table.startswith("kcsim plan: cluster default, 6 partitions (4 after the steps), ")
    doc = json.loads(out)
    assert (doc["partitions"], doc["partitions_after"]) == (6, 4)
    assert doc["steps"][0]["offline_partitions"] == []


def test_a_roll_made_safe_by_its_order(tmp_path, capsys) -> None:
    # orders-0's replica on 3 lags: rolling 3 first brings it back before 1 or 2 stops
    lag = {"type": "isr_change", "topic": "orders", "partition": 0, "isr": [1, 2]}
    state = write_events(tmp_path / "state.jsonl", [*STATE, lag])
    proposal = tmp_path / "proposal.txt"
    code, out, _ = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1,2,3", "--proposal", str(proposal)
    )
    assert code == 4
    # the lag is named, with what the plan assumes of it
    assert (
        "  (1 partition has a live replica outside the ISR (orders-0: 3): the plan takes such a "
        "replica to have caught up when a broker hosting its partition next starts)\n" in out
    )
    assert "  safe order: roll:3,1,2\n  planned again through the controller: safe" in out
    assert proposal.read_text() == "roll:3,1,2\n# safe order: roll:3,1,2\n"


def test_decommission_writes_kafka_json_and_exits_0(tmp_path, capsys) -> None:
    state = write_events(tmp_path / "state.jsonl", STATE)
    proposal = tmp_path / "move.json"
    code, out, _ = plan(
        capsys,
        "--state",
        f"events:{state}",
        "--steps",
        "decommission:4",
        "--proposal",
        str(proposal),
    )
    assert code == 0
    moves = parse_reassignment_json(proposal.read_text(), "move.json")
    assert [m[:2] for m in moves] == [("orders", 1), ("orders", 2), ("orders", 3)]
    assert all(4 not in replicas for _, _, replicas in moves)
    assert "stop 4" in out
    # the proposal, given back as reassign:FILE, plans the same moves
    code, out, _ = plan(capsys, "--state", f"events:{state}", "--steps", f"reassign:{proposal}")
    assert code == 0 and out.count("move orders-") == 3


def test_decommission_of_a_dead_broker_warns_of_partitions_only_it_holds(tmp_path, capsys) -> None:
    """Broker 4 is down and holds `solo-0`'s only replica: the proposal still moves it (the
    operator wants 4 gone), and says the move cannot finish until 4 returns."""
    solo = {"type": "topic_creation", "topic": "solo", "assignment": {"0": [4]}}
    state = write_events(
        tmp_path / "state.jsonl", [*STATE, solo, {"type": "broker_failure", "broker": 4}]
    )
    code, out, _ = plan(
        capsys, "--state", f"events:{state}", "--steps", "decommission:4", "--json", "-"
    )
    proposal = json.loads(out)["proposal"]
    assert proposal["stranded"] == ["solo-0"]
    assert proposal["text"][1] == (
        "warning: broker 4 is down and holds the only replica of 1 partition (solo-0): with "
        "nothing to copy from, no such move finishes until 4 returns"
    )
    assert code == 4  # solo-0 has no leader before the first step


def test_auto_rebalance_follows_each_engines_rule(tmp_path, capsys) -> None:
    """SPEC §12.3 against SPEC-KRAFT §15.2 (corner case D9): broker 1 is the preferred
    leader of 11 partitions and leads 10. One imbalanced partition in 11 is 9%, not above
    leader.imbalance.per.broker.percentage (10): the ZooKeeper-mode check elects nothing.
    KRaft's check has no ratio and elects every imbalanced partition."""
    events = [
        {"type": "broker_startup", "brokers": [1, 2]},
        {"type": "topic_creation", "topic": "big",
         "assignment": {str(p): [1, 2] for p in range(11)}},
        {"type": "broker_failure", "broker": 1},
        {"type": "broker_startup", "broker": 1},
        *({"type": "isr_change", "topic": "big", "partition": p, "isr": [2, 1]}
          for p in range(1, 11)),
        {"type": "leader_election", "election": "preferred",
         "partitions": [{"topic": "big", "partition": p} for p in range(1, 11)]},
    ]  # fmt: skip
    state = write_events(tmp_path / "state.jsonl", events)
    catch_up = write_events(
        tmp_path / "steps.jsonl",
        [{"type": "isr_change", "topic": "big", "partition": 0, "isr": [2, 1]}],
    )
    after = {}
    for engine in ("zk", "kraft"):
        code, out, _ = plan(
            capsys, "--state", f"events:{state}", "--steps", str(catch_up), "--engine", engine,
            "--auto-rebalance", "end", "--json", "-",
        )  # fmt: skip
        assert code == 0
        steps = json.loads(out)["steps"]
        assert [s["label"] for s in steps][-1] == "auto rebalance"
        after[engine] = (steps[-1]["leader_moves"], steps[-1]["not_preferred"])
        assert steps[-1]["output"] == (0 if engine == "zk" else 1)
    assert after == {"zk": (0, 1), "kraft": (1, 0)}


def test_auto_rebalance_after_each_start_of_a_roll(tmp_path, capsys) -> None:
    """`each-start`: one run of the check after every broker's start; after the roll
    every partition is led by its preferred replica again (SPEC §12.3)."""
    state = write_events(tmp_path / "state.jsonl", STATE)
    code, out, _ = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1,2", "--auto-rebalance",
        "each-start", "--json", "-",
    )  # fmt: skip
    assert code == 0
    steps = json.loads(out)["steps"]
    assert [(s["step"], s["label"]) for s in steps] == [
        (1, "stop 1"), (2, "start 1"), (3, "auto rebalance after start 1"),
        (4, "stop 2"), (5, "start 2"), (6, "auto rebalance after start 2"),
    ]  # fmt: skip
    assert [s["not_preferred"] for s in steps] == [1, 1, 0, 1, 1, 0]


def test_report_is_one_offline_page(tmp_path, capsys) -> None:
    state = write_events(tmp_path / "state.jsonl", [*STATE, PAIRS])
    report = tmp_path / "plan.html"
    code, out, _ = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1", "--report", str(report)
    )
    assert code == 4
    page = report.read_text()
    assert 'id="plan-timeline"' in page and 'id="plan-leaders"' in page
    assert "<script src=" not in page  # plotly.js inlined
    assert "<td class=text>under min ISR: pairs-0</td>" in page  # the step's named partitions
    assert "worst: stop 1" in page
    assert f"report: {report}" in out


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ("roll:1,9", "kcsim plan: roll: unknown broker 9 (the state knows 1, 2, 3, 4)\n"),
        ("roll:", "kcsim plan: roll: expected broker ids separated by commas, got ''\n"),
        ("decommission:1,2", "kcsim plan: decommission: one broker at a time, got '1,2'\n"),
        ("nope.jsonl", "kcsim plan: --steps 'nope.jsonl': expected roll:B1,B2,..., reassign:FILE"),
    ],
)
def test_bad_steps_exit_2(tmp_path, capsys, steps: str, message: str) -> None:
    state = write_events(tmp_path / "state.jsonl", STATE)
    code, out, err = plan(capsys, "--state", f"events:{state}", "--steps", steps)
    assert (code, out) == (2, "")
    assert err.startswith(message)


def test_a_bad_step_after_a_refused_state_line_says_the_line_was_refused(tmp_path, capsys) -> None:
    """A typo in the state (`rak`) makes the core refuse the broker's startup; the roll
    that names the broker then fails, and the error comes after the refusal's note."""
    typo = {"type": "broker_startup", "broker": 5, "rak": "a"}
    state = write_events(tmp_path / "state.jsonl", [*STATE, typo])
    code, out, err = plan(capsys, "--state", f"events:{state}", "--steps", "roll:1,5")
    assert (code, out) == (2, "")
    refused, error = err.splitlines()[-2:]
    assert refused.startswith("kcsim plan: state: 1 of them rejected (first: ")
    assert "rak" in refused
    assert error == "kcsim plan: roll: unknown broker 5 (the state knows 1, 2, 3, 4)"


def test_the_proposal_file_holds_a_roll_to_run_or_is_not_written(tmp_path, capsys) -> None:
    """--proposal: a safe roll is its own proposal; a step kind kcsim proposes nothing for
    writes no file and says so."""
    state = write_events(tmp_path / "state.jsonl", STATE)
    proposal = tmp_path / "proposal.txt"
    code, out, _ = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:2", "--proposal", str(proposal)
    )
    assert code == 0
    assert proposal.read_text() == "roll:2\n# the requested order is safe\n"
    # one step: the verdict's words fit it
    assert "at or above min.insync.replicas through all 2 steps (exit 0)" in out
    move = tmp_path / "move.json"
    move.write_text(
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,3,4]}]}'
    )
    other = tmp_path / "other.txt"
    code, out, err = plan(
        capsys, "--state", f"events:{state}", "--steps", f"reassign:{move}", "--proposal",
        str(other),
    )  # fmt: skip
    assert code == 0
    assert "through its one step (exit 0)" in out
    assert err == f"kcsim plan: {other} not written: kcsim proposes nothing for reassign steps\n"
    assert not other.exists()


def test_help_describes_the_command_in_a_whole_sentence(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    text = " ".join(out.split())
    assert (
        "judged, and made safe where it is not; nothing is written to the lake or the "
        "cluster options:" in text
    )


def test_a_reassignment_not_in_kafkas_format_names_the_field(tmp_path, capsys) -> None:
    state = write_events(tmp_path / "state.jsonl", STATE)
    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"orders","partition":0,"replica":[1]}]}')
    code, _, err = plan(capsys, "--state", f"events:{state}", "--steps", f"reassign:{bad}")
    assert code == 2
    assert f"{bad}: partitions[0].replica: not a field of kafka-reassign-partitions'" in err


def test_an_impossible_event_step_says_which_and_why(tmp_path, capsys) -> None:
    state = write_events(tmp_path / "state.jsonl", STATE)
    steps = write_events(tmp_path / "steps.jsonl", [{"type": "broker_startup", "broker": 2}])
    code, _, err = plan(capsys, "--state", f"events:{state}", "--steps", str(steps))
    assert code == 2
    assert err == (
        "kcsim plan: step 1 (line 1: broker_startup broker=2) is impossible: broker 2 is "
        "live: starting it would bounce a running broker; stop it in an earlier step\n"
    )


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("events:/no/such/file", "kcsim plan: --state events:/no/such/file: no such file"),
        ("lake:/no/such/lake", "kcsim plan: --state lake:/no/such/lake: no such directory"),
        ("kafka:x", "kcsim plan: --state 'kafka:x': expected events:PATH, lake:DIR"),
        ("metadata-log:/no/such", "kcsim plan: --state metadata-log:/no/such: no such directory"),
    ],
)
def test_an_unreadable_state_exits_2(capsys, state: str, message: str) -> None:
    code, _, err = plan(capsys, "--state", state, "--steps", "roll:1")
    assert code == 2 and err.startswith(message), err


def test_several_clusters_need_cluster(tmp_path, capsys) -> None:
    other = [{**e, "cluster": "east"} for e in STATE]
    state = write_events(tmp_path / "state.jsonl", [*STATE, *other])
    code, _, err = plan(capsys, "--state", f"events:{state}", "--steps", "roll:1")
    assert code == 2 and "2 clusters (default, east): choose one with --cluster" in err
    code, out, _ = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1", "--cluster", "east"
    )
    assert code == 0 and out.startswith("kcsim plan: cluster east,")


def test_engine_choice(tmp_path, capsys) -> None:
    state = write_events(tmp_path / "state.jsonl", STATE)
    code, out, _ = plan(capsys, "--state", f"events:{state}", "--steps", "roll:1", "--engine", "zk")
    assert code == 0 and "engine zk" in out
    code, out, err = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1", "--engine", "kraft"
    )
    assert code == 0 and "engine kraft" in out and "records" in out, err


def test_the_examples_rolled_under_each_engine(capsys) -> None:
    """examples/events (a deletion of `orders` stuck on broker 4's storage error): under zk
    its eight partitions stay offline through every step but the last, whose return of 3
    lets the deletion finish; under kraft the deletion was done at once (SPEC-KRAFT §12)
    and the roll, in the order asked, keeps everything led (min ISR 1)."""
    examples = ROOT / "examples/events"
    code, out, err = plan(
        capsys, "--state", f"events:{examples}", "--cluster", "default", "--steps", "roll:1,2,3",
        "--json", "-",
        "--no-propose",
    )  # fmt: skip
    assert code == 4, err
    doc = json.loads(out)
    assert [(s["label"], s["offline"]) for s in doc["steps"]][-2:] == [
        ("stop 3", 8), ("start 3", 0)
    ]  # fmt: skip
    code, out, err = plan(
        capsys, "--state", f"events:{examples}", "--cluster", "default", "--steps", "roll:1,2,3",
        "--json", "-",
        "--engine", "kraft",
    )  # fmt: skip
    assert code == 0, err
    assert err.startswith("kcsim plan: cluster default, 4 partitions, engine kraft;")
    doc = json.loads(out)
    assert (doc["engine"], doc["partitions"], doc["verdict"]) == ("kraft", 4, "safe")
    assert [s["label"] for s in doc["steps"]] == [
        "stop 1", "start 1", "stop 2", "start 2", "stop 3", "start 3"
    ]  # fmt: skip
    assert [s["output"] for s in doc["steps"]] == [5, 5, 5, 5, 5, 5]  # records
    assert "records" in out


def test_the_state_of_a_kraft_metadata_log(capsys) -> None:
    """The committed 4.1.1 log (three nodes, `audit` deleted; orders on 1-3): read from its
    snapshot on, a roll of its brokers planned."""
    code, out, err = plan(
        capsys, "--state", f"metadata-log:{KRAFT_LOG}", "--steps", "roll:1,2,3", "--json", "-"
    )
    assert code in (0, 4), err
    doc = json.loads(out)
    assert doc["state"] == f"metadata-log:{KRAFT_LOG}" and doc["partitions"] > 0
    # a KRaft cluster's state is planned by the KRaft engine unless told otherwise
    assert doc["engine"] == "kraft"
    assert [s["label"] for s in doc["steps"]] == [
        "stop 1", "start 1", "stop 2", "start 2", "stop 3", "start 3"
    ]  # fmt: skip
    for told in (["--engine", "zk"], ["--set", "kcsim.engine=zk"]):
        code, out, err = plan(
            capsys, "--state", f"metadata-log:{KRAFT_LOG}", "--steps", "roll:1", "--json", "-",
            *told,
        )  # fmt: skip
        assert code in (0, 4), err
        assert json.loads(out)["engine"] == "zk"


@pytest.mark.spark
def test_the_state_of_a_lake_written_by_kcsim_run(tmp_path, capsys) -> None:
    """`kcsim run --once` writes a Delta lake from a few events; planning from the lake
    gives what planning from the events does."""
    events = tmp_path / "events"
    events.mkdir()
    write_events(events / "000.jsonl", [*STATE, PAIRS])
    lake = tmp_path / "lake"
    done = subprocess.run(
        [sys.executable, "-m", "streaming.cli", "run", "--source", f"file:{events}",
         "--lake", str(lake), "--checkpoint", str(tmp_path / "cp"), "--once"],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = []
    for state in (f"lake:{lake}", f"events:{events}"):
        code, out, err = plan(capsys, "--state", state, "--steps", "roll:1,3", "--json", "-")
        assert code == 4, err
        doc = json.loads(out)
        results.append((doc["steps"], doc["before"], doc["leaders_after"]))
    assert results[0] == results[1]
    assert results[0][0][0]["under_min_isr_partitions"] == ["pairs-0"]


def test_the_guides_example_is_what_the_command_prints(capsys, monkeypatch) -> None:
    """docs/guide/plan.md's example, run as written from the checkout: the same table,
    verdict and proposal (its last line, the seconds the plan took, aside)."""
    guide = (ROOT / "docs/guide/plan.md").read_text()
    command = "$ kcsim plan --state events:examples/plan/state.jsonl --steps roll:1,2,3\n"
    shown = guide[guide.index(command) + len(command) :].split("```")[0].splitlines()
    monkeypatch.chdir(ROOT)
    code, out, _ = plan(
        capsys, "--state", "events:examples/plan/state.jsonl", "--steps", "roll:1,2,3"
    )
    assert code == 4
    printed = out.splitlines()
    assert printed[-1].startswith("planned in ") and shown[-1].startswith("planned in ")
    assert printed[:-1] == shown[:-1]


def test_engine_flag_over_a_setting_says_which_wins(tmp_path, capsys) -> None:
    state = write_events(tmp_path / "state.jsonl", STATE)
    code, out, err = plan(
        capsys, "--state", f"events:{state}", "--steps", "roll:1", "--engine", "kraft",
        "--set", "kcsim.engine=zk", "--json", "-", "--quiet",
    )  # fmt: skip
    assert (code, json.loads(out)["engine"]) == (0, "kraft")
    assert err == "kcsim: --engine kraft wins over --set kcsim.engine=zk\n"
