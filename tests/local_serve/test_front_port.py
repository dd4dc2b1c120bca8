"""The front port (router.py) and who may receive its traffic (listeners.py): the kernel's
listening sockets read (sock_diag, /proc/net/tcp{,6}), a bound on concurrent connections, a
thread that cannot start, and a process of another user (``nobody``, started with setpriv; the
tests run as root) that took a replica's port first. Real sockets and processes throughout;
waits are bounded only against hanging."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.local import listeners, router
from jupyter_tiers.local import serve_supervisor as ssv
from jupyter_tiers.local.listeners import Listener, parse_tcp_table, verify_listener
from jupyter_tiers.local.router import FrontPort
from jupyter_tiers.local.serve_tier import LocalServeTier

from .conftest import GUARD, HTTP_BODY, wait_for

SECRET = "Bearer sq-7Hq2SECRET"

TAIL = "00000000:00000000 00:00000000 00000000"  # tx_queue:rx_queue, timer, retransmits
TABLE = f"""\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000002 00:00000000 00000000  1000        0 4242 1 0
   1: 00000000:0016 00000000:0000 0A {TAIL}     0        0 17 1 0 100 0 0 10 0
   2: 0100007F:1F90 0100007F:A2C4 01 {TAIL}  1000        0 4300 1 0 20 4 30 10 -1
"""
ANY6 = "0" * 32
TABLE6 = f"""\
  sl  local_address                         remote_address                        st tx_queue ...
   0: {ANY6}:1F90 {ANY6}:0000 0A {TAIL}    65534        0 999 1 0 100 0 0 10 0
   1: {"0" * 24}01000000:1F91 {ANY6}:0000 0A {TAIL}     0        0 998 1 0 100 0 0 10 0
   2: {"0" * 16}FFFF00000100007F:1F92 {ANY6}:0000 0A {TAIL}     0        0 997 1 0 100 0 0 10 0
"""


# --- the socket tables (pure) -----------------------------------------------------------------
def test_the_tables_give_listeners_with_address_port_uid_inode_and_queue() -> None:
    assert parse_tcp_table(TABLE) == [Listener("127.0.0.1", 8080, 1000, 4242, 2),
                                      Listener("0.0.0.0", 22, 0, 17, 0)]  # not the connection
    assert parse_tcp_table(TABLE6) == [Listener("::", 8080, 65534, 999, 0), Listener("::1", 8081, 0, 998, 0),
                                       Listener("::ffff:127.0.0.1", 8082, 0, 997, 0)]


def test_the_tables_fuzz_never_raise() -> None:
    rng = random.Random(20261203)
    lines = (TABLE + TABLE6).splitlines()
    alphabet = "0123456789ABCDEF:xz -\t\n"
    for _ in range(3000):
        text = "\n".join(rng.choice(lines) for _ in range(rng.randint(0, 5)))
        chars = list(text)
        for _ in range(rng.randint(0, 8)):
            if chars:
                chars[rng.randrange(len(chars))] = rng.choice(alphabet)
        for found in parse_tcp_table("".join(chars)):
            assert 0 <= found.port <= 0xFFFF and found.inode >= 0 and found.uid >= 0


def _diag_msg(family: int, state: int, port: int, addr: str, uid: int, inode: int, queued: int = 0) -> bytes:
    raw = socket.inet_pton(family, addr)
    body = struct.pack("=BBBB2s2s16s16s4x8xIIIII", family, state, 0, 0, port.to_bytes(2, "big"), b"\0\0",
                       raw.ljust(16, b"\0"), b"\0" * 16, 0, queued, 128, uid, inode)
    return struct.pack("=IHHII", 16 + len(body), listeners.SOCK_DIAG_BY_FAMILY, 2, 1, 0) + body


DONE = struct.pack("=IHHII", 20, listeners.NLMSG_DONE, 2, 1, 0) + b"\0" * 4


def test_the_sock_diag_reply_gives_the_listeners_and_says_when_it_is_done() -> None:
    reply = (_diag_msg(socket.AF_INET, 10, 8080, "127.0.0.1", 1000, 4242, 2)
             + _diag_msg(socket.AF_INET6, 10, 8081, "::", 65534, 999)
             + _diag_msg(socket.AF_INET, 1, 8082, "127.0.0.1", 0, 5))  # not listening
    assert listeners.parse_diag_reply(reply) == ([Listener("127.0.0.1", 8080, 1000, 4242, 2),
                                                  Listener("::", 8081, 65534, 999, 0)], False)
    assert listeners.parse_diag_reply(reply + DONE)[1] is True
    request = listeners.diag_request(socket.AF_INET6, 7)
    assert len(request) == 16 + 56 and struct.unpack_from("=IHHII", request) == (72, 20, 0x301, 7, 0)
    error = struct.pack("=IHHIIi", 20, listeners.NLMSG_ERROR, 0, 1, 0, -13)
    with pytest.raises(OSError, match="sock_diag"):
        listeners.parse_diag_reply(error)


def test_the_sock_diag_reply_fuzz_never_raises_but_oserror() -> None:
    rng = random.Random(20261204)
    parts = [_diag_msg(socket.AF_INET, 10, 80, "127.0.0.1", 0, 1),
             _diag_msg(socket.AF_INET6, 10, 81, "::1", 0, 2), DONE,
             struct.pack("=IHHIIi", 20, listeners.NLMSG_ERROR, 0, 1, 0, -1)]
    for _ in range(3000):
        data = bytearray(b"".join(rng.choice(parts) for _ in range(rng.randint(0, 4))))
        for _ in range(rng.randint(0, 6)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        if data and rng.random() < 0.3:
            del data[rng.randrange(len(data)):]
        try:
            found, _done = listeners.parse_diag_reply(bytes(data))
        except OSError:
            continue
        assert all(0 <= f.port <= 0xFFFF and f.inode >= 0 for f in found)


def test_sock_diag_and_the_proc_tables_agree() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert listeners.loopback_listeners(port) == listeners.loopback_listeners(port, listeners.TCP_TABLES)
        assert len(listeners.loopback_listeners(port)) == 1


def test_a_real_listener_is_found_with_our_uid_and_our_socket() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        found = listeners.loopback_listeners(port)
        assert [(f.address, f.port, f.uid) for f in found] == [("127.0.0.1", port, os.geteuid())]
        assert found[0].inode in listeners.socket_inodes([os.getpid()])
        inodes, problem = verify_listener(port, lambda: [os.getpid()])
        assert problem is None and inodes == {found[0].inode}
    assert verify_listener(port, lambda: [os.getpid()]) == (None, f"nothing listens on 127.0.0.1:{port}")


def test_verify_names_a_foreign_owner_and_trusts_known_sockets_without_a_scan() -> None:
    own = [Listener("127.0.0.1", 9, 0, 11, 0)]
    foreign = [Listener("0.0.0.0", 9, 65534, 12, 0)]

    def never() -> list[int]:
        raise AssertionError("known inodes need no scan")

    assert verify_listener(9, never, frozenset({11}), listeners=lambda _p: own) == (frozenset({11}), None)
    inodes, problem = verify_listener(9, lambda: [], frozenset({11}), listeners=lambda _p: own + foreign)
    assert inodes is None and problem is not None and "outside the replica (uid 65534)" in problem


# --- the front port ---------------------------------------------------------------------------
class Backend:
    """A TCP server that answers each connection's first message and holds the connection open
    until the client is done."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.got: list[bytes] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.server.accept()
                with self.lock:
                    self.conns.append(conn)
                threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            data = conn.recv(65536)
            with self.lock:
                self.got.append(data)
            conn.sendall(b"echo " + data)
            while conn.recv(65536):  # held open until the client is done
                pass
            conn.close()

    def close(self) -> None:
        self.server.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture
def backend() -> Iterator[Backend]:
    b = Backend()
    yield b
    b.close()


def ask(port: int, data: bytes) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=GUARD)
    client.sendall(data)
    return client


def closed_on_us(sock: socket.socket) -> bool:
    """Whether the other side closed the connection (a close with our data unread is a reset)
    without sending anything; closes ``sock``."""
    with sock:
        try:
            return sock.recv(100) == b""
        except ConnectionResetError:
            return True


def test_connections_past_the_bound_wait_in_the_accept_queue_until_a_slot_frees(backend: Backend) -> None:
    front = FrontPort(lambda: [backend.port], max_connections=2).start()
    try:
        first, second = ask(front.port, b"one"), ask(front.port, b"two")
        assert {first.recv(100), second.recv(100)} == {b"echo one", b"echo two"}
        third = ask(front.port, b"three")
        # Not accepted by the front port: the kernel holds it in the listener's queue.
        wait_for(lambda: any(f.queued for f in listeners.loopback_listeners(front.port)),
                 "the third connection to wait in the front port's accept queue")
        assert sorted(backend.got) == [b"one", b"two"]
        first.close()  # its relay ends, and with it the slot it held
        assert third.recv(100) == b"echo three"
        for sock in (second, third):
            sock.close()
    finally:
        front.close()


def test_a_thread_that_cannot_start_costs_one_connection_and_is_logged(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    logged: list[str] = []
    failures = [RuntimeError("can't start new thread")]

    def start(thread: threading.Thread) -> None:
        if failures:
            raise failures.pop()
        thread.start()

    front = FrontPort(lambda: [backend.port], max_connections=1, start_thread=start,
                      log=logged.append).start()
    said = (f"front port {front.port}: cannot start a thread for a connection (can't start new thread); "
            "closed it")
    try:
        assert closed_on_us(ask(front.port, b"lost"))  # closed at once, not left hanging
        # The slot of the lost connection was given back (the bound is 1) and the loop goes on.
        kept = ask(front.port, b"kept")
        assert kept.recv(100) == b"echo kept"
        kept.close()
        assert logged == [said]
        # Failing again and again: one line a minute, saying how many it did not log.
        failures[:] = [RuntimeError("can't start new thread")] * 3
        for _ in range(2):
            assert closed_on_us(ask(front.port, b"lost"))
        assert logged == [said]
        monkeypatch.setattr(router, "LOG_EVERY_S", 0.0)
        assert closed_on_us(ask(front.port, b"lost"))
        assert logged == [said, said + " (and 2 more failures since the last such line)"]
    finally:
        front.close()


def test_nothing_is_relayed_to_an_unverified_or_changing_listener(backend: Backend) -> None:
    answers: list[object] = []
    front = FrontPort(lambda: [backend.port], verify=lambda _port: answers.pop(0)).start()
    try:
        for answer in ([None], ["a", "b"]):  # refused; changed while connecting
            answers[:] = answer
            assert closed_on_us(ask(front.port, b"secret"))
        answers[:] = ["a", "a"]
        client = ask(front.port, b"hello")
        assert client.recv(100) == b"echo hello"
        client.close()
        wait_for(lambda: len(backend.got) == 2, "the backend to see both connections end or speak")
        assert sorted(backend.got) == [b"", b"hello"]  # the changed one was connected to, sent nothing
    finally:
        front.close()


# --- another user took the port ---------------------------------------------------------------
SQUATTER = r"""
import socket, sys
server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    data = conn.recv(65536)
    print(repr(data), flush=True)
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
    conn.close()
"""


class Squatter:
    """A process of user ``nobody`` listening on ``port``, printing what each connection sent."""

    def __init__(self, port: int) -> None:
        self.port = port
        setpriv, python = shutil.which("setpriv"), shutil.which("python3", path="/usr/bin:/bin")
        if os.geteuid() != 0 or setpriv is None or python is None:
            pytest.skip("needs root, setpriv and /usr/bin/python3 to run a process as nobody")
        self.proc = subprocess.Popen(
            [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", python, "-c", SQUATTER,
             str(port)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "listening\n"
        self.got: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.got.append(line)

    def saw_only_a_direct_connection(self) -> None:
        """Connect to it directly (it answers), then check that this was all it ever got."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=GUARD) as direct:
            direct.sendall(b"direct")
            assert direct.recv(100).startswith(b"HTTP/1.0 200")
        wait_for(lambda: self.got, "the squatter to print what it got")
        assert self.got == ["b'direct'\n"]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


def test_the_router_never_relays_to_a_port_another_user_holds() -> None:
    """The race the supervisor's readiness check cannot close: the port is a backend (as when a
    replica died a moment ago) but another user's process listens on it now."""
    port = free_port()
    squatter = Squatter(port)
    logged: list[str] = []
    front = FrontPort(lambda: [port], log=logged.append,
                      verify=lambda p: verify_listener(p, lambda: [os.getpid()])[0]).start()
    try:
        assert closed_on_us(ask(front.port, f"GET / HTTP/1.0\r\nAuthorization: {SECRET}\r\n\r\n".encode()))
        squatter.saw_only_a_direct_connection()
    finally:
        front.close()
        squatter.stop()


def test_a_replica_whose_port_another_user_took_is_never_ready_nor_relayed_to(tier: LocalServeTier) -> None:
    # The replica loads for a while before it binds its port (as a model server does): the
    # squatter binds it first and answers every probe with 200.
    body = HTTP_BODY.replace("print(", "import time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\n"
                             "print(", 1)
    svc = tier.apply(tier.make_spec(body, name="squat", readiness="/health"))
    svcdir = Path(svc.record.jobdir)

    def replica() -> dict[str, object] | None:
        reps = (ssv.read_json(svcdir / ssv.STATE_FILE) or {}).get("replicas") or []
        return reps[0] if reps and reps[0].get("pid") else None

    rep = wait_for(replica, "the replica to start")
    squatter = Squatter(int(str(rep["port"])))
    try:
        def refused() -> bool:
            status = svc.status()
            assert status.ready == 0, status  # never ready, at any poll
            pod = status.pods[0] if status.pods else None
            return pod is not None and "outside the replica (uid 65534)" in (pod.message or "")

        wait_for(refused, "the probe to name the process of another user")
        assert svc.status().state is not ServiceState.READY
        front = int(str(svc.url).rsplit(":", 1)[1])
        assert closed_on_us(ask(front, f"GET / HTTP/1.0\r\nAuthorization: {SECRET}\r\n\r\n".encode()))
        # At most a probe that raced the squatter's bind reached it; never the relayed request.
        assert all("kube-probe" in line and "sq-7Hq2SECRET" not in line for line in squatter.got)
    finally:
        squatter.stop()
    (svcdir / "go").touch()  # the squatter is gone: the replica binds its port and serves
    status = svc.wait_ready(GUARD)
    assert status.state is ServiceState.READY, status
    with socket.create_connection(("127.0.0.1", int(str(svc.url).rsplit(":", 1)[1])), timeout=GUARD) as c:
        c.sendall(f"GET / HTTP/1.0\r\nAuthorization: {SECRET}\r\n\r\n".encode())
        assert status.pods[0].name.encode() in b"".join(iter(lambda: c.recv(65536), b""))


def test_a_service_past_its_connection_bound_queues_then_serves(tier: LocalServeTier,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_TIERS_FRONT_MAX_CONNECTIONS", "2")
    svc = tier.apply(tier.make_spec(HTTP_BODY, name="bounded", readiness="/health"))
    status = svc.wait_ready(GUARD)
    assert status.state is ServiceState.READY, status
    front = int(str(svc.url).rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", front), timeout=GUARD) for _ in range(2)]  # both slots
    waiting = ask(front, b"GET / HTTP/1.0\r\n\r\n")
    wait_for(lambda: any(f.queued for f in listeners.loopback_listeners(front)),
             "the third connection to wait in the front port's accept queue")
    idle[0].close()  # a slot frees: the waiting request is relayed and answered
    with waiting:
        assert status.pods[0].name.encode() in b"".join(iter(lambda: waiting.recv(65536), b""))
    idle[1].close()


def test_a_port_forward_relays_only_to_its_supervisors_front_port(tier: LocalServeTier) -> None:
    """The supervisor is gone (killed) and another user took its front port: the port-forward
    relay, still listening in this process, sends it nothing."""
    svc = tier.apply(tier.make_spec(HTTP_BODY, name="fwdsquat", readiness="/"))
    status = svc.wait_ready(GUARD)
    assert status.state is ServiceState.READY, status
    relay = int(svc.port_forward(free_port()).rsplit(":", 1)[1])
    request = f"GET / HTTP/1.0\r\nAuthorization: {SECRET}\r\n\r\n".encode()
    with ask(relay, request) as c:  # relayed while the front port is the supervisor's
        assert status.pods[0].name.encode() in b"".join(iter(lambda: c.recv(65536), b""))
    svcdir = Path(svc.record.jobdir)
    front = int(str(svc.url).rsplit(":", 1)[1])
    os.kill(int((ssv.read_json(svcdir / ssv.STATE_FILE) or {})["pid"]), 9)
    wait_for(lambda: not listeners.loopback_listeners(front), "the dead supervisor's front port to close")
    squatter = Squatter(front)
    try:
        assert closed_on_us(ask(relay, request))
        squatter.saw_only_a_direct_connection()
    finally:
        squatter.stop()


def test_a_server_that_daemonized_is_still_the_replicas_own(tier: LocalServeTier) -> None:
    """The body starts its server in a new session and its parent exits (a daemon): the
    supervisor adopted it, so its socket counts as the replica's."""
    body = ("import os, subprocess, sys, time\n"
            f"open('server.py', 'w').write({HTTP_BODY!r})\n"
            "subprocess.run(['setsid', '-f', sys.executable, 'server.py'], check=True)\n"
            "time.sleep(3600)\n")
    svc = tier.apply(tier.make_spec(body, name="daemon", readiness="/health"))
    status = svc.wait_ready(GUARD)
    assert status.state is ServiceState.READY, status
    with ask(int(str(svc.url).rsplit(":", 1)[1]), b"GET / HTTP/1.0\r\n\r\n") as c:
        assert status.pods[0].name.encode() in b"".join(iter(lambda: c.recv(65536), b""))
