"""The divergence classes of an imported run: which (event type, field) a divergence first
appears or changes at; shared by the KRaft log import tests."""

from __future__ import annotations

import json


def divergence_classes(events: list[dict], rows: list[dict]) -> set[tuple[str, str]]:
    """(event type, field) of every divergence that first appears or changes at an event:
    an epoch's difference (observed - simulated) that stays the same on later events of
    the partition is the same divergence carried on, not a new one."""
    by_seq: dict[int, list[dict]] = {}
    for row in rows:
        by_seq.setdefault(row["seq"], []).append(row)
    last: dict[tuple, object] = {}
    classes: set[tuple[str, str]] = set()
    for event in events:
        found = {(r["topic"], r["partition"], r["field"]): r for r in by_seq.get(event["seq"], [])}
        observed = event.get("observed", {}).get("partitions", [])
        keys = {(o["topic"], o["partition"], f) for o in observed for f in _EPOCHS} | set(found)
        for key in keys:
            row = found.get(key)
            value: object = 0 if row is None else _difference(row)
            if value != last.get(key, 0):
                classes.add((event["type"], key[2]))
            last[key] = value
    return classes


_EPOCHS = ("leader_epoch", "partition_epoch")


def _difference(row: dict) -> object:
    if row["field"] in _EPOCHS:
        return json.loads(row["observed"]) - json.loads(row["simulated"])
    return (row["observed"], row["simulated"])


# (event type, field) where a difference between KRaft and kcsim's ZooKeeper-mode engine
# first appears or changes when a KRaft log's imported events are replayed with `zk`;
# docs/guide/importing-logs.md gives each one's reason in Kafka's source (SPEC-KRAFT §24)
EXPECTED_CLASSES = {
    # D1: a follower leaving the ISR on a fence or controlled shutdown: ZooKeeper mode's
    # removeReplicasFromIsr bumps the leader epoch, KRaft (metadata.version >= 3.6) not
    ("broker_failure", "leader_epoch"),
    ("controlled_shutdown", "leader_epoch"),
    # D2: a reassignment: ZooKeeper mode writes it in steps (phase A bumps the leader
    # epoch, phase B elects and removes replicas one write each), KRaft in one record per
    # step; the leader's AlterPartition completing it is KRaft's second record
    ("partition_reassignment", "leader_epoch"),
    ("partition_reassignment", "partition_epoch"),
    ("isr_change", "leader_epoch"),
    ("isr_change", "partition_epoch"),
    # D3: KRaft removes a deleted topic at once with one RemoveTopicRecord and sends no
    # StopReplica; ZooKeeper mode's TopicDeletionManager waits for every replica's answer
    ("topic_deletion", "partition"),
}

# With min.insync.replicas above 1, a fence puts the broker in the ELR of partitions whose
# ISR it leaves below the minimum, and its next registration after an unclean shutdown
# (SIGKILL) takes it out again with a PartitionChangeRecord (ReplicationControlManager
# .handleBrokerShutdown): KRaft writes, ZooKeeper mode (no ELR) not
ELR_CLASSES = {("broker_registration", "partition_epoch")}
