"""Server side of ``kubernetes.stream.portforward``: the WebSocket ``v4.channel.k8s.io`` protocol.

The API server route hands over the raw HTTP handler of a ``GET .../pods/NAME/portforward?ports=..``
upgrade request (see ``server.PortForwardHandler``).  :func:`make_handler` returns that hook: it
completes the RFC 6455 handshake (picking ``v4.channel.k8s.io`` from the client's offer), then for
the i-th requested port uses data channel ``2i`` and error channel ``2i+1``.  Each channel's first
frame carries the port number (2 bytes, little endian); after that every binary frame starts with
its channel byte.  One TCP connection into the pod's network namespace is opened per port; a port
with no listener gets the kubelet's error text (golden 11) on its error channel.  When every port's
connection is finished the server sends a close frame.

RFC 6455 framing is implemented here with the standard library only: client frames are masked,
fragmented messages are reassembled, pings are answered with pongs, close is echoed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import struct
import threading
import uuid
from collections.abc import Callable
from typing import Any, BinaryIO

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOL = "v4.channel.k8s.io"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for a ``Sec-WebSocket-Key``."""
    return base64.b64encode(hashlib.sha1((key.strip() + _GUID).encode()).digest()).decode()


def encode_frame(opcode: int, payload: bytes, *, mask: bool = False, fin: bool = True) -> bytes:
    """One WebSocket frame (servers send unmasked frames; ``mask`` is for tests acting as client)."""
    head = bytearray([(0x80 if fin else 0) | opcode])
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        head.append(mbit | n)
    elif n < 1 << 16:
        head.append(mbit | 126)
        head += struct.pack("!H", n)
    else:
        head.append(mbit | 127)
        head += struct.pack("!Q", n)
    if mask:
        key = uuid.uuid4().bytes[:4]
        head += key
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bytes(head) + payload


def _read_exact(f: BinaryIO, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def read_frame(f: BinaryIO) -> tuple[bool, int, bytes]:
    """Read one frame: ``(fin, opcode, unmasked payload)``.  Raises EOFError at end of stream."""
    b1, b2 = _read_exact(f, 2)
    fin = bool(b1 & 0x80)
    opcode = b1 & 0x0F
    n = b2 & 0x7F
    if n == 126:
        n = struct.unpack("!H", _read_exact(f, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", _read_exact(f, 8))[0]
    key = _read_exact(f, 4) if b2 & 0x80 else b""
    payload = _read_exact(f, n)
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return fin, opcode, payload


def read_message(f: BinaryIO, on_control: Callable[[int, bytes], None]) -> tuple[int, bytes]:
    """Read one (possibly fragmented) data message; control frames in between go to ``on_control``.

    Returns ``(opcode, payload)``; a close frame is returned as ``(OP_CLOSE, payload)``."""
    parts: list[bytes] = []
    first_op: int | None = None
    while True:
        fin, op, payload = read_frame(f)
        if op >= 0x8:
            if op == OP_CLOSE:
                return OP_CLOSE, payload
            on_control(op, payload)
            continue
        if op != OP_CONT:
            first_op = op
            parts = [payload]
        else:
            parts.append(payload)
        if fin:
            return first_op if first_op is not None else OP_BINARY, b"".join(parts)


class _Session:
    """One port-forward WebSocket connection."""

    def __init__(self, handler: Any, kubelet: Any, namespace: str, pod: str, ports: list[int]) -> None:
        self.h = handler
        self.kubelet = kubelet
        self.namespace = namespace
        self.pod = pod
        self.ports = ports
        self.wlock = threading.Lock()
        self.conns: dict[int, socket.socket | None] = {}
        self.finished: set[int] = set()
        self.all_done = threading.Event()
        self.closed = threading.Event()

    def send(self, opcode: int, payload: bytes) -> None:
        with self.wlock:
            if self.closed.is_set() and opcode != OP_CLOSE:
                return
            with contextlib.suppress(OSError):
                self.h.wfile.write(encode_frame(opcode, payload))
                self.h.wfile.flush()

    def handshake(self) -> bool:
        key = self.h.headers.get("Sec-WebSocket-Key")
        if not key:
            body = (
                b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"Upgrade request required","reason":"BadRequest","code":400}'
            )
            self.h.send_response(400)
            self.h.send_header("Content-Type", "application/json")
            self.h.send_header("Content-Length", str(len(body)))
            self.h.end_headers()
            self.h.wfile.write(body)
            return False
        offered = [p.strip() for p in (self.h.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
        lines = [
            "HTTP/1.1 101 Switching Protocols",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Accept: {accept_key(key)}",
        ]
        if PROTOCOL in offered:
            lines.append(f"Sec-WebSocket-Protocol: {PROTOCOL}")
        self.h.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.h.wfile.flush()
        return True

    def error_text(self, port: int, netns_id: str) -> str:
        ns_path = f"/var/run/netns/cni-{uuid.UUID(hashlib.md5(netns_id.encode()).hexdigest())}"
        return (
            f"error forwarding port {port} to pod {netns_id}, uid : failed to execute portforward in network "
            f'namespace "{ns_path}": failed to connect to localhost:{port} inside namespace "{netns_id}", '
            f"IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused IPv6 dial tcp6: address "
            "localhost: no suitable address found "
        )

    def port_done(self, idx: int) -> None:
        with self.wlock:
            self.finished.add(idx)
            if len(self.finished) == len(self.ports):
                self.all_done.set()

    def pump(self, idx: int, conn: socket.socket) -> None:
        """Pod -> client for port ``idx``."""
        channel = bytes([2 * idx])
        try:
            while not self.closed.is_set():
                try:
                    data = conn.recv(65536)
                except OSError:
                    break
                if not data:
                    break
                self.send(OP_BINARY, channel + data)
        finally:
            self.port_done(idx)

    def run(self) -> None:
        if not self.handshake():
            return
        try:
            netns_pid, sandbox_id = self.kubelet.pod_network(self.namespace, self.pod)
        except Exception:
            netns_pid, sandbox_id = None, ""
        for i, port in enumerate(self.ports):
            lohi = bytes([port & 0xFF, (port >> 8) & 0xFF])
            self.send(OP_BINARY, bytes([2 * i]) + lohi)
            self.send(OP_BINARY, bytes([2 * i + 1]) + lohi)
        for i, port in enumerate(self.ports):
            try:
                conn = _connect(netns_pid, port)
            except OSError:
                self.conns[i] = None
                self.send(OP_BINARY, bytes([2 * i + 1]) + self.error_text(port, sandbox_id).encode())
                self.port_done(i)
                continue
            self.conns[i] = conn
            threading.Thread(
                target=self.pump, args=(i, conn), daemon=True, name=f"pf-{self.pod}-{port}"
            ).start()
        closer = threading.Thread(target=self._close_when_done, daemon=True)
        closer.start()
        try:
            self._client_loop()
        finally:
            self.closed.set()
            self.all_done.set()
            for c in self.conns.values():
                if c is not None:
                    with contextlib.suppress(OSError):
                        c.close()

    def _close_when_done(self) -> None:
        self.all_done.wait()
        if self.closed.is_set():
            return
        # Give the client's proxy a moment to hand the last bytes to the application first.
        if self.closed.wait(0.3):
            return  # the client closed meanwhile
        # ValueError: the client loop's finally may close the stream between the check and here.
        with contextlib.suppress(OSError, ValueError):
            self.send(OP_CLOSE, struct.pack("!H", 1000))
        self.closed.set()
        with contextlib.suppress(OSError):
            self.h.connection.shutdown(socket.SHUT_WR)

    def _client_loop(self) -> None:
        def on_control(op: int, payload: bytes) -> None:
            if op == OP_PING:
                self.send(OP_PONG, payload)

        while True:
            try:
                op, payload = read_message(self.h.rfile, on_control)
            except (EOFError, OSError, ValueError):
                return
            if op == OP_CLOSE:
                if not self.closed.is_set():
                    self.send(OP_CLOSE, payload[:2] or struct.pack("!H", 1000))
                return
            if not payload:
                continue
            channel, data = payload[0], payload[1:]
            idx, is_error = divmod(channel, 2)
            if is_error or idx >= len(self.ports):
                continue
            conn = self.conns.get(idx)
            if conn is None or not data:
                continue
            try:
                conn.sendall(data)
            except OSError:
                continue


def _connect(netns_pid: int | None, port: int) -> socket.socket:
    from .kubelet import connect_in_netns

    s = connect_in_netns(netns_pid, "127.0.0.1", port, 5.0)
    s.settimeout(None)
    return s


def make_handler(kubelet: Any) -> Callable[[Any, str, str, list[int]], None]:
    """The ``portforward_handler`` hook for ``server.ApiServer``: serves one upgraded connection."""

    def handle(http_handler: Any, namespace: str, pod: str, ports: list[int]) -> None:
        _Session(http_handler, kubelet, namespace, pod, ports).run()

    return handle
