"""Helpers for the KRaft engine's scenario tests (not collected)."""

from __future__ import annotations

from typing import Any

from controller.kraft import KRaftSettings, Outcome, QuorumController

PCR = "PartitionChangeRecord"
BRCR = "BrokerRegistrationChangeRecord"


def make(
    brokers: int = 3,
    *,
    min_isr: int = 1,
    elr: int = 1,
    unclean: bool = False,
    mv: str = "4.1-IV1",
    racks: dict[int, str] | None = None,
) -> QuorumController:
    """A cluster whose brokers 1..n registered and unfenced (broker_startup each)."""
    qc = QuorumController(
        KRaftSettings(
            eligible_leader_replicas_version=elr,
            metadata_version=mv,
            min_insync_replicas=min_isr,
            unclean_leader_election_enable=unclean,
        )
    )
    for b in range(1, brokers + 1):
        event: dict[str, Any] = {"type": "broker_startup", "broker": b}
        if racks and b in racks:
            event["rack"] = racks[b]
        qc.apply(event)
    return qc


def records(outcome: Outcome) -> list[tuple[str, dict[str, Any]]]:
    return [(r.type, r.fields) for r in outcome.records]


def pcr(topic: str, partition: int, **fields: Any) -> tuple[str, dict[str, Any]]:
    """A PartitionChangeRecord's expected fields, in schema order (the tests compare dicts,
    so order does not matter; the names do)."""
    names = {
        "isr": "isr",
        "leader": "leader",
        "replicas": "replicas",
        "removing": "removingReplicas",
        "adding": "addingReplicas",
        "lrs": "leaderRecoveryState",
        "elr": "eligibleLeaderReplicas",
        "lke": "lastKnownElr",
    }
    out: dict[str, Any] = {"partitionId": partition, "topic": topic}
    for key, value in fields.items():
        out[names[key]] = value
    return (PCR, out)


def fence(broker: int, epoch: int) -> tuple[str, dict[str, Any]]:
    return (BRCR, {"brokerId": broker, "brokerEpoch": epoch, "fenced": 1})


def unfence(broker: int, epoch: int) -> tuple[str, dict[str, Any]]:
    return (BRCR, {"brokerId": broker, "brokerEpoch": epoch, "fenced": -1})


def create(qc: QuorumController, topic: str, *assignment: list[int], **extra: Any) -> Outcome:
    return qc.apply(
        {
            "type": "topic_creation",
            "topic": topic,
            "assignment": {str(i): a for i, a in enumerate(assignment)},
            **extra,
        }
    )


def state(qc: QuorumController, topic: str = "t", partition: int = 0) -> dict[str, Any]:
    view = qc.partition(topic, partition)
    assert view is not None
    return {
        "leader": view.leader,
        "le": view.leader_epoch,
        "pe": view.partition_epoch,
        "isr": list(view.isr),
        "elr": list(view.elr),
        "lke": list(view.last_known_elr),
        "lrs": view.leader_recovery_state,
    }


def epoch(qc: QuorumController, broker: int) -> int:
    view = qc.broker(broker)
    assert view is not None
    return view.broker_epoch
