"""A TCP relay between a ZooKeeper client and the real server, for network faults in tests.

`ZkRelay` listens on a free 127.0.0.1 port and copies bytes both ways to ZooKeeper.
`cut()` drops every relayed connection and refuses new ones (accepted and closed at
once), as a network partition does; `restore()` lets clients through again. It also
reads each connection's first answer from the server, ZooKeeper's ConnectResponse, for
the session it names (`session()`: id and password), so that a test can end that session
on the server (`expire_session`) while the client cannot reach it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

from kazoo.client import KazooClient

from tests.support.clusters.zk_cluster import wait_for

Session = tuple[int, bytes]


class ZkRelay:
    def __init__(self, zookeeper: str) -> None:
        host, port = zookeeper.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._cut = False
        self._session: Session | None = None
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> ZkRelay:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.listener.close()  # ends the accept loop
        self._drop()
        self._thread.join(timeout=5)

    def session(self) -> Session:
        """The session the server last granted through the relay."""
        wait_for(lambda: self._session is not None, "a session through the relay")
        assert self._session is not None
        return self._session

    def cut(self) -> None:
        with self._lock:
            self._cut = True
        self._drop()

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def _drop(self) -> None:
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed by the other side
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # the listener was closed
            with self._lock:
                refused = self._cut
            if refused:
                client.close()
                continue
            server = socket.create_connection(self.target)
            with self._lock:
                self._open += [client, server]
            threading.Thread(target=self._copy, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._copy, args=(server, client, True), daemon=True).start()

    def _copy(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        first = from_server
        try:
            while data := source.recv(65536):
                if first:
                    self._read_session(data)
                    first = False
                sink.sendall(data)
        except OSError:
            pass  # cut, or closed by an end
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _read_session(self, data: bytes) -> None:
        # ConnectResponse: frame length, protocolVersion, timeOut, sessionId, passwd (length
        # and bytes); the first frame a server sends on a connection
        if len(data) < 24:
            return
        _, _, _, session_id, length = struct.unpack(">iiiqi", data[:24])
        password = data[24 : 24 + length]
        if session_id and len(password) == length:
            self._session = (session_id, password)


def expire_session(zookeeper: str, session: Session) -> None:
    """End `session` on the server: attach to it from another client and close it (what
    ZooKeeper does itself once a client has been silent for its session timeout)."""
    other = KazooClient(hosts=zookeeper, client_id=session)
    other.start(timeout=15)
    other.stop()
    other.close()
