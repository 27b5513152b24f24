"""A short soak of each shadow (`streaming/chaos/soak.py`; `benchmarks/bench_soak.py` runs
it for minutes): seeded chaos against the session's real cluster, `kcsim shadow` writing
to a topic of it, `kcsim run` with a 1 s trigger applying that topic into a Delta lake.
The verdict: no event lost between the topic and the lake's `applied_events`, none
written twice, the shadow's `seq` increasing throughout, zero divergences, zero
rejected events, every broker kill's event in Delta (a run opens with a kill -9), and
the resident memory of the shadow's and the job's process trees not growing past a
generous bound once the job has run its first batch.

ZooKeeper mode: SPEC §8/§9 (broker changes), §10 (creation), §11 (controlled shutdown),
§12.1 (preferred election), §14 (reassignment), §15 (deletion), the operations of the
differential test's chaos driver. KRaft: SPEC-KRAFT §8, §9, §12, §13, §15.1, §18 by
the KRaft differential test's driver. `KCSIM_SOAK_SECONDS=N` runs the chaos longer.
"""

from __future__ import annotations

import os

import pytest

from streaming.chaos.live_kraft import KraftCluster
from streaming.chaos.live_zk import ZkCluster
from streaming.chaos.soak import Soak, SoakResult

CHAOS_S = float(os.environ.get("KCSIM_SOAK_SECONDS", "30"))
SEED = 20261129
# A short run's memory after the first batch: the job's Spark JVM still grows its heap
# and code cache toward their steady size; what a leak would add in this time is far
# smaller than these bounds, which catch a runaway (a table or a model kept whole per
# batch), not a slow leak (the bench's 30-minute runs judge that).
SHADOW_GROWTH_MIB = 64
JOB_GROWTH_MIB = 384


def assert_clean(result: SoakResult) -> None:
    report = "\n".join(result.lines())
    assert sum(result.operations.values()) > 0, report
    assert result.events > 0, report
    assert result.lost == [], report
    assert result.twice_in_topic == [] and result.twice_in_lake == [], report
    assert result.seq_faults == [], report
    assert result.divergences == [], report
    assert result.rejected == 0, report
    assert result.unattributed == 0, report
    assert result.notes == [], report  # every kill's event found in Delta
    assert result.kill_latencies, report  # the run opens with a kill -9
    shadow, job = result.growth_kib()
    assert shadow < SHADOW_GROWTH_MIB * 1024, report
    assert job < JOB_GROWTH_MIB * 1024, report
    print(report)


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
    assert_clean(result)


@pytest.mark.kraft
@pytest.mark.spark
@pytest.mark.slow
def test_kraft_soak_loses_nothing_and_diverges_nowhere(kraft_cluster: KraftCluster, tmp_path):
    soak = Soak(tmp_path, SEED, CHAOS_S, kraft=kraft_cluster, followed=1)
    soak.rss_every_s, soak.warm_up_s, soak.open_with_kill = 2, 0, True
    try:
        result = soak.run()
    finally:
        kraft_cluster.ensure_all_up()
        soak.delete_topics()
    assert_clean(result)
