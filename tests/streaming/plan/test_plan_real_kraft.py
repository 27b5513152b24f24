"""`kcsim plan`'s prediction against a real KRaft Kafka 4.1.1 cluster (this module's own,
`plan_kraft`: three combined broker-and-controller nodes, 1-3).

The plan reads a node's `__cluster_metadata-0` with `--state metadata-log:DIR` and
predicts, under `--engine kraft`, a roll of the three nodes (`roll:1,2,3`, clean:
SPEC-KRAFT §9 the controlled shutdown, §8 the fence, §6.3/§7 the registration and
unfence, §14 the leaders' AlterPartitions that bring the broker back into the ISRs) and a
reassignment in `kafka-reassign-partitions`' format (§13); the same steps are then
performed on the cluster (SIGTERM and a restart per node; the admin API's
AlterPartitionReassignments, one partition at a time, each run to completion) with
`kcsim shadow --metadata-log` following node 3's log. At every step the verdict compares
the partitions without a leader and under min ISR at any moment, and the leaders, ISRs
(in the records' order) and replicas once the step has settled: zero differences.

The shadow follows a node that the roll stops too: while node 3 is down its log stands
still, so a stop's end is where the recording shows the stopped broker registering again
(the first event of its start), not a moment waited for.

The cluster is this module's alone: the roll restarts every node, and a node restarted
after other tests' records (a cluster-wide `min.insync.replicas` change's
`ClearElrRecord` beside a topic's creation) can die replaying them (`SNAPSHOTS` in
streaming/local_clusters/kraft_cluster.py); nor does another test see these topics.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.clusters.kraft_cluster import KraftCluster, own_kraft_cluster, wait_for
from tests.support.clusters.zk_cluster import unique_topic
from tests.support.differential.plan_reality import (
    Topics,
    checked,
    observed,
    prediction,
    reassignment_file,
)
from tests.support.differential.shadow_process import events, kraft_shadow

pytestmark = [pytest.mark.kraft, pytest.mark.slow]

FOLLOWED = 3  # the node whose metadata log the plan reads and the shadow follows
# Heartbeats every 0.5 s (Kafka's default: 2 s): a controlled shutdown ends, and a
# returning broker is unfenced, at the first heartbeat after it may, so the roll waits
# less; the controller's rules, and so its decisions, are the same (the test pins them).
HEARTBEATS = {"broker.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def plan_kraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftCluster]:
    """Started once for both tests (the roll leaves every node up again), then stopped."""
    with own_kraft_cluster(tmp_path_factory, "kafka-kraft-plan", overrides=HEARTBEATS) as kraft:
        yield kraft


def make_topics(kraft: KraftCluster) -> Topics:
    """As the ZooKeeper-mode test: RF 3 with min ISR 2, an RF 1 partition, RF 2 with min
    ISR 2. {topic: (assignment, min ISR)}."""
    topics: Topics = {
        unique_topic("plan-rf3"): ({0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, 2),
        unique_topic("plan-rf1"): ({0: [2]}, 1),
        unique_topic("plan-rf2"): ({0: [3, 1]}, 2),
    }
    for topic, (assignment, min_isr) in topics.items():
        kraft.create_topic(topic, assignment, {"min.insync.replicas": str(min_isr)})
        kraft.wait_isr_full(topic)
    return topics


def described(
    kraft: KraftCluster, topics: Topics
) -> dict[str, tuple[int, frozenset[int], tuple[int, ...]]]:
    out = {}
    for topic in topics:
        for p, s in kraft.partitions(topic).items():
            out[f"{topic}-{p}"] = (s.leader, s.isr, s.replicas)
    return out


@contextmanager
def recording(kraft: KraftCluster, out: Path, topics: Topics) -> Iterator[subprocess.Popen]:
    process = kraft_shadow(kraft.layout().metadata_log(FOLLOWED), kraft.bootstrap, out)
    try:
        wait_caught_up(kraft, out, topics, process)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # writes what is pending, then exits
            process.communicate(timeout=60)


def wait_caught_up(
    kraft: KraftCluster, out: Path, topics: Topics, process: subprocess.Popen
) -> int:
    """Until the recording's state of `topics` is the cluster's (leader, ISR, replicas):
    the number of events written by then."""
    count: list[int] = []

    def caught_up() -> bool:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        written = events(out)
        (now,) = observed(
            written, [len(written)], ["now"], lambda n: n.rsplit("-", 1)[0] in topics, lambda n: 1
        )
        mine = {n: (s.leader, frozenset(s.isr), s.replicas) for n, s in now.states.items()}
        count[:] = [len(written)]
        return mine == described(kraft, topics)

    wait_for(caught_up, "the shadow to have recorded the cluster's present state")
    return count[0]


def plan(tmp_path: Path, kraft: KraftCluster, steps: str) -> dict[str, Any]:
    log = kraft.layout().metadata_log(FOLLOWED)
    state = ["--state", f"metadata-log:{log}", "--engine", "kraft"]
    return prediction(tmp_path / "plan.json", state, steps)


def test_a_roll_as_planned_and_as_it_happened(plan_kraft: KraftCluster, tmp_path: Path) -> None:
    kraft = plan_kraft
    topics = make_topics(kraft)
    out = tmp_path / "events"
    try:
        with recording(kraft, out, topics) as shadow:
            doc = plan(tmp_path, kraft, "roll:1,2,3")
            assert doc["engine"] == "kraft"
            marks: list[int | None] = [len(events(out))]
            for broker in (1, 2, 3):
                kraft.shutdown(broker)  # SIGTERM: a controlled shutdown, then the exit
                kraft.wait_fenced(broker)
                for topic in topics:
                    kraft.wait_partitions(
                        topic,
                        lambda ps, b=broker: all(
                            p.leader != b and (b not in p.isr or p.isr == {b}) for p in ps.values()
                        ),
                        f"broker {broker} out of every ISR",
                    )
                marks.append(None)  # where the broker registers again
                kraft.start(broker)  # returns once unfenced
                for topic in topics:
                    kraft.wait_isr_full(topic)
                marks.append(wait_caught_up(kraft, out, topics, shadow))
        written = events(out)
        for n, mark in enumerate(marks):
            if mark is None:  # the stop of broker b ends where b registers again
                broker = (1, 2, 3)[(n - 1) // 2]
                mark = next(
                    i
                    for i, e in enumerate(written)
                    if i >= marks[n - 1]
                    and e["type"] == "broker_registration"
                    and e["broker"] == broker
                )
                marks[n] = mark
        differences, beyond, real = checked(doc, written, marks, topics)
        assert differences == "no difference"
        # What the plan folds (docs/guide/plan.md): a returning broker registers fenced and is
        # unfenced once it has caught up with the metadata log, and rejoins an ISR only
        # once it has caught up with the leader; until then the RF 1 partition it holds
        # stays offline (its election waits for the unfence) and the RF 2 one under min
        # ISR, into the start step the plan shows as one moment after the catch-up.
        rf1, rf2 = (f"{t}-0" for t in list(topics)[1:])
        assert beyond == [("start 1", [], [rf2]), ("start 2", [rf1], []), ("start 3", [], [rf2])]
        # the prediction is not empty: under KRaft the RF 1 partition is offline from the
        # start of its broker's controlled shutdown (SPEC-KRAFT §9), its ISR emptied and
        # the broker in its ELR
        assert [s["label"] for s in doc["steps"] if rf1 in s["offline_partitions"]] == ["stop 2"]
        assert real[3].states[rf1].isr == () and real[3].states[rf1].leader == -1
        assert [s["label"] for s in doc["steps"] if rf2 in s["under_min_isr_partitions"]] == [
            "stop 1",
            "stop 3",
        ]
    finally:
        kraft.ensure_all_up()  # for the reassignment, should the roll have failed midway


def test_a_reassignment_as_planned_and_as_it_happened(
    plan_kraft: KraftCluster, tmp_path: Path
) -> None:
    kraft = plan_kraft
    topics = make_topics(kraft)
    rf3, rf1, rf2 = topics
    moves = [(rf1, 0, [3]), (rf3, 1, [1, 3]), (rf2, 0, [1, 2])]
    out = tmp_path / "events"
    plan_file = tmp_path / "reassign.json"
    plan_file.write_text(json.dumps(reassignment_file(moves)))
    with recording(kraft, out, topics) as shadow:
        doc = plan(tmp_path, kraft, f"reassign:{plan_file}")
        assert doc["verdict"] == "safe", doc["summary"]
        marks = [len(events(out))]
        for topic, partition, replicas in moves:
            kraft.reassign({(topic, partition): replicas})
            kraft.wait_partitions(
                topic,
                lambda ps, p=partition, r=replicas: (
                    list(ps[p].replicas) == r and ps[p].isr == set(r) and ps[p].leader >= 0
                ),
                f"partition {partition} moved to {replicas}",
            )
            marks.append(wait_caught_up(kraft, out, topics, shadow))
    differences, beyond, real = checked(doc, events(out), marks, topics)
    assert (differences, beyond) == ("no difference", [])
    assert [
        (real[n].states[f"{t}-{p}"].replicas, real[n].states[f"{t}-{p}"].leader)
        for n, (t, p, _) in enumerate(moves, 1)
    ] == [((3,), 3), ((1, 3), 1), ((1, 2), 1)]
