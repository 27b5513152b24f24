"""The settings a simulated KRaft cluster reads (CONTRACT §5, SPEC-KRAFT §1.1, §2.4).

Every value is a controller's *static* configuration or a feature level the cluster was
formatted with; dynamic configs and later feature changes are events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# metadata.version names of Kafka 4.1.1 with their feature levels (MetadataVersion.java),
# from MINIMUM_VERSION (3.3-IV3) to LATEST_PRODUCTION (4.1-IV1); the unstable 4.2 levels
# cannot be formatted by a production cluster and are refused.
METADATA_VERSIONS: dict[str, int] = {
    "3.3-IV3": 7,
    "3.4-IV0": 8,
    "3.5-IV0": 9,
    "3.5-IV1": 10,
    "3.5-IV2": 11,
    "3.6-IV0": 12,
    "3.6-IV1": 13,
    "3.6-IV2": 14,
    "3.7-IV0": 15,
    "3.7-IV1": 16,
    "3.7-IV2": 17,
    "3.7-IV3": 18,
    "3.7-IV4": 19,
    "3.8-IV0": 20,
    "3.9-IV0": 21,
    "4.0-IV0": 22,
    "4.0-IV1": 23,
    "4.0-IV2": 24,
    "4.0-IV3": 25,
    "4.1-IV0": 26,
    "4.1-IV1": 27,
}
# A bare release ("3.7") names its newest level, as Kafka's MetadataVersion.fromVersionString.
_RELEASES: dict[str, str] = {name.split("-")[0]: name for name in METADATA_VERSIONS}

MV_3_6_IV0 = METADATA_VERSIONS["3.6-IV0"]  # no leader-epoch bump on ISR shrink from here
MV_3_7_IV2 = METADATA_VERSIONS["3.7-IV2"]  # directory assignment (not modelled)
MV_4_0_IV1 = METADATA_VERSIONS["4.0-IV1"]  # ELR fields exist; ELR level 1 needs it

ELR_VERSION_KEY = "eligible.leader.replicas.version"
MAX_ELR_LEVEL = 1

_BOOLEAN = {"true": True, "false": False}


@dataclass(frozen=True, slots=True)
class KRaftSettings:
    """A simulated KRaft cluster's static settings.

    eligible_leader_replicas_version: the ELR feature level the cluster is formatted with
        (1 = ELR on, as a new 4.1 cluster; 0 = off). Later changes are `feature_update` events.
    metadata_version: the finalized metadata.version ("3.3-IV3" .. "4.1-IV1"); only the
        rules SPEC-KRAFT §1.2 lists depend on it.
    min_insync_replicas: every controller's static `min.insync.replicas` (the last link of
        SPEC-KRAFT §2.4's chain), and [ELR] the cluster-level dynamic value a new cluster
        starts with (§2.7).
    unclean_leader_election_enable: every controller's static
        `unclean.leader.election.enable`.
    auto_leader_rebalance_enable: whether `auto_rebalance_check` runs the rebalance task.
    delete_topic_enable: false refuses `topic_deletion` (the front door's rejection).
    simulate_brokers: `kcsim.simulate.brokers` (SPEC-KRAFT §14.3): a caught-up replica
        rejoins the ISR through its leader's AlterPartition by itself.
    """

    eligible_leader_replicas_version: int = 1
    metadata_version: str = "4.1-IV1"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    delete_topic_enable: bool = True
    simulate_brokers: bool = False

    def __post_init__(self) -> None:
        if self.metadata_version not in METADATA_VERSIONS:
            raise ValueError(
                f"metadata.version: unknown or unsupported version {self.metadata_version!r} "
                f"(Kafka 4.1.1 supports 3.3-IV3 to 4.1-IV1)"
            )
        if not 0 <= self.eligible_leader_replicas_version <= MAX_ELR_LEVEL:
            raise ValueError(
                f"{ELR_VERSION_KEY}: unknown level {self.eligible_leader_replicas_version} "
                f"(0 = off, 1 = on)"
            )
        if self.eligible_leader_replicas_version >= 1 and self.metadata_level < MV_4_0_IV1:
            raise ValueError(
                f"{ELR_VERSION_KEY}: level {self.eligible_leader_replicas_version} needs "
                f"metadata.version 4.0-IV1 or newer, got {self.metadata_version}"
            )
        if self.min_insync_replicas < 1:
            raise ValueError(
                f"min.insync.replicas: must be at least 1, got {self.min_insync_replicas}"
            )

    @property
    def metadata_level(self) -> int:
        """The feature level of `metadata_version`."""
        return METADATA_VERSIONS[self.metadata_version]

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> KRaftSettings:
        """Settings from Kafka-style properties (CONTRACT §1, §5). Keys this engine does not
        read (`kcsim.engine`, `leader.imbalance.per.broker.percentage`, ...) are ignored;
        a bad value of a key it reads raises ValueError naming the key."""
        values: dict[str, object] = {}
        for key, raw in properties.items():
            text = str(raw).strip()
            if key == "metadata.version":
                values["metadata_version"] = _metadata_version(text)
            elif key == ELR_VERSION_KEY:
                values["eligible_leader_replicas_version"] = _int(key, text)
            elif key == "min.insync.replicas":
                values["min_insync_replicas"] = _int(key, text)
            elif key == "unclean.leader.election.enable":
                values["unclean_leader_election_enable"] = _bool(key, text)
            elif key == "auto.leader.rebalance.enable":
                values["auto_leader_rebalance_enable"] = _bool(key, text)
            elif key == "delete.topic.enable":
                values["delete_topic_enable"] = _bool(key, text)
            elif key == "kcsim.simulate.brokers":
                values["simulate_brokers"] = _bool(key, text)
        return cls(**values)  # type: ignore[arg-type]


def _metadata_version(text: str) -> str:
    if text in METADATA_VERSIONS:
        return text
    if text in _RELEASES:
        return _RELEASES[text]
    raise ValueError(
        f"metadata.version: unknown or unsupported version {text!r} "
        f"(Kafka 4.1.1 supports 3.3-IV3 to 4.1-IV1)"
    )


def _int(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{key}: expected an integer, got {text!r}") from None


def _bool(key: str, text: str) -> bool:
    value = _BOOLEAN.get(text.lower())
    if value is None:
        raise ValueError(f"{key}: expected true or false, got {text!r}")
    return value
