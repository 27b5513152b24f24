"""A small cluster's znodes, in Kafka 3.7's layout, planted under a chroot of a real
ZooKeeper (never in a real cluster's own tree), so a shadow's events are known in advance
and no real controller changes them under a test."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.client import KazooClient


@contextmanager
def planted(zookeeper: str, brokers: list[int]) -> Iterator[tuple[str, KazooClient]]:
    """A chroot with `brokers` registered and broker `brokers[0]` as controller; yields it
    and a client writing the whole ZooKeeper, and removes the chroot at the end."""
    chroot = f"/kcsim-planted-{uuid.uuid4().hex[:8]}"
    writer = KazooClient(hosts=zookeeper)
    writer.start(timeout=30)
    try:
        for broker in brokers:
            registration = {"version": 5, "host": "h", "port": 9000 + broker, "endpoints": []}
            path = f"{chroot}/brokers/ids/{broker}"
            writer.create(path, json.dumps(registration).encode(), makepath=True)
        writer.ensure_path(f"{chroot}/brokers/topics")
        controller = {"version": 2, "brokerid": brokers[0], "timestamp": "0"}
        writer.create(f"{chroot}/controller", json.dumps(controller).encode())
        writer.create(f"{chroot}/controller_epoch", b"1")
        yield chroot, writer
    finally:
        writer.delete(chroot, recursive=True)
        writer.stop()
        writer.close()


def plant_topic(writer: KazooClient, chroot: str, topic: str, replicas: list[list[int]]) -> None:
    """A topic with one partition per entry of `replicas`, each led by its first replica
    with every replica in sync, as a controller leaves a new topic."""
    assignment = {str(p): r for p, r in enumerate(replicas)}
    znode = {"version": 3, "partitions": assignment, "adding_replicas": {}, "removing_replicas": {}}
    writer.create(f"{chroot}/brokers/topics/{topic}", json.dumps(znode).encode())
    for p, r in enumerate(replicas):
        state = {"controller_epoch": 1, "leader": r[0], "version": 1, "leader_epoch": 0, "isr": r}
        path = f"{chroot}/brokers/topics/{topic}/partitions/{p}/state"
        writer.create(path, json.dumps(state).encode(), makepath=True)
