"""Apply a plan's steps to a copy of a cluster's state and measure every step.

The copy is a `Simulator` rebuilt from the state rows (`Simulator.from_tables`): the rows
are read, never changed, and nothing is written anywhere. Each event goes through
`Simulator.apply` on its own, so the state after every event is seen; a step's figures:

* `offline`, `under_min_isr`: the partitions in that condition after any of the step's
  events (the worst moment of the step, named);
* `under_replicated`, `not_preferred`: counts after the step;
* `leader_moves`: partitions whose leader changed, summed over the step's events;
* `states` (when asked, `run_plan(states=True)`): the state after the step (leader, ISR,
  replicas) of every partition the step changed; the state before the first step holds
  every partition. With it the leaders and ISRs at every step can be checked against
  what a real cluster did (`--json`);
* `output`: what the controller sent: under `zk` the requests delivered
  (`controller_requests` rows to registered brokers) and the bytes of their bodies
  (`request_payloads`' partitions and live brokers as compact JSON, once per recipient);
  under `kraft` the records written (`metadata_records`) and the bytes of their JSON.

An event the core rejects, or answers with an error where the step needed it to succeed
(a reassignment refused, an AlterPartition refused), makes the step impossible: the plan
stops there with `ImpossibleStep`, exit status 2. Before applying an event the planner
also refuses what the contract lets the core take but no operator means: starting a
broker that is running (the core would bounce it), stopping one that is not.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

import orjson

from controller.config import Settings
from controller.events import Event as ParsedEvent
from controller.events import Header, IsrChange
from controller.plan.steps import (
    Action,
    CatchUp,
    CompleteReassignment,
    Event,
    Hold,
    ImpossibleStep,
    PlanInputError,
    Step,
)
from controller.plan.view import (
    DEAD,
    FENCED,
    LIVE,
    ClusterView,
    Key,
    PartitionView,
    key_name,
    names,
)
from controller.simulator import BatchOutput, RawEvent, Simulator
from controller.zk.metadata_entries import FullBody
from controller.zk.request_log import RequestLog

Row = Mapping[str, Any]

# event types whose error answers are the operator's own operation failing
_MUST_SUCCEED = frozenset(
    {"partition_reassignment", "isr_change", "controlled_shutdown", "topic_creation",
     "partition_creation", "topic_deletion"}
)  # fmt: skip
# a broker's status when it is not running: never registered, dead (zk), fenced (kraft)
STOPPED = (None, DEAD, FENCED)
# errors that are not a failure: an answer that needed nothing; under kraft, the answer to
# an AlterPartition whose record completed a reassignment and moved the leadership (the
# record is written, SPEC-KRAFT §14.1)
_BENIGN_ERRORS = frozenset({"ELECTION_NOT_NEEDED", "NEW_LEADER_ELECTED"})
# the state tables the view reads: the front door builds no other rows for the plan
VIEW_TABLES = ("partition_state", "brokers", "topics")
# who writes the catch-up (`CatchUp`, `CompleteReassignment`):
ENGINE = "engine"  # the core's simulated brokers (zk, kcsim.simulate.brokers=true)
LEADERS = "leaders"  # the planner, as those brokers do it (kraft, simulate.brokers=true)
PER_REPLICA = "per-replica"  # the planner, the named replicas only (simulate.brokers=false)


@dataclass(slots=True)
class StepResult:
    index: int  # 0: the state before the first step
    label: str
    kind: str
    broker: int | None
    events: int
    offline: list[str]
    under_min_isr: list[str]
    under_replicated: int
    not_preferred: int
    leader_moves: int
    output_count: int
    output_bytes: int
    notes: list[str] = field(default_factory=list)
    # partition -> its state after the step (None: deleted), when the run records states
    states: dict[Key, PartitionView | None] | None = None

    @property
    def unsafe(self) -> bool:
        return bool(self.offline or self.under_min_isr)

    def severity(self) -> tuple[int, int, int, int]:
        return (
            len(self.offline) + len(self.under_min_isr),
            len(self.offline),
            self.under_replicated,
            -self.index,
        )

    def as_json(self, states: bool = True) -> dict[str, Any]:
        """The step as `--json` writes it; `states`: with its partitions' states, where
        recorded."""
        out: dict[str, Any] = {
            "step": self.index,
            "label": self.label,
            "kind": self.kind,
            "broker": self.broker,
            "events": self.events,
            "offline": len(self.offline),
            "under_min_isr": len(self.under_min_isr),
            "under_replicated": self.under_replicated,
            "leader_moves": self.leader_moves,
            "not_preferred": self.not_preferred,
            "output": self.output_count,
            "output_bytes": self.output_bytes,
            "offline_partitions": self.offline,
            "under_min_isr_partitions": self.under_min_isr,
            "notes": self.notes,
        }
        if states and self.states is not None:
            out["states"] = {
                key_name(key): None if view is None else state_json(view)
                for key, view in sorted(self.states.items())
            }
        return out


def state_json(view: PartitionView) -> dict[str, Any]:
    """A partition's state as `--json` shows it: its leader (-1: none), ISR and replicas
    (and the replicas a reassignment is adding or removing, while it runs)."""
    out: dict[str, Any] = {
        "leader": view.leader,
        "isr": list(view.isr),
        "replicas": list(view.replicas),
    }
    if view.adding or view.removing:
        out["adding"], out["removing"] = list(view.adding), list(view.removing)
    return out


@dataclass(slots=True)
class PlanRun:
    cluster: str
    engine: str
    output_kind: str  # requests | records
    partitions: int  # before the first step
    partitions_after: int  # after the last (a deletion the steps let finish, ...)
    before: StepResult
    steps: list[StepResult]
    leaders_before: dict[int, int]
    leaders_after: dict[int, int]
    replicas_after: dict[int, int]  # replicas per broker after the last step
    seconds: float

    @property
    def safe(self) -> bool:
        return not any(s.unsafe for s in self.steps)

    @property
    def worst(self) -> StepResult | None:
        if not self.steps:
            return None
        return max(self.steps, key=StepResult.severity)


def engine_of(settings: Settings) -> str:
    return settings.as_properties().get("kcsim.engine", "zk")


def engine_catches_up(settings: Settings) -> bool:
    """Whether the core's own simulated brokers do the catch-up (`kcsim.simulate.brokers`
    under the zk engine). The kraft engine writes records for the events it is given and
    simulates no broker, so under kraft the planner sends the leaders' AlterPartitions
    itself (`isr_change`, SPEC-KRAFT §14): a returning broker never rejoins an ISR by
    itself (§7)."""
    return settings.simulate_brokers and engine_of(settings) != "kraft"


def default_min_isr(settings: Settings) -> int:
    try:
        return int(settings.as_properties().get("min.insync.replicas", "1"))
    except ValueError:
        return 1


def run_plan(
    settings: Settings,
    tables: Mapping[str, Sequence[Row]],
    cluster: str,
    steps: Sequence[Step],
    view: ClusterView | None = None,
    states: bool = False,
) -> PlanRun:
    """The steps applied in order to a copy of `cluster`'s state in `tables`. `view`: the
    state's `ClusterView` where the caller has built it already (the plan changes it).
    `states`: record every step's partition states (`StepResult.states`; a cost in
    memory of one entry per partition a step changes)."""
    started = time.perf_counter()
    if cluster not in {row["cluster"] for row in tables.get("clusters", ())}:
        raise PlanInputError(f"the state holds no cluster {cluster!r}")
    if view is None:
        view = ClusterView.of_tables(cluster, tables, default_min_isr(settings))
    # (the view keeps its own counts: no health or violations rows from the core; the
    # state-change log is never read)
    # (a zk cluster's partitions come as values read from its records, not as rows)
    simulator = Simulator.from_tables(
        settings,
        tables,
        state_rows=VIEW_TABLES,
        checks=False,
        state_changes=False,
        partition_changes=True,
    )
    engine = engine_of(settings)
    catch_up = (
        ENGINE
        if engine_catches_up(settings)
        else (LEADERS if settings.simulate_brokers else PER_REPLICA)
    )
    runner = _Runner(simulator, view, cluster, catch_up, states)
    before = StepResult(
        0,
        "before",
        "before",
        None,
        0,
        names(view.offline),
        names(view.under_min_isr),
        len(view.under_replicated),
        len(view.not_preferred),
        0,
        0,
        0,
        states=dict(view.partitions) if states else None,
    )
    leaders_before = view.leaders_per_broker()
    partitions_before = len(view.partitions)
    results = [runner.step(step) for step in steps]
    return PlanRun(
        cluster=cluster,
        engine=engine,
        output_kind="records" if engine == "kraft" else "requests",
        partitions=partitions_before,
        partitions_after=len(view.partitions),
        before=before,
        steps=results,
        leaders_before=leaders_before,
        leaders_after=view.leaders_per_broker(),
        replicas_after={b: n for b, n in sorted(view.replicas_per_broker().items()) if n},
        seconds=time.perf_counter() - started,
    )


class _Runner:
    def __init__(
        self,
        simulator: Simulator,
        view: ClusterView,
        cluster: str,
        catch_up: str,
        states: bool = False,
    ) -> None:
        self.simulator = simulator
        self.view = view
        self.cluster = cluster
        self.catch_up = catch_up  # ENGINE | LEADERS | PER_REPLICA
        self.states = states
        self.sizer = OutputSizer()
        self.sequence = 0

    def step(self, step: Step) -> StepResult:
        """The step's actions, measured at the end of each moment: an event together with
        the catch-up derived from it (the zk engine's simulated brokers answer inside the
        event, so a derived catch-up belongs to its event's moment under any engine), or
        a hold."""
        view = self.view
        offline: set[Key] | None = None
        under: set[Key] | None = None
        moves = count = size = events = 0
        notes: list[str] = []
        shut_down: set[int] = set()  # brokers this step asked to shut down
        changed: list[Key] = []  # since the last measure
        touched: set[Key] = set()  # by the step (when states are recorded)
        applied = False  # a batch since the last measure

        def measure() -> None:
            nonlocal offline, under, applied
            if offline is None or under is None:
                offline, under = set(view.offline), set(view.under_min_isr)
            else:
                for key in changed:
                    if key in view.offline:
                        offline.add(key)
                    if key in view.under_min_isr:
                        under.add(key)
            changed.clear()
            applied = False

        for action in step.actions:
            if applied and isinstance(action, Event | Hold):
                measure()
            for batch in self._events(step, action, notes):
                self._check(step, batch, shut_down)
                output = self._apply(step, batch, derived=not isinstance(action, Event))
                events += len(batch)
                keys, moved = view.apply(output.upserts, output.deletes, output.partition_changes)
                changed.extend(keys)
                if self.states:
                    touched.update(keys)
                applied = True
                moves += moved
                sent, sent_bytes = self.sizer.measure(output)
                count += sent
                size += sent_bytes
        if applied:
            measure()
        if offline is None or under is None:
            offline, under = view.offline, view.under_min_isr
        self._after(step, notes)
        return StepResult(
            step.index,
            step.label,
            step.kind,
            step.broker,
            events,
            names(offline),
            names(under),
            len(view.under_replicated),
            len(view.not_preferred),
            moves,
            count,
            size,
            notes,
            {k: view.partitions.get(k) for k in touched} if self.states else None,
        )

    # ---- events of an action -----------------------------------------------------------

    def _events(
        self, step: Step, action: Action, notes: list[str]
    ) -> Iterator[list[dict[str, Any]]]:
        """Each action's events, in batches applied with one `apply` (a batch of derived
        AlterPartitions is measured as one moment: they only add ISR members)."""
        view = self.view
        if isinstance(action, Event):
            yield [dict(action.body)]
        elif isinstance(action, CatchUp) and self.catch_up != ENGINE:
            # (under ENGINE the start's own event did it: nothing to sort)
            keys = sorted(view.hosted.get(action.broker, ()))
            if self.catch_up == LEADERS:
                yield from _nonempty(self._leaders_expansions(keys))
            else:
                yield from _nonempty(self._expansions(keys, (action.broker,)))
        elif isinstance(action, CompleteReassignment):
            part = view.partitions.get(action.key)
            if part is not None and self.catch_up == LEADERS:
                yield from _nonempty(self._leaders_expansions([action.key]))
            elif part is not None and self.catch_up == PER_REPLICA:
                yield from _nonempty(self._expansions([action.key], part.adding))
        elif isinstance(action, Hold):
            batch = []
            for key in action.keys:
                part = view.partitions.get(key)
                if part is not None:
                    batch.extend(self._expansions([key], part.replicas))
            yield from _nonempty(batch)

    def _leaders_expansions(self, keys: Iterable[Key]) -> list[dict[str, Any]]:
        """What the zk engine's simulated brokers do (SPEC §13), for an engine that
        simulates none (kraft, SPEC-KRAFT §14.3): each live leader of these partitions
        adds every live replica missing from the ISR, in replica order, leader by leader
        (a broker's AlterPartition holds all the partitions it leads; the controller
        writes one record per partition either way). A 4.1 leader marks its log
        RECOVERED as soon as it leads and says so in every AlterPartition, which ends an
        unclean election's recovery (§14.3)."""
        out = self._expansions(keys, None)
        for body in out:  # a 4.1 leader sends its log's state: recovered once it leads
            body["leader_recovery_state"] = "RECOVERED"
        by_leader = {key: self.view.partitions[key].leader for key in keys}
        out.sort(key=lambda body: by_leader[(body["topic"], body["partition"])])
        return out

    def _expansions(
        self, keys: Iterable[Key], joining: Sequence[int] | None
    ) -> list[dict[str, Any]]:
        """A leader's AlterPartition per partition with a live leader: the ISR with those of
        `joining` (None: all replicas) that are live replicas and not in it yet, appended."""
        view = self.view
        live = view.live_brokers()
        out = []
        for key in keys:
            part = view.partitions.get(key)
            if part is None or part.leader < 0 or part.leader not in live:
                continue
            among = part.replicas if joining is None else joining
            new = [b for b in among if b in live and b in part.replicas and b not in part.isr]
            if new:
                out.append(
                    {
                        "type": "isr_change",
                        "topic": key[0],
                        "partition": key[1],
                        "isr": [*part.isr, *new],
                    }
                )
        return out

    # ---- applying -------------------------------------------------------------------------

    def _check(self, step: Step, batch: list[dict[str, Any]], shut_down: set[int]) -> None:
        """What an operator cannot mean, though the core would take it.

        One exception: under kraft a controlled shutdown of a broker that leads nothing
        is answered SHUTDOWN_NOW and fences it at once (SPEC-KRAFT §9); the failure that
        follows in the same step is then the redundant fence Kafka writes when the
        stopped broker's session expires (§8), not the stop of a stopped broker."""
        brokers = self.view.brokers
        for body in batch:
            kind = body.get("type")
            ids = body.get("brokers") or ([body["broker"]] if "broker" in body else [])
            for broker in ids if isinstance(ids, list) else ():
                status = brokers[broker].status if broker in brokers else None
                if kind == "controlled_shutdown":
                    shut_down.add(broker)
                if kind == "broker_failure" and status == FENCED and broker in shut_down:
                    continue
                if kind in ("broker_startup", "broker_registration") and status not in STOPPED:
                    raise ImpossibleStep(
                        step,
                        f"broker {broker} is {status.replace('_', ' ')}: starting it would "
                        "bounce a running broker; stop it in an earlier step",
                    )
                if kind in ("broker_failure", "controlled_shutdown") and status in STOPPED:
                    raise ImpossibleStep(
                        step, f"broker {broker} is not running ({status or 'never registered'})"
                    )
                if kind == "controlled_shutdown" and status != LIVE:
                    raise ImpossibleStep(step, f"broker {broker} is already {status}")

    def _apply(self, step: Step, batch: list[dict[str, Any]], derived: bool) -> BatchOutput:
        """`derived`: the batch is the planner's own AlterPartitions (`_expansions`), given
        to the core as parsed events; an operator's event goes as its line."""
        raws: list[RawEvent | ParsedEvent] = []
        source = f"plan step {step.index}"
        for body in batch:
            self.sequence += 1
            text = orjson.dumps({"cluster": self.cluster, **body}).decode()
            raws.append(
                alter_partition_event(self.cluster, body, text, source)
                if derived
                else RawEvent(text, source)
            )
        output = self.simulator.apply(raws)
        rejected = output.appends["rejected_events"]
        if rejected:
            raise ImpossibleStep(step, f"the controller rejects {rejected[0]['raw']}: "
                                 f"{rejected[0]['reason']}")  # fmt: skip
        kinds = {b["type"] for b in batch}
        if kinds & _MUST_SUCCEED:
            for row in output.appends["event_results"]:
                error = row["error"]
                if error is not None and error not in _BENIGN_ERRORS:
                    where = (
                        f" for {row['topic']}-{row['partition']}"
                        if row["topic"] is not None
                        else ""
                    )
                    raise ImpossibleStep(
                        step, f"the controller answers {error}{where}: {row['message']}"
                    )
        return output

    def _after(self, step: Step, notes: list[str]) -> None:
        """What a step left undone that it meant to do."""
        view = self.view
        for action in step.actions:
            if isinstance(action, CompleteReassignment):
                part = view.partitions.get(action.key)
                if part is not None and (part.adding or part.removing):
                    notes.append(
                        f"{action.key[0]}-{action.key[1]}: the reassignment is still in "
                        f"progress (adding {list(part.adding)}, removing {list(part.removing)})"
                    )
            elif isinstance(action, Hold):
                live = view.live_brokers()
                waiting = [
                    k
                    for k in action.keys
                    if (p := view.partitions.get(k)) is not None
                    and any(b in live and b not in p.isr for b in p.replicas)
                ]
                if waiting:
                    notes.append(f"still catching up: {', '.join(names(waiting)[:10])}")


def alter_partition_event(
    cluster: str, body: Mapping[str, Any], text: str, source: str
) -> ParsedEvent:
    """A derived AlterPartition (`_Runner._expansions`) as parsing its line `text` gives
    it: built from the view's own state, it needs no reading (parsing the catch-up's
    lines was a tenth of a kraft roll's CPU)."""
    return ParsedEvent(
        Header("isr_change", cluster, None, None, None, text, source),
        IsrChange(
            body["topic"],
            body["partition"],
            tuple(body["isr"]),
            leader_recovery_state=body.get("leader_recovery_state"),
        ),
    )


def _nonempty(batch: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    if batch:
        yield batch


def _as_list(values: Sequence[Any]) -> list[Any]:
    """A body's sequence as orjson takes it (a list, or a list's subclass, as it is)."""
    return values if isinstance(values, list) else list(values)


# ---- the controller's output in bytes ----------------------------------------------------------


class OutputSizer:
    """Bytes of the controller's output. A request body is counted once per recipient; a
    body naming every partition (a new broker's UpdateMetadata, `FullBody`) is sized from
    the last such body and the places that changed since, as the replay writer does: at
    100k partitions a roll sends one per broker, 100k entries each, ~1% of them new."""

    __slots__ = ("_full_sizes", "_full_token", "_full_total")

    def __init__(self) -> None:
        self._full_token: object | None = None
        self._full_sizes: list[int] = []
        self._full_total = 0

    def measure(self, output: BatchOutput) -> tuple[int, int]:
        count = size = 0
        requests = output.appends.get("controller_requests", ())
        if isinstance(requests, RequestLog):
            if len(requests):
                columns = requests.request_columns()
                delivered = requests.recipient_columns()["delivered"]
                # the delivered requests per body, counted in C (an UpdateMetadata's
                # fan-out is a request per registered broker)
                per_body = Counter(compress(requests.request_of_row(), delivered))
                partitions, live = columns["partitions"], columns["live_brokers"]
                for body, recipients in per_body.items():
                    count += recipients
                    size += recipients * self._body_size(partitions[body], live[body])
        elif requests:  # plain rows: join each with its payload
            bodies = output.appends["request_payloads"]
            payloads = {(p["event_id"], p["payload"]): p for p in bodies}
            for row in requests:
                if row["delivered"]:
                    payload = payloads[(row["event_id"], row["payload"])]
                    count += 1
                    size += self._body_size(payload["partitions"], payload["live_brokers"])
        for record in output.appends.get("metadata_records", ()):
            count += 1
            text = record["record"]
            size += len(text.encode("utf-8")) if isinstance(text, str) else len(orjson.dumps(text))
        return count, size

    def _body_size(self, partitions: Sequence[Row] | None, live: Sequence[int] | None) -> int:
        live_size = len(orjson.dumps(_as_list(live))) if live is not None else 4  # null
        if partitions is None:
            return 4 + live_size
        if isinstance(partitions, FullBody) and len(partitions) > 1000:
            return self._full_size(partitions) + live_size
        return len(orjson.dumps(_as_list(partitions))) + live_size

    def _full_size(self, body: FullBody) -> int:
        sizes = self._full_sizes
        if body.since is not None and body.since is self._full_token and len(sizes) == len(body):
            total = self._full_total
            for place in body.changed:
                new = len(orjson.dumps(body[place]))
                total += new - sizes[place]
                sizes[place] = new
        else:
            sizes = [len(x) for x in map(orjson.dumps, body)]
            total = sum(sizes)
        self._full_token, self._full_sizes, self._full_total = body.token, sizes, total
        return total + len(body) + 1  # the commas and brackets
