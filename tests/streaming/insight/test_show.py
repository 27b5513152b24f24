"""Reading results without Python: `kcsim show TABLE` (every result table, as a table or
JSON lines, filtered by cluster, topic, partition and event time), `kcsim state`'s result
counts and Kafka's describe views, and `kcsim history` event by event from
`state_changes`. The lakes are written without Spark (tests/support/spark/native_lake.py) from
the README's examples and the KRaft corpus; what the commands print is checked against
the core's own rows for the same batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.config import Settings
from controller.replay.event_files import read_events
from controller.simulator import Simulator
from schemas import APPEND_TABLES
from streaming.cli import main
from tests.support.corpus import KRAFT, KRAFT_CORPUS
from tests.support.spark.native_lake import write_lake

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
Rows = dict[str, list[dict[str, Any]]]


def batches() -> list[list[Any]]:
    events = list(read_events(EXAMPLES / "events"))
    return [events[:20], events[20:], list(read_events(EXAMPLES / "bad"))]


def core_rows(parts: list[list[Any]], settings: Settings) -> tuple[Rows, Simulator]:
    simulator = Simulator(settings)
    appends: Rows = {t.name: [] for t in APPEND_TABLES}
    for events in parts:
        for name, rows in simulator.apply(events).appends.items():
            appends[name].extend(rows)
    return appends, simulator


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's examples (clusters default and shadow, bad lines too), three batches."""
    root = tmp_path_factory.mktemp("examples-lake")
    write_lake(root, batches(), Settings())
    return root


@pytest.fixture(scope="module")
def core() -> Rows:
    return core_rows(batches(), Settings())[0]


def kcsim(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def json_rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


# ------------------------------------------------------------------------- kcsim show

KEYS = {
    "divergences": ("cluster", "seq", "topic", "partition", "field", "observed", "simulated"),
    "violations": ("cluster", "seq", "invariant", "topic", "partition", "broker"),
    "rejected_events": ("cluster", "reason", "source"),
    "event_results": ("cluster", "seq", "topic", "partition", "error", "leader", "isr"),
    "controller_requests": ("cluster", "seq", "request_seq", "type", "broker"),
    "health": ("cluster", "seq", "ts", "offline", "under_replicated", "live_brokers"),
    "state_changes": ("cluster", "seq", "entity", "topic", "partition", "broker", "to_state"),
}


def project(rows: list[dict[str, Any]], table: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(json.dumps(r.get(k)) for k in KEYS[table]) for r in rows), key=lambda t: t)


@pytest.mark.parametrize("table", sorted(KEYS))
def test_show_json_gives_every_row_the_core_wrote(
    table: str, lake: Path, core: Rows, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = kcsim(capsys, "show", table, "--lake", str(lake), "--json")
    assert code == 0 and err == ""
    assert project(json_rows(out), table) == project(core[table], table)
    if table in ("divergences", "rejected_events", "controller_requests", "health"):
        assert core[table], table  # (the examples hold some of each)


def test_show_aliases_and_the_terminal_table(
    lake: Path, core: Rows, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = kcsim(capsys, "show", "rejected", "--lake", str(lake))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["cluster", "raw", "reason", "source"]
    assert lines[-1] == f"({len(core['rejected_events'])} rows)"
    # aligned: every column starts where its header does
    at = lines[0].index("reason")
    assert all(line[at - 2 : at] == "  " for line in lines[1:-1])
    _, out, _ = kcsim(capsys, "show", "divergences", "--lake", str(lake), "--cluster", "shadow")
    assert "2026-11-21T10:00:03.000Z" in out  # ts as ISO-8601 UTC, not epoch ms


def test_show_filters_by_cluster_topic_partition_and_time(
    lake: Path, core: Rows, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["show", "state_changes", "--lake", str(lake), "--json"]
    _, out, _ = kcsim(
        capsys, *argv, "--cluster", "default", "--topic", "payments", "--partition", "1"
    )
    expected = [
        r
        for r in core["state_changes"]
        if (r["cluster"], r["topic"], r["partition"]) == ("default", "payments", 1)
    ]
    assert expected and project(json_rows(out), "state_changes") == project(
        expected, "state_changes"
    )
    times = sorted({r["ts"] for r in core["health"] if r["ts"] is not None})
    start = times[2]
    _, out, _ = kcsim(capsys, "show", "health", "--lake", str(lake), "--json",
                      "--since", str(start), "--until", "2026-11-21T10:00:03Z")  # fmt: skip
    until = 1795255203000  # 2026-11-21T10:00:03Z in epoch ms
    expected = [r for r in core["health"] if r["ts"] is not None and start <= r["ts"] < until]
    assert expected and project(json_rows(out), "health") == project(expected, "health")
    assert len(expected) < len([r for r in core["health"] if r["ts"] is not None]) - 2


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["rejected", "--topic", "t"], "rejected has no topic column"),
        (["rejected", "--since", "2026-01-01T00:00:00Z"], "no event time (ts)"),
        (["health", "--since", "yesterday"], "expected a version number or an ISO-8601 time"),
    ],
)
def test_show_refuses_a_filter_the_table_cannot_take(
    argv: list[str], error: str, lake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = kcsim(capsys, "show", *argv, "--lake", str(lake))
    assert code == 2 and error in err


# ------------------------------------------------------------------- kcsim history


def test_history_lists_each_event_with_its_time(
    lake: Path, core: Rows, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line per transition of the partition or its replicas, and per answer about it,
    in seq order (the commits view showed one line per Delta commit)."""
    argv = ["history", "--lake", str(lake), "--topic", "payments", "--partition", "1"]
    code, out, _ = kcsim(capsys, *argv, "--cluster", "default", "--json")
    assert code == 0
    lines = json_rows(out)
    key = ("default", "payments", 1)
    changes = [
        r for r in core["state_changes"] if (r["cluster"], r["topic"], r["partition"]) == key
    ]
    answers = [
        r for r in core["event_results"] if (r["cluster"], r["topic"], r["partition"]) == key
    ]
    assert len(lines) == len(changes) + len(answers) > 3
    assert [line["seq"] for line in lines] == sorted(line["seq"] for line in lines)
    shown = [(line["seq"], line["to"], line["leader"], line["isr"]) for line in lines if line["to"]]
    assert shown == [(r["seq"], r["to_state"], r["leader"], r["isr"]) for r in changes]
    events = {e["event_id"]: e for e in core["applied_events"]}
    assert all(line["ts"] == events[line["event_id"]]["ts"] for line in lines)
    assert all(line["event"] == events[line["event_id"]]["type"] for line in lines)
    code, text, _ = kcsim(capsys, *argv, "--cluster", "default")
    assert text.splitlines()[0].split()[:4] == ["time", "seq", "event", "event_id"]
    assert text.splitlines()[1].startswith("2026-11-21T")


def test_history_needs_no_cluster_in_a_one_cluster_lake_and_names_them_otherwise(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--topic", "payments", "--partition", "1"]
    code, _, err = kcsim(capsys, "history", "--lake", str(lake), *argv)
    assert code == 2
    assert "the lake holds clusters default, shadow: give --cluster NAME" in err
    one = [[e for e in batch if "shadow" not in str(e)] for batch in batches()[:2]]
    write_lake(tmp_path, one, Settings())
    code, alone, _ = kcsim(capsys, "history", "--lake", str(tmp_path), *argv)
    assert code == 0
    code, named, _ = kcsim(capsys, "history", "--lake", str(lake), *argv, "--cluster", "default")
    assert alone == named
    code, out, _ = kcsim(
        capsys, "history", "--lake", str(tmp_path), "--topic", "x", "--partition", "0"
    )
    assert code == 1 and out == "no changes recorded for this partition\n"


# --------------------------------------------------------------------- kcsim state


def test_state_counts_divergences_violations_and_rejections(
    lake: Path, core: Rows, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = kcsim(capsys, "state", "--lake", str(lake))
    assert code == 0
    counts = {t: len(core[t]) for t in ("divergences", "violations", "rejected_events")}
    assert counts["divergences"] and counts["rejected_events"]
    text = ", ".join(f"{t} {n}" for t, n in counts.items())
    assert out.endswith(f"\nresults: {text} (rows: kcsim show TABLE)\n")
    _, out, _ = kcsim(capsys, "state", "--lake", str(lake), "--cluster", "default")
    default = sum(r["cluster"] == "default" for r in core["divergences"])
    assert f"results: divergences {default}," in out
    _, out, _ = kcsim(capsys, "state", "--lake", str(lake), "--as-of", "1")
    first = core_rows(batches()[:1], Settings())[0]
    assert f"results: divergences {len(first['divergences'])}, violations " in out


@pytest.fixture(scope="module")
def kraft_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Simulator]:
    events = list(read_events(KRAFT_CORPUS))
    parts = [events[i : i + 9] for i in range(0, len(events), 9)]
    root = tmp_path_factory.mktemp("kraft-lake")
    return root, write_lake(root, parts, KRAFT)


def describe_line(row: dict[str, Any]) -> str:
    ids = lambda values: ",".join(map(str, values or []))  # noqa: E731
    leader = row["leader"] if row["leader"] >= 0 else "none"
    return (
        f"\tTopic: {row['topic']}\tPartition: {row['partition']}\tLeader: {leader}\t"
        f"Replicas: {ids(row['replicas'])}\tIsr: {ids(row['isr'])}\t"
        f"Elr: {ids(row['elr'])}\tLastKnownElr: {ids(row['last_known_elr'])}"
    )


def test_state_describe_views_are_kafka_topics_describe_s(
    kraft_lake: tuple[Path, Simulator], capsys: pytest.CaptureFixture[str]
) -> None:
    """kafka-topics --describe --under-replicated-partitions / --unavailable-partitions /
    --under-min-isr-partitions / --topic, on the KRaft corpus's final state (min ISR: the
    topic's config, else the cluster's dynamic default)."""
    root, simulator = kraft_lake
    rows = sorted(
        (r for r in simulator.table_rows("partition_state") if r["cluster"] == "default"),
        key=lambda r: (r["topic"], r["partition"]),
    )
    live = {
        b["broker"]
        for b in simulator.table_rows("brokers")
        if b["cluster"] == "default" and b["status"] in ("live", "shutting_down")
    }
    topics = {t["topic"]: t["configs"] for t in simulator.table_rows("topics")}
    (cluster,) = [c for c in simulator.table_rows("clusters") if c["cluster"] == "default"]
    default_min = int(cluster["cluster_configs"].get("min.insync.replicas", 1))

    def min_isr(topic: str) -> int:
        return int((topics.get(topic) or {}).get("min.insync.replicas", default_min))

    def factor(row: dict[str, Any]) -> int:  # Kafka's: less the replicas being added
        return len(row["replicas"]) - len(row["adding_replicas"] or [])

    views = {
        "--under-replicated": [r for r in rows if len(r["isr"]) < factor(r)],
        "--unavailable": [r for r in rows if r["leader"] < 0 or r["leader"] not in live],
        "--under-min-isr": [
            r for r in rows if r["leader"] < 0 or len(r["isr"]) < min_isr(r["topic"])
        ],
    }
    assert views["--under-replicated"] and views["--under-min-isr"]
    assert views["--under-min-isr"] != views["--under-replicated"]
    argv = ["state", "--lake", str(root), "--cluster", "default"]
    for flag, expected in views.items():
        code, out, _ = kcsim(capsys, *argv, flag)
        assert code == 0
        assert out.splitlines() == [describe_line(r) for r in expected], flag
    # several filters: a partition of any of the kinds, once, in partition order
    code, out, _ = kcsim(capsys, *argv, "--under-replicated", "--unavailable")
    either = [r for r in rows if r in views["--under-replicated"] or r in views["--unavailable"]]
    assert out.splitlines() == [describe_line(r) for r in either]
    code, out, _ = kcsim(capsys, *argv, "--topic", "orders")
    orders = [r for r in rows if r["topic"] == "orders"]
    configs = ",".join(f"{k}={v}" for k, v in sorted(topics["orders"].items()))
    assert out.splitlines() == [
        f"Topic: orders\tPartitionCount: {len(orders)}\tReplicationFactor: 3\tConfigs: {configs}",
        *[describe_line(r) for r in orders],
    ]
    code, _, err = kcsim(capsys, "state", "--lake", str(root), "--under-replicated")
    assert code == 2 and "give --cluster" in err


def test_the_readers_start_no_spark_nor_pandas(lake: Path) -> None:
    """Every reader in one process: none imports pyspark, or pandas (an empty table's
    read used to, ~0.5 s), and the interpreter exits cleanly (deltalake's own table
    readers abort it at exit)."""
    import subprocess
    import sys

    from tests.support.spark.job_process import ROOT, job_env

    code = (
        "import io, sys, contextlib\n"
        "from streaming.cli import main\n"
        "lake = sys.argv[1]\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    for t in ('divergences', 'violations', 'rejected', 'results', 'requests',"
        " 'health'):\n"
        "        assert main(['show', t, '--lake', lake]) == 0\n"
        "    assert main(['state', '--lake', lake, '--as-of', '2']) == 0\n"
        "    assert main(['state', '--lake', lake, '--cluster', 'default',"
        " '--under-replicated']) == 0\n"
        "    assert main(['history', '--lake', lake, '--cluster', 'default', '--topic',"
        " 'payments', '--partition', '1']) == 0\n"
        "heavy = ('pyspark', 'py4j', 'pandas', 'pyarrow.dataset', 'pyarrow.acero')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "assert not loaded, loaded[:5]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(lake)],
        capture_output=True,
        text=True,
        env=job_env(),
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
