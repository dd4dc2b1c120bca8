"""Decoding one very long log line: LogDecoder fed 8, 16 and 32 MiB lines in 32 KiB chunks (as
the SSH stream delivers them), against a baseline run in the same process: joining the same
chunks once and decoding the result (the least any decoder must do). Linear cost shows as a
constant ratio and a constant time per MiB; the old decoder's re-copy of the held bytes on every
chunk made it quadratic (issue 9: 0.24 / 1.02 / 4.29 s). Medians of ``--runs``.

The pod log path beside it: Kubernetes pod logs and watches are split into lines by
``k8s.watch.split_chunks``, timed on the same long lines and on a log of short lines read in big
chunks (a pod log read from the start), against joining, decoding and splitting the whole stream
at once (the least a line splitter must do) and against the splitter it replaced (it re-copied
the held bytes on every chunk and split once per line; run once).

Run: .venv/bin/python bench/long_line.py [--sizes 8,16,32] [--runs 3] [--no-old]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable, Iterator

from jupyter_tiers.batch.logs import LogDecoder
from jupyter_tiers.k8s.watch import split_chunks

CHUNK = 32 * 1024


def ours(chunks: list[bytes]) -> int:
    dec = LogDecoder()
    n = 0
    for chunk in chunks:
        for line in dec.feed(chunk):
            n += len(line.text)
    return n


def baseline(chunks: list[bytes]) -> int:
    return len(b"".join(chunks).decode("utf-8", errors="replace")) - 4  # minus "3: " and "\n"


def old_split(chunks: Iterable[bytes]) -> Iterator[str]:
    """The pod log splitter before issue 9 (kept here only to measure against)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode("utf-8", errors="replace")
    if pending:
        yield pending.decode("utf-8", errors="replace")


def pod_lines(split: Callable[[Iterable[bytes]], Iterator[str]], chunks: list[bytes]) -> int:
    return sum(len(line) + 1 for line in split(chunks))


def pod_log(args: argparse.Namespace) -> None:
    """split_chunks on the long lines and on short lines in 1 MiB chunks."""
    print(f"\npod log lines (k8s.watch.split_chunks), median of {args.runs}; old splitter run once")
    print(f"{'case':>22} {'split_chunks (s)':>17} {'join+decode+split':>18} {'ratio':>7} "
          f"{'old (s)':>9} {'old/new':>8}")
    cases = []
    for mib in (int(s) for s in args.sizes.split(",")):
        data = b"x" * ((mib << 20) - 1) + b"\n"
        cases.append((f"1 line of {mib} MiB", data, CHUNK))
    short = b"".join(b"2026-12-02T10:00:00.%09dZ step %d loss=0.25\n" % (i, i) for i in range(200000))
    cases.append((f"{len(short) >> 20} MiB short, 1 MiB ch", short, 1 << 20))
    for name, data, size in cases:
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        t_new, t_base = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            n = pod_lines(split_chunks, chunks)
            t_new.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            b = sum(len(t) + 1 for t in b"".join(chunks).decode("utf-8", errors="replace").split("\n")) - 1
            t_base.append(time.perf_counter() - t0)
            assert n == b, (n, b)
        o, r = statistics.median(t_new), statistics.median(t_base)
        old = ""
        if not args.no_old:
            t0 = time.perf_counter()
            assert pod_lines(old_split, chunks) == n
            t_old = time.perf_counter() - t0
            old = f"{t_old:>9.3f} {t_old / o:>7.0f}x"
        print(f"{name:>22} {o:>17.3f} {r:>18.3f} {o / r:>6.1f}x {old}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,16,32")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-old", action="store_true", help="skip the quadratic pod log splitter")
    args = ap.parse_args()
    print(f"one line of N MiB in {CHUNK // 1024} KiB chunks, median of {args.runs}")
    print(f"{'MiB':>5} {'LogDecoder (s)':>15} {'join+decode (s)':>16} {'ratio':>7} {'ours ms/MiB':>12}")
    for mib in (int(s) for s in args.sizes.split(",")):
        data = b"3: " + b"x" * ((mib << 20) - 4) + b"\n"
        chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
        t_ours, t_base = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            n = ours(chunks)
            t_ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            b = baseline(chunks)
            t_base.append(time.perf_counter() - t0)
            assert n == b, (n, b)
        o, r = statistics.median(t_ours), statistics.median(t_base)
        print(f"{mib:>5} {o:>15.3f} {r:>16.3f} {o / r:>6.1f}x {o * 1e3 / mib:>12.1f}")
    pod_log(args)


if __name__ == "__main__":
    main()
