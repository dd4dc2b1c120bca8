"""The front port of a local service: one loopback TCP port relayed, connection by connection, to
the ready replicas in turn (round-robin), like a Kubernetes Service in front of its pods.

A connection that arrives while no replica is ready is closed at once (a Service without
endpoints refuses connections too). With ``verify``, a backend is relayed to only when the sockets
listening on its port are the same verified ones just before and just after the connection is
made (listeners.py): a process of another user that took a replica's port gets nothing.

At most ``max_connections`` connections are relayed at once. Past that the front port stops
accepting until one ends, so new connections wait in the kernel's accept queue: the relay is
plain TCP (HTTP, gRPC, websockets, anything), so it cannot answer a protocol's "busy" (an HTTP
503 would corrupt every other protocol), and a waiting client is served as soon as a slot frees.
A thread that cannot be started (the process is out of threads or memory) costs that one
connection, which is closed and logged (a repeating failure once a minute, with a count); the
front port goes on accepting.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from ..transport.relay import relay
from .roundrobin import RoundRobin

HOST = "127.0.0.1"
CONNECT_TIMEOUT = 5.0
MAX_CONNECTIONS = 256
ACCEPT_PAUSE_S = 0.05  # after an accept or thread start failed: not a busy loop (EMFILE)
LOG_EVERY_S = 60.0  # a failure that repeats is logged once a minute, with how many were not


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # a supervisor's stderr is its supervisor.log


class FrontPort:
    """A listening socket on ``127.0.0.1:port`` (0: any free port) relaying each connection to
    one backend from ``choose`` (a list of ports to try in order).

    ``verify(port)`` (optional) returns a token for the sockets listening on a backend's port
    when they are the backend's own, else None; ``start_thread`` starts a connection's thread
    (tests make it fail); ``log`` takes what goes wrong.
    """

    def __init__(self, choose: Callable[[], list[int]], port: int = 0, *, fallback: bool = False,
                 verify: Callable[[int], Hashable | None] | None = None,
                 max_connections: int = MAX_CONNECTIONS,
                 start_thread: Callable[[threading.Thread], None] = threading.Thread.start,
                 log: Callable[[str], None] = _log) -> None:
        self._choose = choose
        self._verify = verify
        self._start_thread = start_thread
        self._log = log
        self.max_connections = max(1, max_connections)
        self._slots = threading.BoundedSemaphore(self.max_connections)
        try:
            self._server = socket.create_server((HOST, port))
        except OSError:
            if not fallback or port == 0:
                raise
            self._server = socket.create_server((HOST, 0))  # taken: any free port instead
        self.port: int = self._server.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"jt-front-{self.port}", daemon=True)
        self._complained = float("-inf")
        self._quiet = 0
        self._complain_lock = threading.Lock()

    @classmethod
    def round_robin(cls, balancer: RoundRobin, port: int = 0, *, fallback: bool = False,
                    **kwargs: Any) -> FrontPort:
        return cls(balancer.order, port, fallback=fallback, **kwargs)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> FrontPort:
        self._thread.start()
        return self

    def _complain(self, message: str) -> None:
        with self._complain_lock:
            now = time.monotonic()
            if now - self._complained < LOG_EVERY_S:
                self._quiet += 1
                return
            if self._quiet:
                message += f" (and {self._quiet} more failures since the last such line)"
            self._complained, self._quiet = now, 0
        with contextlib.suppress(Exception):  # a full disk must not end the accept loop either
            self._log(message)

    def _accept(self) -> None:
        while not self._closed.is_set():
            # A slot first: past the bound, connections wait in the kernel's accept queue.
            if not self._slots.acquire(timeout=0.5):
                continue
            try:
                conn, _ = self._server.accept()
            except OSError as exc:
                self._slots.release()
                if self._closed.is_set():
                    return
                self._complain(f"front port {self.port}: accept failed: {exc}")
                self._closed.wait(ACCEPT_PAUSE_S)
                continue
            try:
                self._start_thread(threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                                    name=f"jt-front-{self.port}-conn"))
            except Exception as exc:  # RuntimeError: can't start new thread
                self._complain(f"front port {self.port}: cannot start a thread for a connection ({exc}); "
                               "closed it")
                with contextlib.suppress(OSError):
                    conn.close()
                self._slots.release()
                self._closed.wait(ACCEPT_PAUSE_S)

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._relay_to_backend(conn)
        except Exception as exc:  # a failed relay thread start: that connection only
            self._complain(f"front port {self.port}: connection dropped: {exc}")
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            self._slots.release()

    def _relay_to_backend(self, conn: socket.socket) -> None:
        for port in self._choose():
            before = self._verify(port) if self._verify is not None else True
            if before is None:
                continue  # not the replica's socket (or none): never relay to it
            try:
                upstream = socket.create_connection((HOST, port), timeout=CONNECT_TIMEOUT)
            except OSError:
                continue  # that replica went away just now: try the next one
            if self._verify is not None and self._verify(port) != before:
                upstream.close()  # the listener changed while connecting: not verified
                continue
            upstream.settimeout(None)
            relay(conn, upstream)
            return

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):  # wakes the accept() of the other thread
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
