"""Scheduler load of watching a job array of 1, 10 and 100 tasks, against asking per task.

For each size a held array (every task stays PENDING in squeue, so each tick sees the same
thing) is watched for ``--ticks`` watcher ticks (default 5) by jupyter-tiers (one ``squeue -r``
for every task of the array, plus one read of the rank files), then by a naive loop that runs
``squeue -j ID_i`` over SSH once per task per tick. Per tick it prints the commands run over
SSH, slurmctld's query RPCs (``sdiag``, reset before each window) and the wall time, and the
ratio naive / batched for RPCs, measured in the same process.

Run: .venv/bin/python bench/array_poll.py [--ticks 5] [--sizes 1,10,100]
"""

from __future__ import annotations

import argparse
import time

from _cluster import box_tier, slurm
from control_plane import query_rpcs, sdiag_counts

from jupyter_tiers.slurm import commands


def measure(tier, tick, ticks: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """(commands, query RPCs, seconds) per tick."""
    count = [0]
    real = tier.transport.run

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        count[0] += 1
        return real(*args, **kwargs)

    tier.transport.run = counting
    slurm("sdiag", "-r")
    before = sdiag_counts()
    start = time.perf_counter()
    try:
        for _ in range(ticks):
            tick()
    finally:
        tier.transport.run = real
    seconds = time.perf_counter() - start
    return count[0] / ticks, query_rpcs(before, sdiag_counts()) / ticks, seconds / ticks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--sizes", default="1,10,100")
    args = parser.parse_args()
    tier = box_tier()
    print(f"{'tasks':>6} {'how':>8} {'cmds/tick':>10} {'RPCs/tick':>10} {'s/tick':>8}")
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            job = tier.submit(tier.make_spec("print(1)", name=f"bench-array-{size}",
                                             array=f"0-{size - 1}", sbatch_options=("--hold",)))
            records = job.task_records()  # type: ignore[attr-defined]

            def batched(records=records) -> None:  # type: ignore[no-untyped-def]
                tier.poll_scheduler(records)
                tier.poll_ranks(records)

            def naive(records=records) -> None:  # type: ignore[no-untyped-def]
                for rec in records:
                    tier.transport.run(commands.squeue_argv([rec.job_id]), check=False)

            b = measure(tier, batched, args.ticks)
            n = measure(tier, naive, args.ticks)
            print(f"{size:>6} {'batched':>8} {b[0]:>10.1f} {b[1]:>10.1f} {b[2]:>8.3f}")
            print(f"{size:>6} {'naive':>8} {n[0]:>10.1f} {n[1]:>10.1f} {n[2]:>8.3f}"
                  f"   naive/batched RPCs: {n[1] / max(b[1], 1e-9):.1f}x")
            job.cancel()
    finally:
        tier.close()


if __name__ == "__main__":
    main()
