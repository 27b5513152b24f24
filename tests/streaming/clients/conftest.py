"""The TLS broker fixture the security tests share (tests/support/clusters/tls_kafka.py)."""

from tests.support.clusters.tls_kafka import tls_kafka  # noqa: F401
