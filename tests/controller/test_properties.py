"""Property-based tests of the controller core: random event sequences on small clusters.

`ControllerMachine` (hypothesis stateful testing) feeds one event line per step to a
`Simulator`, in replay mode and in simulated-brokers mode, and after every step checks:

* the invariants Kafka's ZooKeeper-mode controller guarantees (each names its SPEC
  section; see `check_state` and `check_requests`);
* the output stream: exactly the schema's columns, one applied_events or rejected_events
  row per line, and the upserts/deletes reproduce `Simulator.table_rows()`;
* the state round-trip: a second simulator rebuilt with `Simulator.from_tables` from the
  rows produced so far gives the same output for the next event as the live one.

`test_batching_does_not_matter` replays the same lines one per `apply` and all at once.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from controller.config import Settings
from controller.model import ReplicaState
from controller.simulator import BatchOutput, RawEvent, Simulator
from controller.zk.request_log import joined
from schemas import TABLES
from schemas.tables import REQUEST_PARTITION
from tests.support.event_strategies import (
    EVENT_KINDS,
    NEEDS_A_TOPIC,
    ClusterView,
    Tables,
    any_event,
    as_line,
    key_of,
)
from tests.support.health_recount import STATE_COLUMNS, leader_changes, recount

CLUSTER = "default"
PARTITION_STATES = {"NewPartition", "OnlinePartition", "OfflinePartition", "NonExistentPartition"}
REPLICA_STATES = {
    "NewReplica",
    "OnlineReplica",
    "OfflineReplica",
    "ReplicaDeletionStarted",
    "ReplicaDeletionSuccessful",
    "ReplicaDeletionIneligible",
}
REQUEST_TYPES = {"LeaderAndIsr", "UpdateMetadata", "StopReplica"}
# §4.1 and §6.1: target state -> valid previous states
VALID_PREVIOUS = {
    "NewPartition": {"NonExistentPartition"},
    "OnlinePartition": {"NewPartition", "OnlinePartition", "OfflinePartition"},
    "OfflinePartition": {"NewPartition", "OnlinePartition", "OfflinePartition"},
    "NonExistentPartition": {"OfflinePartition"},
    "NewReplica": {"NonExistentReplica"},
    "OnlineReplica": {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"},
    "OfflineReplica": {
        "NewReplica",
        "OnlineReplica",
        "OfflineReplica",
        "ReplicaDeletionIneligible",
    },
    "ReplicaDeletionStarted": {"OfflineReplica"},
    "ReplicaDeletionSuccessful": {"ReplicaDeletionStarted"},
    "ReplicaDeletionIneligible": {"OfflineReplica", "ReplicaDeletionStarted"},
    "NonExistentReplica": {"ReplicaDeletionSuccessful"},
}

Row = dict[str, Any]


# ---- output-level checks ---------------------------------------------------------------


def check_columns(output: BatchOutput) -> None:
    """Every row has exactly its table's columns (CONTRACT §2), in the table's order: the
    replay writer encodes the core's rows as they come (`controller.replay.table_files`)."""
    for kind in (output.appends, output.upserts, output.deletes):
        for name, rows in kind.items():
            table = TABLES[name]
            expected = tuple(table.key) if kind is output.deletes else table.column_names
            for row in rows:
                assert tuple(row) == expected, (name, tuple(row), expected)
    # and each request entry has REQUEST_PARTITION's fields, in order, whatever built it
    entry_fields = tuple(name for name, _ in REQUEST_PARTITION.fields)
    for payload in output.appends.get("request_payloads", ()):
        for entry in payload["partitions"]:
            assert tuple(entry) == entry_fields, (payload["type"], tuple(entry))
    # JSON-compatible values: a row survives a round-trip through JSON unchanged
    for kind in (output.appends, output.upserts, output.deletes):
        for rows in kind.values():
            assert json.loads(json.dumps(list(rows))) == list(rows)


def check_stream_matches_live(tables: Tables, simulator: Simulator) -> None:
    """The upserts/deletes seen so far rebuild exactly the live simulator's state tables:
    the dirty-row tracking misses nothing and invents nothing."""
    for name, stored in tables.state.items():
        live = {key_of(name, row): row for row in simulator.table_rows(name)}
        assert set(stored) == set(live), (name, set(stored) ^ set(live))
        for key, row in live.items():
            assert stored[key] == json.loads(json.dumps(row)), (name, key, stored[key], row)


def check_health_and_violations(
    output: BatchOutput, tables: Tables, before: list[Row], watch: Watch
) -> None:
    """CONTRACT §2: no invariant is broken by kcsim's own state (any `violations` row is a
    bug), and an applied event's `health` row equals a recount over the whole state. The
    one exception is Kafka's own: a partition reassigned before it had a leader (SPEC
    §14.3: A1 throws before A2 gives the adding replicas a state) may later keep a leader
    and ISR outside its replicas (check_state's `stray_leader_ok`): a cancellation (§14.6)
    or a replacement stops those stateless replicas, whose OfflineReplica transition is
    invalid, so they leave RS without leaving the ISR. kcsim reports it as Kafka's state
    is: ISR members that are not replicas."""
    unexplained = [
        row
        for row in output.appends["violations"]
        if not (
            row["invariant"] == "isr_in_replicas"
            and (row["topic"], row["partition"]) in watch.stray_leader_ok
        )
    ]
    assert unexplained == [], unexplained
    if not output.appends["applied_events"]:
        assert output.appends["health"] == []
        return
    (row,) = output.appends["health"]
    after = rows_of(tables, "partition_state")
    expected = recount(after, rows_of(tables, "topics"), rows_of(tables, "brokers"))
    assert {c: row[c] for c in STATE_COLUMNS} == expected
    unclean = sum(1 for r in tables.appended["state_changes"] if r["unclean"])
    assert row["unclean_elections"] == unclean
    assert row["leader_changes"] == leader_changes(before, after)
    assert row["requests"] == len(output.appends["controller_requests"])


def first_diff(ours: list[Row], theirs: list[Row]) -> str:
    for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            return (
                f"row {index}: "
                + ", ".join(f"{k}: {a.get(k)!r} (live) vs {b.get(k)!r} (restarted)" for k in keys)
                + f"\n live row: {a}"
            )
    return (
        f"{len(ours)} rows (live) vs {len(theirs)} rows (restarted): {ours[len(theirs) :]} / "
        f"{theirs[len(ours) :]}"
    )


def rows_of(tables: Tables, name: str) -> list[Row]:
    return [r for r in tables.rows(name) if r["cluster"] == CLUSTER]


class Watch:
    """What the invariants remember between steps."""

    def __init__(self) -> None:
        self.epochs: dict[tuple[str, int], tuple[int, int]] = {}  # leader, partition epoch
        self.controller_epoch = 0
        self.broker_epochs: dict[int, int] = {}
        # the partitions each live topic was created with (or got by partition_creation)
        self.partitions: dict[str, set[int]] = {}
        # partitions reassigned before they had a leader (see check_state)
        self.stateless_replicas_ok: set[tuple[str, int]] = set()
        # ... and of those, the ones whose leader may have left RS without leaving the ISR
        # (a failover gives RS its states back but does not look at replicas outside RS)
        self.stray_leader_ok: set[tuple[str, int]] = set()
        # the last leader epoch each broker got for each partition in a LeaderAndIsr
        self.sent_epochs: dict[tuple[int, str, int], int] = {}


def check_state(tables: Tables, watch: Watch) -> None:
    """Invariants of the stored state after every event."""
    topics = {r["topic"]: r for r in rows_of(tables, "topics")}
    brokers = {r["broker"]: r for r in rows_of(tables, "brokers")}
    clusters = rows_of(tables, "clusters")
    partitions = {(r["topic"], r["partition"]): r for r in rows_of(tables, "partition_state")}
    replicas: dict[tuple[str, int], dict[int, str]] = {}
    for r in rows_of(tables, "replica_state"):
        replicas.setdefault((r["topic"], r["partition"]), {})[r["broker"]] = r["state"]

    # §0 Controller epoch: never decreases (each failover adds one: checked per step).
    assert len(clusters) == 1
    epoch = clusters[0]["controller_epoch"]
    assert epoch >= max(watch.controller_epoch, 1)
    watch.controller_epoch = epoch

    # §0 Broker epoch: strictly increases on every re-registration, never decreases.
    for b, row in brokers.items():
        assert row["status"] in ("live", "shutting_down", "dead")
        assert row["broker_epoch"] >= watch.broker_epochs.get(b, 0)
        watch.broker_epochs[b] = row["broker_epoch"]

    for row in topics.values():
        assert row["deletion"] in (None, "queued", "ineligible")

    def registered(b: int) -> bool:
        return b in brokers and brokers[b]["status"] != "dead"

    for tp, row in partitions.items():
        topic, _ = tp
        # CONTRACT §2: partition rows exist only for topics that exist; a deleted topic
        # leaves no partition_state / replica_state rows (§15.2 completeDeleteTopic).
        assert topic in topics, f"partition row {tp} outlives its topic"
        deleting = topics[topic]["deletion"] is not None
        rs, adding, removing = row["replicas"], row["adding_replicas"], row["removing_replicas"]
        assert row["state"] in PARTITION_STATES
        # §0 ReplicaAssignment: RS distinct; AR, RR ⊆ RS and disjoint.
        assert len(set(rs)) == len(rs), row
        assert set(adding) <= set(rs) and set(removing) <= set(rs), row
        assert not set(adding) & set(removing), row
        if not deleting:
            assert rs, row  # replicas leave RS only through deletion or reassignment
            # §4.1: NonExistentPartition is reached only by topic deletion (§15.3).
            assert row["state"] != "NonExistentPartition", row
        if row["leader_epoch"] is None:
            # §4.3 no leadership yet: only a New partition (init failed) lacks it
            assert row["state"] in ("NewPartition", "NonExistentPartition"), row
            assert row["leader"] == -1 and row["isr"] is None, row
            watch.epochs.pop(tp, None)
            continue
        leader, isr = row["leader"], row["isr"]
        # §4.1/§7.2 step 9: a partition with leadership info is never New again
        assert deleting or row["state"] in ("OnlinePartition", "OfflinePartition"), row
        # §0 LAI: epochs start at 0 (§4.3) and a partition's epochs never decrease while
        # it exists (every write is +1 on the znode version; every election +1 leader epoch).
        assert row["leader_epoch"] >= 0 and row["partition_epoch"] >= 0, row
        previous = watch.epochs.get(tp)
        if previous is not None:
            assert row["leader_epoch"] >= previous[0], (row, previous)
            assert row["partition_epoch"] >= previous[1], (row, previous)
        watch.epochs[tp] = (row["leader_epoch"], row["partition_epoch"])
        # §0: the partition's controller epoch is that of some controller that wrote it.
        assert 1 <= row["controller_epoch"] <= epoch, row
        # §6.3/§19.3: the controller never removes the last ISR member; every election
        # (§5) keeps or sets a non-empty ISR; an AlterPartition's ISR is a non-empty list.
        assert isr and len(set(isr)) == len(isr), row
        # §5 / §6.3 / §17: every election picks its leader from the ISR (unclean: ISR =
        # [leader]); the ISR shrinks that drop the leader set leader -1. So a leader is
        # always in the ISR. NOT asserted: ISR ⊆ replicas — the last ISR member is kept
        # even when the replica leaves RS (a cancelled reassignment whose adding replica
        # was the only ISR member, §14.6 + §6.3), and ISR members may be dead.
        assert leader >= -1, row  # -2 appears only in UpdateMetadata (§3.4)
        if leader >= 0:
            assert leader in isr, row
        if leader >= 0 and tp not in watch.stray_leader_ok:
            # §5: leaders are elected from RS; a replica leaving RS is first taken out of
            # the ISR (§14.5 step 1), which makes a leader -1. (Not for a partition whose
            # replicas lack states, see below: the OfflineReplica transition of a replica
            # without a state is invalid, so it leaves RS without leaving the ISR.)
            assert leader in rs, row
            # §9.1 step 5 / §6.4: a broker that dies (or vanishes at failover) is removed
            # from the ISR of every partition it hosts, so no partition (of a topic not
            # being deleted, §9.1 step 1) keeps a leader that is not registered.
            assert deleting or registered(leader), (row, brokers.get(leader))
        # §5.1 / §13.1 rules 6-7: RECOVERING only after an unclean election, with ISR
        # [leader]; an ISR shrink keeps it; the leader leaves it by AlterPartition.
        if row["leader_recovery_state"] == "RECOVERING":
            assert len(isr) == 1, row
        else:
            assert row["leader_recovery_state"] == "RECOVERED", row

    for tp in list(watch.epochs):
        if tp not in partitions:
            del watch.epochs[tp]  # the partition is gone; a new one starts over
    for key in list(watch.sent_epochs):
        if key[1:] not in partitions:
            del watch.sent_epochs[key]

    for tp, states in replicas.items():
        assert tp in partitions, f"replica rows of {tp} outlive the partition"
        rs = partitions[tp]["replicas"]
        for state in states.values():
            assert state in REPLICA_STATES
        # §6.2 NonExistentReplica removes the replica from RS and its state together; every
        # replica of RS has a state (§10.3 New/Online, §14.3 A2 New, §6.4 at failover) —
        # except after a reassignment of a partition that had no leader yet: phase U
        # writes the new RS, then A1 throws ("leaderAndIsr path is empty") before A2 gives
        # the adding replicas a state; only a failover (§6.4) gives them one.
        assert set(states) <= set(rs), (tp, states, rs)
        if tp not in watch.stateless_replicas_ok:
            assert set(states) == set(rs), (tp, states, rs)
        if topics[tp[0]]["deletion"] is None:
            # deletion states are only for queued topics (§15); reassignment removals
            # pass through them within one event (§14.5)
            assert set(states.values()) <= {"NewReplica", "OnlineReplica", "OfflineReplica"}, (
                tp,
                states,
            )

    # CONTRACT §2: every partition of a topic that is not being deleted has a row, and
    # every replica a replica_state row (checked above).
    for topic, expected in watch.partitions.items():
        if topic in topics and topics[topic]["deletion"] is None:
            have = {p for t, p in partitions if t == topic}
            assert have == expected, (topic, have, expected)
    for tp in partitions:
        if topics[tp[0]]["deletion"] is None and tp not in watch.stateless_replicas_ok:
            assert tp in replicas, f"partition {tp} has no replica_state rows"


def check_requests(
    output: BatchOutput, event: dict, before: ClusterView, after: ClusterView, watch: Watch
) -> None:
    """The append-only rows of one applied event."""
    applied = output.appends["applied_events"]
    payloads = output.appends["request_payloads"]
    requests = joined(output.appends["controller_requests"], payloads)
    if not applied:
        # a rejected line changes nothing and says nothing else (CONTRACT §1)
        for name, rows in output.appends.items():
            if name != "rejected_events":
                assert not rows, (name, rows)
        for rows in (*output.upserts.values(), *output.deletes.values()):
            assert not rows
        return
    (applied_row,) = applied
    seq, event_id = applied_row["seq"], applied_row["event_id"]
    for name in ("controller_requests", "state_changes", "event_results"):
        for row in output.appends[name]:
            assert row["seq"] == seq and row["event_id"] == event_id, (name, row)
    # request_seq numbers the event's requests 1..n in order
    assert [r["request_seq"] for r in requests] == list(range(1, len(requests) + 1))
    # payloads number the event's bodies 0..k-1 in the order first sent, each body stored
    # once and carried by at least one request; only UpdateMetadata has several recipients
    assert [p["payload"] for p in payloads] == list(range(len(payloads)))
    assert list(dict.fromkeys(r["payload"] for r in requests)) == list(range(len(payloads)))
    for p in payloads:
        assert p["seq"] == seq and p["event_id"] == event_id, p
        carriers = [r for r in requests if r["payload"] == p["payload"]]
        assert {r["type"] for r in carriers} == {p["type"]}, (p, carriers)
        assert len(carriers) == 1 or p["type"] == "UpdateMetadata", carriers
    startup = event["type"] == "broker_startup"
    started = set(event.get("brokers") or [event.get("broker")]) if startup else set()
    for r in requests:
        assert r["type"] in REQUEST_TYPES, r
        # §3.5: sent with the controller's epoch (a failover raises it before sending)
        assert r["controller_epoch"] == after.controller_epoch, r
        b = r["broker"]
        registered_after = after.brokers.get(b, "dead") != "dead"
        if b in started:
            # a bounce (§8.1): the failure half sends to the broker while it has no
            # registration (dropped), the startup half after it re-registers
            if not r["delivered"]:
                assert before.brokers.get(b, "dead") != "dead", r
            continue
        # §3.5/§3.6: delivered exactly when the destination is registered at send time;
        # no other broker's registration changes within this event.
        assert r["delivered"] == registered_after, (r["type"], b, r["delivered"], after.brokers)
        if r["type"] == "UpdateMetadata":
            assert r["live_brokers"] is not None
            for p in r["partitions"]:
                assert p["leader"] >= -2 and p["offline_replicas"] is not None, p
        else:
            assert r["live_brokers"] is None, r
        if r["type"] == "LeaderAndIsr":
            for p in r["partitions"]:
                # §3.2: the leader sent is the stored one (-1 allowed), with its ISR
                assert p["leader"] >= -1 and p["is_new"] in (True, False), p
                assert p["leader"] < 0 or p["leader"] in p["isr"], p
                # §3.2 with the recipient lists of §4.3, §5, §6.2, §14.3: a LeaderAndIsr
                # goes only to replicas of the assignment it carries
                assert b in p["replicas"], (b, p)
                # the cache a LeaderAndIsr is built from never goes back, so no broker is
                # sent an older leader epoch than it already got (brokers fence on it)
                key = (b, p["topic"], p["partition"])
                assert p["leader_epoch"] >= watch.sent_epochs.get(key, 0), (p, key)
                watch.sent_epochs[key] = p["leader_epoch"]
        if r["type"] == "StopReplica":
            for p in r["partitions"]:
                assert p["delete_partition"] in (True, False), p
    for row in output.appends["state_changes"]:
        assert row["entity"] in ("partition", "replica"), row
        assert row["ok"] == (row["error"] is None), row
        assert (row["broker"] is None) == (row["entity"] == "partition"), row
        if row["ok"]:
            # §4.1/§6.1: a transition that happened was a valid one
            assert row["from_state"] in VALID_PREVIOUS[row["to_state"]], row
    for row in output.appends["event_results"]:
        assert row["error"] is None or row["error"].isupper(), row
    if event["type"] == "isr_change":
        check_alter_partition(event, before, output.appends["event_results"][0], requests)
    # §0: the first controller has epoch 1; each failover adds exactly one
    if event["type"] == "controller_failover":
        assert after.controller_epoch == before.controller_epoch + 1
    else:
        assert after.controller_epoch == before.controller_epoch
    # §0: a (re-)registration gets a greater broker epoch
    for b in started:
        assert after.brokers[b] == "live"
        assert after.broker_epochs[b] > before.broker_epochs.get(b, 0)


def check_alter_partition(
    event: dict, before: ClusterView, result: Row, requests: list[Row]
) -> None:
    """§13.1, as an oracle: the first matching rule decides the answer to an AlterPartition
    from the current leader (any registered broker when the partition has no leadership);
    an accepted one keeps the leader epoch and bumps the partition epoch by one, an
    idempotent one writes nothing. A top-level error sends nothing; otherwise one
    UpdateMetadata goes to every registered broker, carrying the partition if it has a
    leadership, else only the broker list."""
    tp = (event["topic"], event["partition"])
    current = before.partitions.get(tp)
    isr = event["isr"]
    registered = before.registered()
    if current is None or current.leader_epoch is None:
        if registered:
            expected, written = "UNKNOWN_TOPIC_OR_PARTITION", None
        else:
            expected, written = "STALE_BROKER_EPOCH", None  # no broker could send it
    elif before.brokers.get(current.leader, "dead") == "dead":
        expected, written = "STALE_BROKER_EPOCH", None  # the sender is not registered
    else:
        leader_epoch = event.get("leader_epoch", current.leader_epoch)
        partition_epoch = event.get("partition_epoch", current.partition_epoch)
        if partition_epoch > current.partition_epoch or leader_epoch > current.leader_epoch:
            expected, written = "NOT_CONTROLLER", None
        elif leader_epoch < current.leader_epoch:
            expected, written = "FENCED_LEADER_EPOCH", None
        elif isr == current.isr and current.recovery == "RECOVERED":
            expected, written = None, current.partition_epoch  # idempotent: no write
        elif partition_epoch < current.partition_epoch:
            expected, written = "INVALID_UPDATE_VERSION", None
        elif any(before.brokers.get(b) != "live" for b in isr):
            expected, written = "INELIGIBLE_REPLICA", None
        else:
            expected, written = None, current.partition_epoch + 1
    assert (result["topic"], result["partition"]) == tp, result
    assert result["error"] == expected, (result, expected)
    if expected == "STALE_BROKER_EPOCH":
        assert requests == [], requests
    else:
        announced = requests[: len(registered)]
        assert [(r["type"], r["broker"]) for r in announced] == [
            ("UpdateMetadata", b) for b in registered
        ], requests
        carried = [(p["topic"], p["partition"]) for p in announced[0]["partitions"]]
        assert carried == ([] if current is None or current.leader_epoch is None else [tp])
    if expected is None:
        assert current is not None
        assert result["leader"] == current.leader, result
        assert result["leader_epoch"] == current.leader_epoch, result  # never bumped
        assert result["isr"] == isr, result
        assert result["partition_epoch"] == written, result


# ---- the state machine -----------------------------------------------------------------


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.config = Settings()
        self.simulator = Simulator(self.config)
        self.restored: Simulator | None = None
        self.tables = Tables()
        self.watch = Watch()
        self.lines = 0
        self.history: list[str] = []

    @initialize(
        simulate=st.booleans(),
        brokers=st.integers(1, 6),
        unclean=st.booleans(),
        rebalance=st.booleans(),
        racks=st.booleans(),
        deletion=st.sampled_from([True, True, True, False]),
        data=st.data(),
    )
    def start(
        self,
        simulate: bool,
        brokers: int,
        unclean: bool,
        rebalance: bool,
        racks: bool,
        deletion: bool,
        data,
    ) -> None:
        self.config = Settings(
            simulate_brokers=simulate,
            unclean_leader_election_enable=unclean,
            auto_leader_rebalance_enable=rebalance,
            delete_topic_enable=deletion,
        )
        self.simulator = Simulator(self.config)
        for b in range(brokers):
            event = {"type": "broker_startup", "broker": b}
            if racks:
                event["rack"] = f"r{b % 2}"
            self.step(event)
        for _ in range(data.draw(st.integers(0, 2), label="initial topics")):
            self.step(data.draw(EVENT_KINDS["topic_creation"](self.view())))

    def view(self) -> ClusterView:
        return ClusterView.of(self.tables)

    def step(self, event: dict) -> BatchOutput:
        self.history.append(as_line(event))
        try:
            return self._step(event)
        except Exception as error:
            error.add_note(
                f"settings: {self.config}\nevent lines so far:\n" + "\n".join(self.history)
            )
            raise

    def _step(self, event: dict) -> BatchOutput:
        """Apply one line to the live simulator (and the restored one), check, absorb."""
        self.lines += 1
        line = RawEvent(as_line(event), f"prop:{self.lines}")
        before = self.view()
        partitions_before = rows_of(self.tables, "partition_state")
        output = self.simulator.apply([line])  # nothing may escape
        check_columns(output)
        decided = output.appends["applied_events"] + output.appends["rejected_events"]
        assert len(decided) == 1, decided  # applied or rejected, never dropped
        if self.restored is not None:
            again = self.restored.apply([line])
            for kind in ("appends", "upserts", "deletes"):
                for name, rows in getattr(output, kind).items():
                    theirs = getattr(again, kind)[name]
                    assert theirs == rows, f"restart changed {kind} of {name}: " + first_diff(
                        rows, theirs
                    )
        self.tables.absorb(output)
        after = self.view()
        check_requests(output, event, before, after, self.watch)
        if output.appends["applied_events"]:
            self.track_partitions(event, before, after)
        check_stream_matches_live(self.tables, self.simulator)
        check_state(self.tables, self.watch)
        check_health_and_violations(output, self.tables, partitions_before, self.watch)
        # stop here and restart from the tables: the next step compares both
        self.restored = Simulator.from_tables(self.config, self.tables.for_restart())
        return output

    def track_partitions(self, event: dict, before: ClusterView, after: ClusterView) -> None:
        expected = self.watch.partitions
        for topic in list(expected):
            if topic not in after.topics:
                del expected[topic]
        kind = event["type"]
        topic = event.get("topic")
        ok, stray = self.watch.stateless_replicas_ok, self.watch.stray_leader_ok
        if kind == "controller_failover":
            ok.clear()  # §6.4: every replica of RS gets a state
        elif kind == "partition_reassignment":
            tp = (topic, event["partition"])
            if tp in before.partitions and before.partitions[tp].leader_epoch is None:
                ok.add(tp)
                stray.add(tp)
        ok &= set(after.partitions)
        stray &= set(after.partitions)
        if kind == "topic_creation":
            count = len(event["assignment"]) if "assignment" in event else event["partitions"]
            if topic not in before.topics:
                expected[topic] = set(range(count))
            elif before.topics[topic] is None:
                # a known topic's znode: only the partitions it lacks are added (§10.2)
                expected[topic] |= set(range(count))
        elif kind == "partition_creation" and before.topics.get(topic) is None:
            # §10.2: additions to a topic queued for deletion are discarded
            expected[topic] |= {int(p) for p in event["assignment"]}

    @rule(data=st.data())
    def any_event(self, data) -> None:
        self.step(data.draw(any_event(self.view()), label="event"))

    @rule(data=st.data(), kind=st.sampled_from(sorted(EVENT_KINDS)))
    def event_of_kind(self, data, kind: str) -> None:
        view = self.view()
        if kind in NEEDS_A_TOPIC and not view.topics:
            return
        self.step(data.draw(EVENT_KINDS[kind](view), label=kind))

    @precondition(
        lambda self: any(
            s == "ReplicaDeletionStarted"
            for p in self.view().partitions.values()
            for s in p.replica_states.values()
        )
    )
    @rule(data=st.data(), fail=st.booleans())
    def answer_deletion(self, data, fail: bool) -> None:
        """Replay mode needs the brokers' StopReplica answers to finish a deletion."""
        started = sorted(
            (p.topic, p.partition, b)
            for p in self.view().partitions.values()
            for b, s in p.replica_states.items()
            if s == "ReplicaDeletionStarted"
        )
        topic, partition, broker = data.draw(st.sampled_from(started))
        self.step(
            {
                "type": "stop_replica_response",
                "topic": topic,
                "partition": partition,
                "broker": broker,
                "error": "KAFKA_STORAGE_ERROR" if fail else None,
            }
        )

    @invariant()
    def one_cluster(self) -> None:
        assert self.simulator.clusters() in ([], [CLUSTER])

    @invariant()
    def preferred_election_candidates_are_those_of_a_full_walk(self) -> None:
        """SPEC §12.1: a whole-cluster preferred election's candidates (from the context's
        index of partitions not led by their first replica) are exactly the partitions
        with a leader, of topics not queued for deletion, whose leader is not it."""
        for simulator in (self.simulator, self.restored):
            if simulator is None or not simulator.clusters():
                continue
            context = simulator.context(CLUSTER)
            walked = [
                record
                for record in context.records_with_leaders()
                if record.leadership.leader != record.assignment.replicas[0]
            ]
            assert context.records_not_led_by_preferred() == walked

    @invariant()
    def deletion_checks_count_what_a_walk_finds(self) -> None:
        """SPEC §15.2: the deletion's checks of a queued topic's replica states (counted, kept
        by every change) answer what a walk of the topic's replicas answers."""
        for simulator in (self.simulator, self.restored):
            if simulator is None or not simulator.clusters():
                continue
            context = simulator.context(CLUSTER)
            for topic in sorted(context.topics_to_be_deleted):
                states = [context.replica_state(*r) for r in context.replicas_of_topic(topic)]
                for state in ReplicaState:
                    assert context.are_all_replicas_in_state(topic, state) == all(
                        s is state for s in states
                    ), (topic, state, states)
                    assert context.is_any_replica_in_state(topic, state) == any(
                        s is state for s in states
                    ), (topic, state, states)


ControllerMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestControllerMachine = ControllerMachine.TestCase


# ---- batching ----------------------------------------------------------------------------


def source(index: int) -> str:
    return f"events.jsonl:{index + 1}"


def run_lines(simulator: Simulator, lines: list[str], chunks: list[int]) -> Tables:
    tables = Tables()
    start = 0
    for size in [*chunks, len(lines)]:
        chunk = range(start, min(start + size, len(lines)))
        start = chunk.stop
        if chunk:
            tables.absorb(simulator.apply(RawEvent(lines[i], source(i)) for i in chunk))
    return tables


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    simulate=st.booleans(),
    brokers=st.integers(1, 5),
    steps=st.integers(1, 25),
)
def test_batching_does_not_matter(data, simulate: bool, brokers: int, steps: int) -> None:
    """The same lines, one per apply() call or all in one (or in random chunks), leave the
    same rows in every table: batches are only a delivery unit."""
    config = Settings(simulate_brokers=simulate)
    one_by_one = Simulator(config)
    tables = Tables()
    lines = [as_line({"type": "broker_startup", "broker": b}) for b in range(brokers)]
    for index, line in enumerate(lines):
        tables.absorb(one_by_one.apply([RawEvent(line, source(index))]))
    for _ in range(steps):
        line = as_line(data.draw(any_event(ClusterView.of(tables)), label="event"))
        lines.append(line)
        tables.absorb(one_by_one.apply([RawEvent(line, source(len(lines) - 1))]))
    chunks = data.draw(st.lists(st.integers(1, 8), max_size=6), label="chunks")
    for split in ([], chunks):
        other = run_lines(Simulator(config), lines, split)
        assert other.state == tables.state
        for name, rows in tables.appended.items():
            assert other.appended[name] == rows, name
