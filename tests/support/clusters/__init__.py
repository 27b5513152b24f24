"""Real Kafka and ZooKeeper clusters for the tests: session fixtures, and secured or
faulty variants."""
