"""The largest message a Kafka topic takes, asked of the cluster: the request sink and
the shadow's Kafka output both split or refuse what would not fit.
"""

from __future__ import annotations

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from streaming.clients.kafka_config import KafkaClientConfig


def topic_max_message_bytes(
    bootstrap: str, topic: str, client: KafkaClientConfig | None = None
) -> int | None:
    """The topic's `max.message.bytes` (its own or the broker's default), None when the
    topic does not exist yet."""
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="kcsim-sink-limits",
        **(client or KafkaClientConfig()).kafka_python(),
    )
    try:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": None})
        found = admin.describe_configs([resource], config_filter="all")
    finally:
        admin.close()
    entry = found.get("topic", {}).get(topic, {}).get("max.message.bytes")
    return None if entry is None else int(entry["value"])


def broker_message_max_bytes(bootstrap: str, client: KafkaClientConfig | None = None) -> int:
    """The brokers' `message.max.bytes` (the least, should they differ): the
    `max.message.bytes` of a topic created with the brokers' defaults."""
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="kcsim-sink-limits",
        **(client or KafkaClientConfig()).kafka_python(),
    )
    try:
        brokers = [str(b["broker_id"]) for b in admin.describe_cluster()["brokers"]]
        resources = [
            ConfigResource(ConfigResourceType.BROKER, b, {"message.max.bytes": None})
            for b in brokers
        ]
        found = admin.describe_configs(resources, config_filter="all")
    finally:
        admin.close()
    described = found.get("broker", {})
    return min(int(described[b]["message.max.bytes"]["value"]) for b in brokers)
