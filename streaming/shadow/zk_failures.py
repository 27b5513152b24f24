"""Why a ZooKeeper connection failed, for `kcsim shadow`'s messages.

kazoo's own errors are bare ("Connection time-out", ConnectionLoss) and a refused
authentication ends its connection thread; what it logs on the way says which it was.
Installed for the shadow's run only (a context manager): it also quiets the connection
thread's traceback for a refusal, which the shadow explains once itself.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable

from kazoo.exceptions import AuthFailedError, SessionClosedRequireSaslError

from streaming.clients.zookeeper_config import ZooKeeperClientConfig


class ZooKeeperFailures(logging.Handler):
    """What kazoo logs while the shadow connects, to say why a connection failed: kazoo's
    own error is a bare "Connection time-out" or ConnectionLoss. Warnings still reach
    stderr, one line each (kazoo's messages name the failure, never the config)."""

    def __init__(self, logger_name: str = "kazoo.client") -> None:
        super().__init__(logging.DEBUG)
        self.logger = logging.getLogger(logger_name)
        self.certificate_refused = False
        self.tls_failed = False
        self.sasl_refused = False
        # told when a refusal ends kazoo's connection thread (the shadow then stops waiting)
        self.on_refused: Callable[[], None] | None = None
        self._excepthook = threading.excepthook

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        if "CERTIFICATE_VERIFY_FAILED" in text:
            self.certificate_refused = True
        elif "SSL" in text:
            self.tls_failed = True
        if isinstance(error, SessionClosedRequireSaslError | AuthFailedError):
            self._refused()
        if record.levelno >= logging.WARNING:
            print(f"kazoo: {text}", file=sys.stderr)

    def __enter__(self) -> ZooKeeperFailures:
        self.logger.addHandler(self)
        self._excepthook = threading.excepthook
        threading.excepthook = self._thread_failed
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        threading.excepthook = self._excepthook

    def _thread_failed(self, args: threading.ExceptHookArgs) -> None:
        # kazoo's connection thread ends with the refusal; its traceback says no more
        if isinstance(args.exc_value, SessionClosedRequireSaslError | AuthFailedError):
            self._refused()
        else:
            self._excepthook(args)

    def _refused(self) -> None:
        self.sasl_refused = True
        if self.on_refused is not None:
            self.on_refused()

    def explain(self, zookeeper: str, config: ZooKeeperClientConfig, error: Exception) -> str:
        """Why connecting to (or reading) `zookeeper` failed with `error`."""
        if isinstance(error, SessionClosedRequireSaslError | AuthFailedError) or self.sasl_refused:
            how = (
                "the SASL user and password of --zookeeper-config were refused"
                if "sasl.mechanism" in config.properties
                else "it requires SASL authentication: give sasl.* in --zookeeper-config"
            )
            return f"ZooKeeper {zookeeper} closed the session: {how}"
        if self.certificate_refused:
            return (
                f"the TLS handshake with ZooKeeper {zookeeper} failed: its certificate was not "
                "verified (not signed by the CA of --zookeeper-config's ssl.ca, or not issued "
                "for this host)"
            )
        if self.tls_failed:
            return (
                f"the TLS handshake with ZooKeeper {zookeeper} failed (is its port TLS? "
                "check --zookeeper-config's ssl settings)"
            )
        why = str(error) or type(error).__name__
        return f"cannot reach ZooKeeper {zookeeper}: {why}"
