"""Dynamic configs and their resolution (Kafka's `ConfigurationControlManager`,
SPEC-KRAFT §2.4, §16)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.kraft import records as rec
from controller.kraft.errors import ApiError
from controller.kraft.java_collections import string_hash_map_order
from controller.kraft.outcome import Record
from controller.kraft.settings import KRaftSettings

MIN_ISR = "min.insync.replicas"
UNCLEAN = "unclean.leader.election.enable"

Resource = tuple[int, str]  # (resourceType, resourceName)


def validate_value(name: str, value: str) -> str | None:
    """The problem with a config value Kafka would refuse, or None. Only the values that
    steer the controller are checked here; the front door validates the rest."""
    if name == MIN_ISR:
        try:
            number = int(value.strip())
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type INT"
        if number < 1:
            return f"Invalid value {value} for configuration {name}: Value must be at least 1"
    elif name == UNCLEAN and value.strip().lower() not in ("true", "false"):
        return (
            f"Invalid value {value} for configuration {name}: "
            "Expected value to be either true or false"
        )
    return None


class ConfigurationControlManager:
    def __init__(self, settings: KRaftSettings) -> None:
        self.settings = settings
        self.configs: dict[Resource, dict[str, str]] = {}
        # the node id of the active controller (None before the first failover: no node
        # layer, SPEC-KRAFT §2.4)
        self.active_controller: int | None = None

    # -- resolution (SPEC-KRAFT §2.4) ------------------------------------------------------
    def _resolve(self, topic: str, name: str) -> str | None:
        value = self.configs.get((rec.RESOURCE_TOPIC, topic), {}).get(name)
        if value is not None:
            return value
        if self.active_controller is not None:
            value = self.configs.get((rec.RESOURCE_BROKER, str(self.active_controller)), {}).get(
                name
            )
            if value is not None:
                return value
        return self.configs.get((rec.RESOURCE_BROKER, ""), {}).get(name)

    def min_isr(self, topic: str) -> int:
        value = self._resolve(topic, MIN_ISR)
        return int(value.strip()) if value is not None else self.settings.min_insync_replicas

    def unclean_allowed(self, topic: str) -> bool:
        value = self._resolve(topic, UNCLEAN)
        if value is None:
            return self.settings.unclean_leader_election_enable
        return value.strip().lower() == "true"

    def topic_configs(self, topic: str) -> dict[str, str]:
        return dict(self.configs.get((rec.RESOURCE_TOPIC, topic), {}))

    def has_cluster_value(self, name: str) -> bool:
        return name in self.configs.get((rec.RESOURCE_BROKER, ""), {})

    def broker_resources_with(self, name: str) -> list[str]:
        return sorted(
            r[1]
            for r, values in self.configs.items()
            if r[0] == rec.RESOURCE_BROKER and r[1] != "" and name in values
        )

    # -- IncrementalAlterConfigs (SPEC-KRAFT §16) ---------------------------------------------
    def alter_topic(self, topic: str, configs: Mapping[str, str]) -> list[Record]:
        """SET of a TOPIC resource: a ConfigRecord per key whose value changes, then [the
        caller adds ELR's ClearElr]."""
        current = self.configs.get((rec.RESOURCE_TOPIC, topic), {})
        out = []
        for name in string_hash_map_order(list(configs)):
            if current.get(name) != configs[name]:
                out.append(rec.config(rec.RESOURCE_TOPIC, topic, name, configs[name]))
        return out

    def alter_broker(
        self, resource_name: str, configs: Mapping[str, str], elr_enabled: bool
    ) -> list[Record]:
        """SET of a BROKER resource ("" = cluster default): a ConfigRecord per key, changed
        or not. Raises ApiError INVALID_CONFIG for a node-level min.insync.replicas while
        ELR is on."""
        if elr_enabled and resource_name != "" and MIN_ISR in configs:
            raise ApiError(
                "INVALID_CONFIG",
                "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
            )
        return [
            rec.config(rec.RESOURCE_BROKER, resource_name, name, configs[name])
            for name in string_hash_map_order(list(configs))
        ]

    # -- replay ------------------------------------------------------------------------
    def replay(self, record: Record) -> None:
        f = record.fields
        resource = (f["resourceType"], f["resourceName"])
        value = f.get("value")
        values = self.configs.setdefault(resource, {})
        if value is None:
            values.pop(f["name"], None)
        else:
            values[f["name"]] = value
        if not values:
            del self.configs[resource]

    def delete_topic_configs(self, topic: str) -> None:
        self.configs.pop((rec.RESOURCE_TOPIC, topic), None)

    # -- persistence -------------------------------------------------------------------
    def dump(self) -> dict[str, Any]:
        return {
            "configs": [[t, n, dict(values)] for (t, n), values in sorted(self.configs.items())],
            "active_controller": self.active_controller,
        }

    def load(self, data: Mapping[str, Any]) -> None:
        self.configs = {(t, n): dict(values) for t, n, values in data["configs"]}
        self.active_controller = data["active_controller"]
