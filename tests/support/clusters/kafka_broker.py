"""pytest fixture: one real Apache Kafka broker (KRaft) for the whole test session.

tests/conftest.py imports `kafka_bootstrap` from here. The broker runs from the jars
in .kafka/libs (scripts/install.sh fetches them) with its data in a temp dir. Set
KCSIM_KAFKA_BOOTSTRAP=HOST:PORT to use a broker that is already running instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from kafka.admin import ConfigResource, KafkaAdminClient, NewTopic

from streaming.local_clusters import kafka_local


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("KCSIM_KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    data_dir = tmp_path_factory.mktemp("kafka")
    bootstrap = kafka_local.start(data_dir)
    try:
        yield bootstrap
    finally:
        kafka_local.stop(data_dir)


def create_topic(bootstrap: str, prefix: str, partitions: int = 1, **configs: str) -> str:
    """A new topic named `prefix-<random>` with these topic configs; its name."""
    topic = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    finally:
        admin.close()
    return topic


def alter_configs(bootstrap: str, resources: list[ConfigResource]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_configs(resources)
    finally:
        admin.close()
