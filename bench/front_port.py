"""What the local front port's ownership check costs (issue 20 item 6): sequential short
connections (connect, send a byte, read it back) through a FrontPort to an echo backend, with no
check (the baseline, run in the same process), with the check reading the listening sockets from
sock_diag netlink (what the supervisor uses), and with the check reading /proc/net/tcp{,6} (the
fallback; its cost grows with every connection on the machine). Medians of ``--runs`` rounds of
``--connections`` each, in microseconds per connection, and the ratio to the baseline.

Run: .venv/bin/python bench/front_port.py [--connections 300] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable

from jupyter_tiers.local import listeners
from jupyter_tiers.local.router import FrontPort


def echo_backend() -> int:
    server = socket.create_server(("127.0.0.1", 0))

    def answer(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.sendall(conn.recv(100))

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return int(server.getsockname()[1])


def checker(tables: tuple[str, ...] | None) -> Callable[[int], frozenset[int] | None]:
    known: list[frozenset[int]] = [frozenset()]

    def verify(port: int) -> frozenset[int] | None:
        inodes, _ = listeners.verify_listener(
            port, lambda: [os.getpid()], known[0],
            listeners=lambda p: listeners.loopback_listeners(p, tables))
        if inodes is not None:
            known[0] = inodes
        return inodes

    return verify


def per_connection_us(front: FrontPort, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        with socket.create_connection(("127.0.0.1", front.port)) as conn:
            conn.sendall(b"x")
            conn.recv(10)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    backend = echo_backend()
    fronts = {
        "no check (baseline)": FrontPort(lambda: [backend]).start(),
        "check via sock_diag": FrontPort(lambda: [backend], verify=checker(None)).start(),
        "check via /proc/net/tcp": FrontPort(lambda: [backend], verify=checker(listeners.TCP_TABLES)).start(),
    }
    results: dict[str, list[float]] = {name: [] for name in fronts}
    for _ in range(args.runs):
        for name, front in fronts.items():
            results[name].append(per_connection_us(front, args.connections))
    with open("/proc/net/tcp") as f:
        sockets = sum(1 for _ in f) - 1
    base = statistics.median(results["no check (baseline)"])
    print(f"{args.connections} connections x {args.runs} runs; {sockets} IPv4 sockets on the machine")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"  {name:26s} {med:8.0f} us per connection  ({med / base:.2f}x)")


if __name__ == "__main__":
    main()
