"""Decoding one very long log line: LogDecoder fed 8, 16 and 32 MiB lines in 32 KiB chunks (as
the SSH stream delivers them), against a baseline run in the same process: joining the same
chunks once and decoding the result (the least any decoder must do). Linear cost shows as a
constant ratio and a constant time per MiB; the old decoder's re-copy of the held bytes on every
chunk made it quadratic (issue 9: 0.24 / 1.02 / 4.29 s). Medians of ``--runs``.

Run: .venv/bin/python bench/long_line.py [--sizes 8,16,32] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from jupyter_tiers.logs import LogDecoder

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,16,32")
    ap.add_argument("--runs", type=int, default=3)
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


if __name__ == "__main__":
    main()
