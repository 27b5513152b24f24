"""`kcsim plan --state STATE --steps STEPS`: an operation previewed on a copy of the
cluster's state, step by step, judged, and made safe where it is not (CONTRACT §6).

Exit status: 0 when no step leaves a partition without a leader or under its
`min.insync.replicas`; 4 when one does; 2 for bad usage or input (an unreadable state,
unknown brokers, topics or partitions, a reassignment file not in Kafka's format, an
impossible step).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from controller.config import ConfigError, Settings, read_properties
from controller.plan.planner import PlanRun, default_min_isr, run_plan
from controller.plan.search import (
    Decommission,
    RollProposal,
    describe_roll,
    is_live,
    propose_decommission,
    search_roll,
)
from controller.plan.state import choose_cluster, cluster_tables
from controller.plan.steps import (
    DECOMMISSION,
    REASSIGN,
    REBALANCE_AT,
    ROLL,
    ROLL_KINDS,
    ImpossibleStep,
    PlanInputError,
    Step,
    check_moves,
    parse_broker_list,
    parse_event_lines,
    parse_reassignment_json,
    parse_roll,
    reassign_steps,
    reassignment_json,
    renumber,
    roll_steps,
    with_rebalance,
)
from controller.plan.view import ClusterView, key_name
from streaming.plan.render import document, names_shown, terminal_text
from streaming.plan.sources import StateSource, read_state

SAFE, UNSAFE, BAD_INPUT = 0, 4, 2
SIMULATE_KEY = "kcsim.simulate.brokers"
ENGINE_KEY = "kcsim.engine"
# The engine a live cluster's state implies when neither --engine nor the settings name one.
ENGINE_OF_STATE = {"metadata-log:": "kraft", "zookeeper:": "zk"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = "kcsim plan --state STATE --steps STEPS [options]"
    parser.description = (
        "an operation (a roll, a reassignment, a decommission, an event file) previewed on "
        "a copy of the cluster's state, step by step through the controller's rules, "
        "judged, and made safe where it is not; nothing is written to the lake or the cluster"
    )
    parser.add_argument(
        "--state",
        required=True,
        help="events:PATH | lake:DIR | zookeeper:HOST:PORT[/chroot] | metadata-log:DIR",
    )
    parser.add_argument(
        "--steps",
        required=True,
        help="roll:B1,B2,... | reassign:FILE (kafka-reassign-partitions JSON) | "
        "decommission:B | a JSON-lines file of events",
    )
    parser.add_argument(
        "--engine",
        choices=("zk", "kraft"),
        help="the controller to simulate (default: the settings' kcsim.engine; for a "
        "metadata-log: state kraft, for a zookeeper: state zk)",
    )
    parser.add_argument("--cluster", help="the cluster, where the state holds several")
    parser.add_argument(
        "--roll-kind",
        choices=ROLL_KINDS,
        default="clean",
        help="clean: a controlled shutdown before each stop (default); crash: none",
    )
    parser.add_argument(
        "--auto-rebalance",
        choices=REBALANCE_AT,
        help="add a run of the controller's automatic preferred-leader rebalance (as "
        "auto.leader.rebalance.enable runs it every leader.imbalance.check.interval.seconds): "
        "after the last step, or after each broker's start (default: none)",
    )
    parser.add_argument(
        "--json",
        dest="json_out",
        metavar="FILE",
        help="the plan as JSON (-: on stdout, and the table on stderr)",
    )
    parser.add_argument("--report", type=Path, metavar="FILE.html", help="a page with plots")
    parser.add_argument(
        "--proposal",
        type=Path,
        metavar="FILE",
        help="write the proposed reassignment (decommission) in kafka-reassign-partitions' "
        "JSON format, or the proposed roll as roll:... text",
    )
    parser.add_argument(
        "--no-propose",
        action="store_true",
        help="do not search a safe version of a failing roll",
    )
    parser.add_argument("--quiet", action="store_true", help="no table on stdout")


def main(args: argparse.Namespace) -> int:
    try:
        return _main(args)
    except PlanInputError as error:
        print(f"kcsim plan: {error}", file=sys.stderr)
        return BAD_INPUT
    except ConfigError as error:
        print(f"kcsim plan: configuration error: {error}", file=sys.stderr)
        return BAD_INPUT


def _main(args: argparse.Namespace) -> int:

    settings = _with_engine(args.settings, args)
    state = read_state(args.state, settings, args.cluster)
    try:
        return _plan(args, settings, state)
    except PlanInputError:
        if state.rejected:  # a line the core refused (a typo) often explains the error
            for note in state.notes:
                print(f"kcsim plan: state: {note}", file=sys.stderr)
        raise


def _plan(args: argparse.Namespace, settings: Settings, state: StateSource) -> int:
    cluster = choose_cluster(state.tables, args.cluster)
    tables = cluster_tables(state.tables, cluster)
    plan_settings = _plan_settings(settings, args)
    view = ClusterView.of_tables(cluster, tables, default_min_isr(plan_settings))
    steps, kind, subject = _steps(args.steps, args.roll_kind, view, cluster)
    if args.auto_rebalance is not None:
        steps = with_rebalance(steps, args.auto_rebalance)
    decommission = subject if isinstance(subject, Decommission) else None
    notes = [*state.notes, *_lag_notes(view, plan_settings.simulate_brokers)]
    # (the view: consumed; the partitions' states per step only for --json)
    run = run_plan(plan_settings, tables, cluster, steps, view, states=args.json_out is not None)
    proposal: dict[str, Any] | None = None
    if decommission is not None:
        proposal = _decommission_proposal(decommission)
    elif kind == "roll" and not run.safe and not args.no_propose:
        assert isinstance(subject, list)
        proposal = _roll_proposal(plan_settings, tables, cluster, subject, args.roll_kind)
    status = SAFE if run.safe else UNSAFE
    doc = document(run, args.state, args.steps, status, proposal, notes)
    # with --json -, stdout holds the JSON alone (a pipeline parses it) and the table goes
    # to stderr
    table_out = sys.stderr if args.json_out == "-" else sys.stdout
    if not args.quiet:
        print(terminal_text(run, doc), file=table_out)
    if args.json_out is not None:
        text = json.dumps(doc, indent=2) + "\n"
        if args.json_out == "-":
            sys.stdout.write(text)
        else:
            _write(Path(args.json_out), text)
    if args.proposal is not None:
        proposed = _proposal_text(proposal, args.steps if kind == "roll" and run.safe else None)
        if proposed is None:
            why = "--no-propose" if kind == "roll" else f"kcsim proposes nothing for {kind} steps"
            print(f"kcsim plan: {args.proposal} not written: {why}", file=sys.stderr)
        else:
            _write(args.proposal, proposed)
    if args.report is not None:
        from streaming.plan.report import render_plan

        _write(args.report, render_plan(run, doc))
        if not args.quiet:
            print(f"report: {args.report}", file=table_out)
    return status


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise PlanInputError(f"cannot write {path}: {error}") from None


def _lag_notes(view: ClusterView, catch_up: bool) -> list[str]:
    """Live replicas outside their partition's ISR before the first step: the plan's
    catch-up brings them back at the next start of a broker hosting the partition (every
    live replica rejoins, the lagging ones too), which assumes their lag ends by then; with
    kcsim.simulate.brokers=false only the returning broker's replica rejoins."""
    live = view.live_brokers()
    lagging = []
    for key, part in view.partitions.items():
        out = [b for b in part.replicas if b in live and b not in part.isr]
        if out and part.leader in live:
            lagging.append(f"{key_name(key)}: {','.join(map(str, out))}")
    if not lagging:
        return []
    lagging.sort()
    shown = names_shown(lagging, 5)
    what = "partition has a live replica" if len(lagging) == 1 else "partitions have live replicas"
    then = (
        "the plan takes such a replica to have caught up when a broker hosting its partition "
        "next starts"
        if catch_up
        else "only a returning broker's own replica rejoins (kcsim.simulate.brokers=false)"
    )
    return [f"{len(lagging):,} {what} outside the ISR ({shown}): {then}"]


# ---- settings ------------------------------------------------------------------------------


def _with_engine(settings: Settings, args: argparse.Namespace) -> Settings:
    """`--engine` as `--set kcsim.engine=...`. Without either, a live cluster's state
    picks the engine of its kind (`metadata-log:` a KRaft cluster, `zookeeper:` a
    ZooKeeper-mode one); a lake or an event log keeps the settings' engine."""
    engine = args.engine
    if engine is None and ENGINE_KEY not in _given_keys(args):
        kinds = ENGINE_OF_STATE.items()
        engine = next((e for kind, e in kinds if args.state.startswith(kind)), None)
    if engine is None:
        return settings
    return Settings.from_properties({**settings.as_properties(), ENGINE_KEY: engine})


def _given_keys(args: argparse.Namespace) -> set[str]:
    """The setting keys the command line gives (`--set`, `--config`)."""
    given = {item.partition("=")[0].strip() for item in getattr(args, "overrides", ())}
    config = getattr(args, "config", None)
    if config is not None:
        given |= set(read_properties(Path(config).read_bytes().decode("latin-1")))
    return given


def _plan_settings(settings: Settings, args: argparse.Namespace) -> Settings:
    """The run's settings, brokers answering by themselves unless the command line says
    otherwise: a plan assumes brokers that work (a restarted replica catches up, a leader
    batches its partitions into one AlterPartition, a StopReplica is answered)."""
    if SIMULATE_KEY in _given_keys(args):
        return settings
    return dataclasses.replace(settings, simulate_brokers=True)


# ---- steps ---------------------------------------------------------------------------------


def _steps(
    spec: str, roll_kind: str, view: ClusterView, cluster: str
) -> tuple[list[Step], str, Any]:
    if spec.startswith(ROLL):
        brokers = parse_roll(spec, view)
        return roll_steps(brokers, view, roll_kind), "roll", brokers
    if spec.startswith(REASSIGN):
        path = Path(spec[len(REASSIGN) :])
        moves = parse_reassignment_json(_read(path, "reassign"), str(path))
        check_moves(moves, view, str(path))
        return reassign_steps(moves), "reassign", moves
    if spec.startswith(DECOMMISSION):
        (broker,) = _one_broker(spec[len(DECOMMISSION) :])
        decommission = propose_decommission(view, broker)
        steps = reassign_steps(decommission.moves)
        if is_live(view, broker) or (
            broker in view.brokers and view.brokers[broker].status == "shutting_down"
        ):
            stop = roll_steps([broker], view)[0]  # its stop; it is not started again
            steps += renumber([stop], len(steps) + 1)
        return steps, "decommission", decommission
    path = Path(spec)
    if not path.exists():
        raise PlanInputError(
            f"--steps {spec!r}: expected roll:B1,B2,..., reassign:FILE, decommission:B or a "
            "JSON-lines file of events (no such file)"
        )
    return parse_event_lines(_read(path, "steps"), str(path), cluster, view), "events", None


def _one_broker(text: str) -> list[int]:
    brokers = parse_broker_list(text, "decommission")
    if len(brokers) != 1:
        raise PlanInputError(f"decommission: one broker at a time, got {text!r}")
    return brokers


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PlanInputError(f"{what}: cannot read {path}: {error}") from None


# ---- proposals -----------------------------------------------------------------------------


def _roll_proposal(
    settings: Settings,
    tables: dict[str, list[dict[str, Any]]],
    cluster: str,
    brokers: list[int],
    roll_kind: str,
) -> dict[str, Any]:
    started = time.perf_counter()
    view = ClusterView.of_tables(cluster, tables, default_min_isr(settings))
    found: RollProposal = search_roll(view, brokers)
    searched = time.perf_counter() - started
    out: dict[str, Any] = {
        "kind": "roll",
        "exists": found.exists,
        "text": describe_roll(found, brokers),
        "search_seconds": round(searched, 3),
    }
    if not found.exists:
        out["impossible"] = [
            {"partition": f"{k[0]}-{k[1]}", "reason": why}
            for k, why in sorted(found.impossible.items())
        ]
        return out
    out["order"] = found.order
    out["steps"] = "roll:" + ",".join(map(str, found.order))
    out["holds"] = [
        {"before": b, "partitions": [f"{k[0]}-{k[1]}" for k in keys]}
        for b, keys in found.holds.items()
    ]
    started = time.perf_counter()
    try:
        checked: PlanRun = run_plan(
            settings, tables, cluster, roll_steps(found.order, view, roll_kind, found.holds)
        )
    except ImpossibleStep as error:
        # the proposal, not the requested plan, fails: the plan's verdict stands
        out["verified"] = {
            "verdict": f"impossible: {error}",
            "seconds": round(time.perf_counter() - started, 3),
            "worst_step": None,
        }
        return out
    worst = checked.worst
    out["verified"] = {
        "verdict": "safe" if checked.safe else "unsafe",
        "seconds": round(checked.seconds, 3),
        "worst_step": None if worst is None else worst.as_json(),
    }
    return out


def _decommission_proposal(decommission: Decommission) -> dict[str, Any]:
    broker, stranded = decommission.broker, decommission.stranded
    text = [
        f"move {len(decommission.moves)} replicas off broker {broker}; "
        f"{decommission.leader_moves} leaderships move (the partitions it leads), no "
        "preferred leader changes otherwise",
    ]
    if stranded:
        shown = names_shown(stranded, 10)
        text.append(
            f"warning: broker {broker} is down and holds the only replica of {len(stranded)} "
            f"partition{'s' if len(stranded) != 1 else ''} ({shown}): with nothing to copy "
            f"from, no such move finishes until {broker} returns"
        )
    return {
        "kind": "decommission",
        "broker": broker,
        "partitions": len(decommission.moves),
        "leader_moves": decommission.leader_moves,
        "stranded": list(stranded),
        "reassignment": reassignment_json(decommission.moves),
        "text": text,
    }


def _proposal_text(proposal: dict[str, Any] | None, safe_roll: str | None) -> str | None:
    """What `--proposal FILE` holds: a decommission's reassignment in Kafka's JSON format;
    for a roll, the order to run as its first line (the requested one when it is safe) and
    the holds as `#` lines; `#` lines alone when no safe order exists. None: nothing to
    propose."""
    if proposal is None:
        return None if safe_roll is None else f"{safe_roll}\n# the requested order is safe\n"
    if proposal["kind"] == "decommission":
        return json.dumps(proposal["reassignment"], indent=2) + "\n"
    comments = [f"# {line.strip()}" for line in proposal["text"]]
    first = [proposal["steps"]] if proposal["exists"] else []
    return "\n".join(first + comments) + "\n"
