"""`controller.health.HealthCounts`, the `health` counters both engines keep partition by
partition (CONTRACT §2 `health`; SPEC §12.3 for `max_broker_imbalance`), driven as
hypothesis's stateful testing does: partitions counted, changed and forgotten in any
order, the counters compared after every step with the same figures counted from
scratch."""

from __future__ import annotations

from typing import NamedTuple

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from controller.health import HealthCounts


class Part(NamedTuple):
    offline: int
    under_replicated: int
    at_min_isr: int
    not_preferred: int
    preferred: int
    preferred_not_leading: int


flags = st.integers(0, 1)
parts = st.builds(Part, flags, flags, flags, flags, st.integers(-1, 4), flags)


class Counters(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.counts = HealthCounts()
        self.parts: dict[int, Part] = {}

    @rule(key=st.integers(0, 12), part=parts)
    def set(self, key: int, part: Part) -> None:
        old = self.parts.get(key)
        if old is None:
            self.counts.count(part, 1)
        else:
            self.counts.move(old, part)
        self.parts[key] = part

    @rule(key=st.integers(0, 12))
    def forget(self, key: int) -> None:
        old = self.parts.pop(key, None)
        if old is not None:
            self.counts.count(old, -1)

    @invariant()
    def counters_are_the_sums(self) -> None:
        values = self.parts.values()
        assert (
            self.counts.offline,
            self.counts.under_replicated,
            self.counts.at_min_isr,
            self.counts.not_preferred,
        ) == tuple(sum(getattr(p, f) for p in values) for f in Part._fields[:4])

    @rule()
    def imbalance_is_the_largest_ratio(self) -> None:
        # read now and then, not after every step: changes pile up between two reads
        total: dict[int, int] = {}
        others: dict[int, int] = {}
        for p in self.parts.values():
            if p.preferred >= 0:
                total[p.preferred] = total.get(p.preferred, 0) + 1
                others[p.preferred] = others.get(p.preferred, 0) + p.preferred_not_leading
        expected = max((others[b] / total[b] for b in total), default=0.0)
        assert self.counts.max_broker_imbalance == expected


TestHealthCounts = Counters.TestCase
TestHealthCounts.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
