"""Who listens on a loopback port: the kernel's socket tables (``/proc/net/tcp``, ``tcp6``) read
by a pure parser, and a listener's socket matched to the open files of a process tree.

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


def loopback_listeners(port: int, tables: Iterable[str] = TCP_TABLES) -> list[Listener]:
    """Every listening socket that would accept a connection to ``127.0.0.1:port``."""
    found: list[Listener] = []
    for path in tables:
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                text = f.read()
        except FileNotFoundError:  # no IPv6 on this machine
            continue
        found += [entry for entry in parse_tcp_table(text)
                  if entry.port == port and entry.address in LOOPBACK_ACCEPTING]
    return found


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
        return None, f"nothing listens on 127.0.0.1:{port}"
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
