"""`kcsim whatif EVENTS --vs kcsim.engine=kraft` (CONTRACT §5): the same events through
both controllers, side by side: totals, differing leaders and the classes of difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.cli import main
from streaming.insight.whatif import difference_classes

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "events"


def test_whatif_examples_zk_against_kraft(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", str(EXAMPLES), "--vs", "kcsim.engine=kraft"]) == 0
    out = capsys.readouterr().out
    totals, leaders, classes = out.split("\n\n")[:3]
    zk, kraft = totals.splitlines()[1:3]
    assert zk.split()[:2] == ["0", "defaults"] and kraft.split()[:2] == ["1", "kcsim.engine=kraft"]
    # a KRaft controller sends no requests and writes records; ZooKeeper mode the reverse
    assert int(zk.split()[5]) > 0 and int(zk.split()[7]) == 0
    assert int(kraft.split()[5]) == 0 and int(kraft.split()[7]) > 0
    # SPEC-KRAFT §24 D3: the deleted topic is gone at once under kraft, waiting under zk
    assert "final leaders that differ" in leaders and "absent" in leaders
    assert classes.startswith("classes of difference from run 0 (partitions):")
    assert "only in run 0" in classes


def test_difference_classes() -> None:
    base = {
        ("c", "t", 0): {"leader": 1, "leader_epoch": 1, "isr": [1, 2]},
        ("c", "t", 1): {"leader": 2, "leader_epoch": 0, "isr": [1, 2]},
        ("c", "t", 2): {"leader": 2, "leader_epoch": 0, "isr": [2]},
    }
    other = {
        ("c", "t", 0): {"leader": 1, "leader_epoch": 2, "isr": [1, 2]},
        ("c", "t", 1): {"leader": 2, "leader_epoch": 0, "isr": [1, 2]},
        ("c", "u", 0): {"leader": 2, "leader_epoch": 0, "isr": [2]},
    }
    assert difference_classes(base, other) == {
        "leader_epoch": 1,
        "only in run 0": 1,
        "only in this run": 1,
    }
