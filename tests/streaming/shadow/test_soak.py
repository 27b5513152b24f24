"""A short soak of the ZooKeeper-mode shadow (`streaming/chaos/soak.py`;
`benchmarks/live/bench_soak.py` runs it for minutes): seeded chaos against the session's real
cluster, `kcsim shadow` writing to a topic of it, `kcsim run` with a 1 s trigger applying
that topic into a Delta lake. The verdict (`SoakResult.faults`): no event lost between
the topic and the lake's `applied_events`, none written twice, the shadow's `seq`
increasing throughout, zero divergences, zero rejected events, every broker kill's event
in Delta (the run opens with a kill -9), and the resident memory of the shadow's and the
job's process trees not growing past a generous bound once the job has run its first
batch. The chaos is the differential test's driver: SPEC §8/§9 (broker changes), §10
(creation), §11 (controlled shutdown), §12.1 (preferred election), §14 (reassignment),
§15 (deletion). The KRaft shadow's soak is in `test_differential_kraft.py`, on that
module's cluster. `KCSIM_SOAK_SECONDS=N` runs the chaos longer.
"""

from __future__ import annotations

import os

import pytest

from streaming.chaos.live_zk import ZkCluster
from streaming.chaos.soak import Soak

CHAOS_S = float(os.environ.get("KCSIM_SOAK_SECONDS", "30"))
SEED = 20261129
# A short run's memory after the first batch: the job's Spark JVM still grows its heap
# and code cache toward their steady size (~100 MiB in 40 s measured); these bounds
# catch a runaway (a table or a model kept whole per batch), not a slow leak (the
# bench's long runs judge that).
SHADOW_GROWTH_MIB = 64
JOB_GROWTH_MIB = 384


@pytest.mark.zk
@pytest.mark.spark
@pytest.mark.slow
def test_zk_soak_loses_nothing_and_diverges_nowhere(zk_cluster: ZkCluster, tmp_path):
    soak = Soak(tmp_path, SEED, CHAOS_S, zk=zk_cluster, rss_every_s=2, warm_up_s=0)
    soak.open_with_kill = True
    try:
        result = soak.run()
    finally:
        zk_cluster.ensure_all_up()
        soak.delete_topics()
    report = "\n".join(result.lines())
    assert result.faults(SHADOW_GROWTH_MIB, JOB_GROWTH_MIB) == [], report
    assert result.kill_latencies, report
    print(report)
