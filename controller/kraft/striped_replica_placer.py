"""`StripedReplicaPlacer` with a seeded `java.util.Random` (SPEC-KRAFT §11.2, §11.3)."""

from __future__ import annotations

from collections.abc import Iterable

from controller.kraft.errors import ApiError
from controller.kraft.java_collections import JavaRandom, hash_order, string_hash


class _BrokerList:
    __slots__ = ("brokers", "epoch", "index", "offset")

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def initialize(self, rnd: JavaRandom) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rnd.next_int(len(self.brokers))

    def next(self, epoch: int) -> int:
        size = len(self.brokers)
        if not size:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % size
        if self.index >= size:
            return -1
        broker = self.brokers[(self.index + self.offset) % size]
        self.index += 1
        return broker


class _Rack:
    __slots__ = ("fenced", "unfenced")

    def __init__(self) -> None:
        self.fenced = _BrokerList()
        self.unfenced = _BrokerList()

    def next(self, epoch: int) -> int:
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


class _RackList:
    def __init__(self, rnd: JavaRandom, usable: Iterable[tuple[int, str | None, bool]]) -> None:
        self.rnd = rnd
        self.racks: dict[str | None, _Rack] = {}
        self.total = 0
        self.unfenced = 0
        for broker, rack_name, fenced in usable:
            rack = self.racks.get(rack_name)
            if rack is None:
                rack = self.racks[rack_name] = _Rack()
            if fenced:
                rack.fenced.brokers.append(broker)
            else:
                self.unfenced += 1
                rack.unfenced.brokers.append(broker)
            self.total += 1
        # HashMap<Optional<String>> iteration order: Optional's hash is its value's (0 empty)
        names = list(self.racks)
        self.hash_ordered = hash_order(names, [0 if n is None else string_hash(n) for n in names])
        for name in self.hash_ordered:
            rack = self.racks[name]
            rack.fenced.initialize(rnd)
            rack.unfenced.initialize(rnd)
        # the empty rack first, then String.compareTo order
        self.names: list[str | None] = sorted(names, key=lambda n: (n is not None, n or ""))
        self.offset = rnd.next_int(len(self.names)) if self.names else 0
        self.epoch = 0

    def place(self, rf: int) -> list[int]:
        _check_positive(rf)
        _check_enough(rf, self.total)
        _check_unfenced(self.unfenced)
        if self.epoch == self.unfenced and self.unfenced > 1:
            self.rnd.shuffle(self.names)
            for name in self.hash_ordered:
                rack = self.racks[name]
                self.rnd.shuffle(rack.fenced.brokers)
                self.rnd.shuffle(rack.unfenced.brokers)
            self.epoch = 0
        count = len(self.names)
        if self.offset == count:
            self.offset = 0
        out: list[int] = []
        first = self.offset
        while True:
            result = self.racks[self.names[first]].unfenced.next(self.epoch)
            if result >= 0:
                out.append(result)
                break
            first += 1
            if first == count:
                first = 0
        index = self.offset
        for _ in range(1, rf):
            result = -1
            while result < 0:
                if index == first:
                    first = -1
                else:
                    result = self.racks[self.names[index]].next(self.epoch)
                index += 1
                if index == count:
                    index = 0
            out.append(result)
        self.epoch += 1
        self.offset += 1
        return out


def _check_positive(rf: int) -> None:
    if rf <= 0:
        raise ApiError(
            "INVALID_REPLICATION_FACTOR",
            f"Invalid replication factor {rf}: the replication factor must be positive.",
        )


def _check_unfenced(unfenced: int) -> None:
    if unfenced == 0:
        raise ApiError("INVALID_REPLICATION_FACTOR", "All brokers are currently fenced.")


def _check_enough(rf: int, total: int) -> None:
    if rf > total:
        raise ApiError(
            "INVALID_REPLICATION_FACTOR",
            f"The target replication factor of {rf} cannot be reached because only "
            f"{total} broker(s) are registered.",
        )


def place(
    rnd: JavaRandom, usable: Iterable[tuple[int, str | None, bool]], partitions: int, rf: int
) -> list[list[int]]:
    """`StripedReplicaPlacer.place`: one RackList, then one placement per partition. Raises
    ApiError(INVALID_REPLICATION_FACTOR) with the placer's message (without Kafka's
    "Unable to replicate the partition R time(s): " prefix, which the caller adds)."""
    racks = _RackList(rnd, usable)
    _check_positive(rf)
    _check_unfenced(racks.unfenced)
    _check_enough(rf, racks.total)
    return [racks.place(rf) for _ in range(partitions)]
