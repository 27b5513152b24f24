"""`kcsim plan` at scale: a roll of every broker, the same roll failing with the safe-order
search on, and a decommission proposal, on a synthetic cluster.

Run by hand (not a test), one scenario per process so each peak RSS is its own:
    python benchmarks/synthetic/bench_plan.py --brokers 100 --partitions 100000 --scenario roll
    python benchmarks/synthetic/bench_plan.py ... --scenario roll --engine kraft

Under kraft the same cluster is built through the kraft engine (brokers registered, topics
created with the same assignments), outside the timed part, as the zk tables are.

The cluster is bench_core's (every partition online, led by its preferred replica, RF 3,
topics of 1,000), with min.insync.replicas=2 on every topic. `roll-search`: the first
`--lagging` partitions have their last replica out of the ISR, so the requested order
(0, 1, ..., N-1) fails and the search runs; its proposal is then planned again through
the controller. Printed: seconds to the verdict (state load + every step), the search's
seconds, the verification's, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from workloads import CLUSTER, cluster_rows

from controller.config import Settings
from controller.plan.planner import run_plan
from controller.plan.search import propose_decommission, search_roll
from controller.plan.state import cluster_tables, replayed_state
from controller.plan.steps import reassign_steps, renumber, roll_steps
from controller.plan.view import ClusterView
from controller.simulator import RawEvent


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def three_replicas(tables: dict[str, list[dict]], brokers: int) -> dict[str, list[dict]]:
    """Every partition on three distinct brokers (bench_core's placement gives some two
    when its shift doubles to the broker count): first, first + s, first + s + 1."""
    replicas_of = {}
    for index, row in enumerate(tables["partition_state"]):
        first = index % brokers
        shift = 1 + (index // brokers) % (brokers - 2)
        replicas = [first, (first + shift) % brokers, (first + shift + 1) % brokers]
        row["replicas"] = row["isr"] = replicas
        row["leader"] = first
        replicas_of[(row["topic"], row["partition"])] = replicas
    tables["replica_state"] = [
        {**template, "topic": topic, "partition": partition, "broker": broker}
        for (topic, partition), replicas in replicas_of.items()
        for broker in replicas
        for template in tables["replica_state"][:1]
    ]
    return tables


def kraft_tables(zk_tables: dict[str, list[dict]], lagging: int) -> dict[str, list[dict]]:
    """The same cluster under the kraft engine: registered brokers, topics created with the
    zk tables' assignments and min ISR 2, the first `lagging` partitions' ISR shrunk."""
    brokers = sorted(row["broker"] for row in zk_tables["brokers"])
    events: list[dict] = [{"cluster": CLUSTER, "type": "broker_startup", "brokers": brokers}]
    assignments: dict[str, dict[str, list[int]]] = {}
    for row in zk_tables["partition_state"]:
        assignments.setdefault(row["topic"], {})[str(row["partition"])] = row["replicas"]
    for topic, assignment in assignments.items():
        events.append(
            {
                "cluster": CLUSTER,
                "type": "topic_creation",
                "topic": topic,
                "assignment": assignment,
                "configs": {"min.insync.replicas": "2"},
            }
        )
    for row in zk_tables["partition_state"][:lagging]:
        events.append(
            {
                "cluster": CLUSTER,
                "type": "isr_change",
                "topic": row["topic"],
                "partition": row["partition"],
                "isr": row["replicas"][:2],
            }
        )
    settings = Settings.from_properties({"kcsim.engine": "kraft"})
    raws = [RawEvent(json.dumps(event), f"bench:{n}") for n, event in enumerate(events)]
    replayed = replayed_state(settings, raws)
    assert not replayed.rejected, replayed.rejected[:1]
    return cluster_tables(replayed.tables, CLUSTER)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument(
        "--scenario", choices=("roll", "roll-search", "decommission"), required=True
    )
    parser.add_argument("--lagging", type=int, default=100)
    parser.add_argument("--roll-brokers", type=int, default=None, help="default: all")
    parser.add_argument("--engine", choices=("zk", "kraft"), default="zk")
    args = parser.parse_args()
    settings = Settings.from_properties(
        {"kcsim.engine": args.engine, "kcsim.simulate.brokers": "true"}
    )
    tables = three_replicas(cluster_rows(args.brokers, args.partitions, 3), args.brokers)
    for row in tables["topics"]:
        row["configs"] = {"min.insync.replicas": "2"}
    lagging = args.lagging if args.scenario == "roll-search" else 0
    if args.engine == "kraft":
        built = time.perf_counter()
        tables = kraft_tables(tables, lagging)
        print(f"kraft state built in {time.perf_counter() - built:.1f} s", flush=True)
    else:
        for row in tables["partition_state"][:lagging]:
            row["isr"] = row["replicas"][:2]
    started = time.perf_counter()
    cpu = time.process_time()
    view = ClusterView.of_tables(CLUSTER, tables, 1)
    brokers = list(range(args.roll_brokers or args.brokers))
    print(
        f"{args.scenario} ({args.engine}): {args.brokers} brokers, {args.partitions:,} "
        "partitions, RF 3, "
        f"min ISR 2 (view built in {time.perf_counter() - started:.1f} s)",
        flush=True,
    )
    if args.scenario == "decommission":
        searched = time.perf_counter()
        proposal = propose_decommission(view, 0)
        search = time.perf_counter() - searched
        steps = reassign_steps(proposal.moves)
        steps += renumber(roll_steps([0], view)[:1], len(steps) + 1)
        run = run_plan(settings, tables, CLUSTER, steps)
        print(
            f"  proposal: {len(proposal.moves):,} replicas moved, {proposal.leader_moves:,} "
            f"leader moves, searched in {search:.3f} s"
        )
    elif args.scenario == "roll":
        run = run_plan(settings, tables, CLUSTER, roll_steps(brokers, view), view)
    else:  # (the search reads the view after: the plan gets its own)
        run = run_plan(settings, tables, CLUSTER, roll_steps(brokers, view))
    total = time.perf_counter() - started
    worst = run.worst
    print(
        f"  plan: {len(run.steps):,} steps, verdict {'safe' if run.safe else 'unsafe'}, worst "
        f"{worst.label if worst else '-'} ({len(worst.under_min_isr) if worst else 0} under "
        f"min ISR); {run.seconds:.1f} s in run_plan, {total:.1f} s to the verdict, "
        f"{time.process_time() - cpu:.1f} s CPU; "
        f"{sum(s.output_count for s in run.steps):,} {run.output_kind}, "
        f"{sum(s.output_bytes for s in run.steps) / 1e9:.2f} GB",
        flush=True,
    )
    if args.scenario == "roll-search":
        searched = time.perf_counter()
        proposal = search_roll(view, brokers)
        search = time.perf_counter() - searched
        print(
            f"  search: {search:.3f} s; order changed: {proposal.order != brokers}; holds: "
            f"{len(proposal.holds)}; impossible: {len(proposal.impossible)}",
            flush=True,
        )
        if not proposal.exists:
            return
        checked = run_plan(
            settings, tables, CLUSTER, roll_steps(proposal.order, view, "clean", proposal.holds)
        )
        print(
            f"  verified: {'safe' if checked.safe else 'unsafe'} in {checked.seconds:.1f} s; "
            f"total with search and verification {time.perf_counter() - started:.1f} s",
            flush=True,
        )
    print(f"  peak RSS {peak_mib():,.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
