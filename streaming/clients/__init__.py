"""Client configuration for Kafka and ZooKeeper, as their own tools take it.

`kafka_config`: a Kafka client properties file (`--kafka-config`: security protocol,
SASL, TLS) as kafka-python arguments; `zookeeper_config`: the shadow's ZooKeeper client
settings (`--zookeeper-config`: digest, SASL, TLS) as kazoo arguments; `message_size`:
the largest message a topic takes, asked of the cluster.

May import: `controller` (settings parsing) and the client libraries. Never another
`streaming` subpackage: every command that talks to Kafka or ZooKeeper builds on these.
"""
