"""A soak of either shadow: seeded chaos against a real local cluster for --minutes, with
`kcsim shadow` writing to a topic of that cluster (replication factor 3) and `kcsim run`
(1 s trigger) applying it into a Delta lake (`streaming/chaos/soak.py` says what is
measured and how).

- `--engine zk`: `kafka-local start --zk`, ZooKeeper and 3 brokers (Kafka 3.7.1); the
  chaos driver is the ZooKeeper differential test's (`streaming/chaos/live_zk.py`: kill
  -9, controlled shutdowns, restarts, topic creation, partition addition, deletion,
  preferred elections, reassignments), each operation waiting for the shadow to have
  written it.
- `--engine kraft`: `kafka-local start --nodes 3 --controllers 3` (Kafka 4.1.1), the
  shadow following the first controller's metadata log, made small (16 KiB segments,
  snapshots every 8 KiB, old segments deleted) so that it rolls and is cleaned under the
  shadow all along; the chaos driver is the KRaft differential test's
  (`streaming/chaos/live_kraft.py`: kill -9 and SIGTERM of brokers, the active controller
  killed, restarts, preferred elections, reassignments, partition additions, config
  changes).

Both clusters fence or unregister a dead broker after 6 s (broker.session.timeout.ms,
zookeeper.session.timeout.ms). Prints the figures; the cluster, lake and logs stay in
--dir (the cluster is stopped). Run by hand, one engine at a time:

    python benchmarks/live/bench_soak.py --engine zk --minutes 30 --seed 1
    python benchmarks/live/bench_soak.py --engine kraft --minutes 30 --seed 1
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient

from streaming.chaos.live_kraft import KraftCluster
from streaming.chaos.live_zk import ZkCluster
from streaming.chaos.soak import Soak
from streaming.local_clusters import kraft_cluster, zk_cluster

# the KRaft metadata log made to roll, snapshot and delete segments during the soak
METADATA_LOG = kraft_cluster.ROLLING_LOG
FOLLOWED = 4  # the first of the separate controllers (nodes 4..6)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--engine", choices=("zk", "kraft"), required=True)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="work directory (default: a new temp one)")
    parser.add_argument("--rss-every", type=float, default=15, help="seconds between samples")
    parser.add_argument("--warm-up", type=float, default=120, help="seconds of warm-up")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix=f"kcsim-soak-{args.engine}-"))
    cluster_dir = work / "cluster"
    began = time.monotonic()
    soak = Soak(
        work=work,
        seed=args.seed,
        seconds=args.minutes * 60,
        rss_every_s=args.rss_every,
        warm_up_s=args.warm_up,
        say=lambda text: print(f"[{time.monotonic() - began:6.0f} s] {text}", flush=True),
    )
    if args.engine == "zk":
        address = zk_cluster.start(cluster_dir, brokers=3)
        client = KazooClient(hosts=address.zookeeper, timeout=10.0)
        client.start(timeout=15)
        brokers = zk_cluster.load_layout(cluster_dir).broker_ids
        soak.zk = ZkCluster(address.zookeeper, address.bootstrap, cluster_dir, brokers, client)
        stop = lambda: (client.stop(), zk_cluster.stop(cluster_dir))  # noqa: E731
    else:
        bootstrap = kraft_cluster.start(cluster_dir, nodes=3, controllers=3, overrides=METADATA_LOG)
        nodes = kraft_cluster.load_layout(cluster_dir).node_ids
        soak.kraft, soak.followed = KraftCluster(cluster_dir, bootstrap, nodes), FOLLOWED
        stop = lambda: kraft_cluster.stop(cluster_dir, timeout_s=10)  # noqa: E731
    soak.say(f"cluster up ({args.engine}); work in {work}")
    try:
        result = soak.run()
    finally:
        stop()
    print("\n".join(result.lines()))
    # every sample and latency, for a closer look than the printed series
    figures = {"memory_s_shadow_kib_job_kib": result.memory, "kills": result.kill_latencies}
    (work / "soak-figures.json").write_text(json.dumps(figures))
    for row in result.divergences[:5]:
        print(f"  divergence: {row}")
    print(f"seed {args.seed}; logs and lake in {work}")
    # memory is printed, not judged here: the figures are for reading
    faults = result.faults(shadow_growth_mib=float("inf"), job_growth_mib=float("inf"))
    print(f"faults: {', '.join(faults) or 'none'}")
    sys.exit(1 if faults else 0)


if __name__ == "__main__":
    main()
