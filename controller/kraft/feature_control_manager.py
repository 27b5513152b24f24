"""Finalized feature levels (Kafka's `FeatureControlManager`, SPEC-KRAFT §2.5, §17)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.kraft import records as rec
from controller.kraft.errors import ApiError
from controller.kraft.outcome import Record
from controller.kraft.settings import ELR_VERSION_KEY, MAX_ELR_LEVEL, MV_4_0_IV1, KRaftSettings


class FeatureControlManager:
    def __init__(self, settings: KRaftSettings) -> None:
        self.metadata_level = settings.metadata_level
        self.levels: dict[str, int] = {}
        if settings.eligible_leader_replicas_version:
            self.levels[ELR_VERSION_KEY] = settings.eligible_leader_replicas_version

    @property
    def elr_enabled(self) -> bool:
        """`FCM.isElrFeatureEnabled`."""
        return self.levels.get(ELR_VERSION_KEY, 0) >= 1

    def validate_elr_level(self, level: int) -> None:
        """UpdateFeatures' checks for `eligible.leader.replicas.version` (SPEC-KRAFT §17)."""
        if level < 0:
            raise ApiError(
                "INVALID_UPDATE_VERSION",
                f"Invalid update version {level} for feature {ELR_VERSION_KEY}. "
                "Can't downgrade to a negative version.",
            )
        if level > MAX_ELR_LEVEL:
            raise ApiError(
                "INVALID_UPDATE_VERSION",
                f"Invalid update version {level} for feature {ELR_VERSION_KEY}. "
                f"The controller does not support the given feature range.",
            )
        if level >= 1 and self.metadata_level < MV_4_0_IV1:
            raise ApiError(
                "INVALID_UPDATE_VERSION",
                f"Invalid update version {level} for feature {ELR_VERSION_KEY}. "
                f"{ELR_VERSION_KEY} {level} requires metadata.version 4.0-IV1 or newer.",
            )

    def replay(self, record: Record) -> None:
        f = record.fields
        if f["name"] == "metadata.version":
            self.metadata_level = f["featureLevel"]
        elif f["featureLevel"] == 0:
            self.levels.pop(f["name"], None)
        else:
            self.levels[f["name"]] = f["featureLevel"]

    @staticmethod
    def level_record(level: int) -> Record:
        return rec.feature_level(ELR_VERSION_KEY, level)

    def dump(self) -> dict[str, Any]:
        return {"metadata_level": self.metadata_level, "levels": dict(self.levels)}

    def load(self, data: Mapping[str, Any]) -> None:
        self.metadata_level = data["metadata_level"]
        self.levels = dict(data["levels"])
