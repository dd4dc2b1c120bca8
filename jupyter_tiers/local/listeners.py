"""Who listens on a loopback port: the kernel's listening sockets (from sock_diag netlink, or the
``/proc/net/tcp{,6}`` tables), each read by a pure parser, and a listener's socket matched to the
open files of a process tree.

A local service's replica is told a free port; any local user can read that port (``/proc``)
and bind it first. So the serving supervisor and its front port (router.py) use
:func:`verify_listener`: every socket that would accept a connection to ``127.0.0.1:PORT`` must be
open in the replica's own processes, or the replica is not ready and nothing is relayed to it.
Linux only (like the rest of the local tier's process handling).
"""

from __future__ import annotations

import os
import re
import socket
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN = "0A"  # the kernel's TCP_LISTEN state in those tables
# Local addresses of a listener that takes connections to 127.0.0.1 (IPv4 and a dual-stack or
# v4-mapped IPv6 socket). A v6-only "::" listener does not, but the tables cannot tell it apart:
# counting it errs on the side of relaying nothing.
LOOPBACK_ACCEPTING = frozenset({"127.0.0.1", "0.0.0.0", "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0"})


@dataclass(frozen=True)
class Listener:
    """One listening TCP socket of the kernel's table."""

    address: str
    port: int
    uid: int
    inode: int
    queued: int  # connections accepted by the kernel, not yet by the program (rx_queue)


def _address(hexaddr: str) -> str:
    raw = bytes.fromhex(hexaddr)
    # The kernel prints each 32-bit word of the address in the machine's own byte order.
    words = b"".join(struct.pack("=I", int.from_bytes(raw[i:i + 4], "big")) for i in range(0, len(raw), 4))
    if len(words) == 4:
        return socket.inet_ntop(socket.AF_INET, words)
    if len(words) == 16:
        return socket.inet_ntop(socket.AF_INET6, words)
    raise ValueError(f"not an address: {hexaddr!r}")


_ENTRY_RE = re.compile(
    r"^\s*\d+:\s+(?P<addr>[0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):(?P<port>[0-9A-Fa-f]{4})\s+\S+\s+"
    + LISTEN + r"\s+[0-9A-Fa-f]{8}:(?P<rxq>[0-9A-Fa-f]{8})\s+\S+\s+\S+\s+(?P<uid>\d+)\s+\d+\s+"
    r"(?P<inode>\d+)(?:\s|$)")


def parse_tcp_table(text: str) -> list[Listener]:
    """The listening sockets of a ``/proc/net/tcp`` or ``/proc/net/tcp6`` table (pure). The
    header and any line that is not a well-formed entry are skipped."""
    found: list[Listener] = []
    for line in text.splitlines():
        m = _ENTRY_RE.match(line)
        if m is None:
            continue
        found.append(Listener(_address(m["addr"]), int(m["port"], 16), int(m["uid"]), int(m["inode"]),
                              int(m["rxq"], 16)))
    return found


NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
TCP_LISTEN = 10
_NLMSG = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
_DIAG_REQ = struct.Struct("=BBBBI48x")  # inet_diag_req_v2: family, protocol, ext, pad, states; the sockid
# inet_diag_msg: family, state, timer, retrans, sockid (ports, addresses, if, cookie), expires,
# rqueue (a listener's accept queue), wqueue, uid, inode
_DIAG_MSG = struct.Struct("=BBBB2s2s16s16s4x8xIIIII")


def diag_request(family: int, seq: int = 1) -> bytes:
    """A sock_diag dump request for the listening TCP sockets of ``family`` (AF_INET/AF_INET6)."""
    body = _DIAG_REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN)
    head = _NLMSG.pack(_NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0)
    return head + body


def parse_diag_reply(data: bytes) -> tuple[list[Listener], bool]:
    """The listening sockets in a chunk of a sock_diag dump's reply (pure), and whether the dump
    is done (its NLMSG_DONE seen). A message too short for what it says it is ends the chunk;
    an error message raises OSError."""
    found: list[Listener] = []
    pos = 0
    while pos + _NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, pos)
        if length < _NLMSG.size or pos + length > len(data):
            break
        if kind == NLMSG_DONE:
            return found, True
        if kind == NLMSG_ERROR:
            errno = -int.from_bytes(data[pos + 16:pos + 20], "little", signed=True) if length >= 20 else 0
            raise OSError(errno, "sock_diag dump refused")
        if kind == SOCK_DIAG_BY_FAMILY and length >= _NLMSG.size + _DIAG_MSG.size:
            family, state, _t, _r, sport, _dport, src, _dst, _exp, queued, _backlog, uid, inode = \
                _DIAG_MSG.unpack_from(data, pos + _NLMSG.size)
            if state == TCP_LISTEN and family in (socket.AF_INET, socket.AF_INET6):
                addr = socket.inet_ntop(family, src[:4] if family == socket.AF_INET else src)
                found.append(Listener(addr, int.from_bytes(sport, "big"), uid, inode, queued))
        pos += (length + 3) & ~3  # messages are 4-byte aligned
    return found, False


def _diag_listeners() -> list[Listener]:
    """Every listening TCP socket, from the kernel's sock_diag: asked for listeners only, it
    walks only the listening sockets (reading /proc/net/tcp walks every connection: tens of ms
    on a busy machine)."""
    found: list[Listener] = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5.0)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), 1):
            nl.sendall(diag_request(family, seq))
            while True:
                part, done = parse_diag_reply(nl.recv(1 << 16))
                found += part
                if done:
                    break
    return found


def _table_listeners(tables: Iterable[str]) -> list[Listener]:
    found: list[Listener] = []
    for path in tables:
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                found += parse_tcp_table(f.read())
        except FileNotFoundError:  # no IPv6 on this machine
            continue
    return found


def loopback_listeners(port: int, tables: Iterable[str] | None = None) -> list[Listener]:
    """Every listening socket that would accept a connection to ``127.0.0.1:port``: from
    sock_diag, or from the ``tables`` (``/proc/net/tcp{,6}``) where netlink is not there or
    when they are given."""
    try:
        every = _table_listeners(tables) if tables is not None else _diag_listeners()
    except OSError:
        every = _table_listeners(TCP_TABLES)
    return [entry for entry in every if entry.port == port and entry.address in LOOPBACK_ACCEPTING]


def socket_inodes(pids: Iterable[int]) -> set[int]:
    """The inodes of the sockets the processes ``pids`` have open (those that can be read)."""
    inodes: set[int] = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:  # ended, or not ours
            continue
        for name in names:
            try:
                target = os.readlink(f"{fd_dir}/{name}")
            except OSError:
                continue
            if target.startswith("socket:[") and target.endswith("]"):
                inodes.add(int(target[8:-1]))
    return inodes


def nothing_listens(port: int) -> str:
    """:func:`verify_listener`'s answer when no socket listens on the port."""
    return f"nothing listens on 127.0.0.1:{port}"


def verify_listener(port: int, tree: Callable[[], Iterable[int]], known: frozenset[int] = frozenset(),
                    *, listeners: Callable[[int], list[Listener]] = loopback_listeners,
                    ) -> tuple[frozenset[int] | None, str | None]:
    """Check that every socket listening for ``127.0.0.1:port`` belongs to the processes
    ``tree()`` returns. Returns ``(inodes, None)`` when they do (``known``, inodes verified
    before, spares reading the processes' open files), else ``(None, why)``.

    Two calls that return the same inodes bracket a time in which those sockets, and no other,
    listened: a connection made between them reached one of them.
    """
    found = listeners(port)
    if not found:
        return None, nothing_listens(port)
    inodes = frozenset(entry.inode for entry in found)
    if inodes <= known:
        return inodes, None
    mine = socket_inodes(tree()) | known
    foreign = [entry for entry in found if entry.inode not in mine]
    if foreign:
        uids = ", ".join(sorted({str(entry.uid) for entry in foreign}))
        return None, (f"127.0.0.1:{port} is held by a process outside the replica (uid {uids}): "
                      "not relaying to it")
    return inodes, None
