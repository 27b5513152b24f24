"""The TLS broker fixture the security tests share (tests/support/tls_kafka.py)."""

from tests.support.tls_kafka import tls_kafka  # noqa: F401
