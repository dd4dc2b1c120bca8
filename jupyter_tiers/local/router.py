"""The front port of a local service: one loopback TCP port relayed, connection by connection, to
the ready replicas in turn (round-robin), like a Kubernetes Service in front of its pods.

A connection that arrives while no replica is ready is closed at once (a Service without
endpoints refuses connections too).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

from ..transport.relay import relay
from .roundrobin import RoundRobin

HOST = "127.0.0.1"
CONNECT_TIMEOUT = 5.0


class FrontPort:
    """A listening socket on ``127.0.0.1:port`` (0: any free port) relaying each connection to
    one backend from ``choose`` (a list of ports to try in order)."""

    def __init__(self, choose: Callable[[], list[int]], port: int = 0, *, fallback: bool = False) -> None:
        self._choose = choose
        try:
            self._server = socket.create_server((HOST, port))
        except OSError:
            if not fallback or port == 0:
                raise
            self._server = socket.create_server((HOST, 0))  # taken: any free port instead
        self.port: int = self._server.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"jt-front-{self.port}", daemon=True)

    @classmethod
    def round_robin(cls, balancer: RoundRobin, port: int = 0, *, fallback: bool = False) -> FrontPort:
        return cls(balancer.order, port, fallback=fallback)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> FrontPort:
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        for port in self._choose():
            try:
                upstream = socket.create_connection((HOST, port), timeout=CONNECT_TIMEOUT)
            except OSError:
                continue  # that replica went away just now: try the next one
            upstream.settimeout(None)
            relay(conn, upstream)
            return
        with contextlib.suppress(OSError):
            conn.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):  # wakes the accept() of the other thread
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()

