"""The KRaft engine's scenarios and its differential oracle (Kafka 4.1.1's own control managers)."""
