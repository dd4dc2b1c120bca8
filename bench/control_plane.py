"""Control-plane load of watching 1, 10 and 50 running jobs, against a naive per-job squeue loop.

For each job count the same running jobs are watched for ``--seconds`` (default 60) twice:
by jupyter-tiers' Watcher (one batched query per cluster), then by a naive loop that runs
``squeue -j ID`` over SSH for every job every ``--naive-interval`` seconds (default 15, the
Watcher's steady-state interval, so the ratio isolates batching). slurmctld's RPCs are counted
with ``sdiag`` (reset before each window) and slurmdbd's with ``sacctmgr show stats``.
It also measures how soon a rank's exit shows in the Watcher (target <= 2 s), which comes from
the job's own files over the existing connection, not from the scheduler.

Run: .venv/bin/python bench/control_plane.py [--seconds 60] [--counts 1,10,50]
"""

from __future__ import annotations

import argparse
import re
import threading
import time

from _cluster import box_tier, cluster, cluster_env, slurm

from jupyter_tiers.core.model import JobState, JobStatus, RankPhase

# RPCs a status query causes (squeue sends FED_INFO + JOB_INFO[_SINGLE]; scontrol JOB_INFO).
QUERY_RPCS = ("REQUEST_JOB_INFO", "REQUEST_JOB_INFO_SINGLE", "REQUEST_FED_INFO",
              "REQUEST_JOB_USER_INFO", "REQUEST_PARTITION_INFO", "REQUEST_NODE_INFO")


def sdiag_counts() -> dict[str, int]:
    out = slurm("sdiag")
    counts: dict[str, int] = {}
    section = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    for line in section.splitlines():
        m = re.match(r"\s*(\w+)\s*\(\s*\d+\)\s*count:(\d+)", line)
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def dbd_queries() -> int:
    out = slurm("sacctmgr", "show", "stats")
    total = 0
    for line in out.splitlines():
        m = re.match(r"\s*(DBD_GET_JOBS_COND|DBD_GET_JOBS)\s*\(\s*\d+\)\s*count:(\d+)", line)
        if m:
            total += int(m.group(2))
    return total


def query_rpcs(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(after.get(k, 0) - before.get(k, 0) for k in QUERY_RPCS)


def window(seconds: float, run) -> tuple[int, int]:
    slurm("sdiag", "-r")
    before, dbd_before = sdiag_counts(), dbd_queries()
    run(seconds)
    after, dbd_after = sdiag_counts(), dbd_queries()
    return query_rpcs(before, after), dbd_after - dbd_before


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--counts", default="1,10,50")
    ap.add_argument("--naive-interval", type=float, default=15.0)
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    env = cluster_env()
    # 50 one-CPU jobs need 50 CPUs: reshape the box to 4 x 16 for the run, then restore it.
    cluster("up", "--nodes", "4", "--cpus", "16")
    tier = box_tier()
    rows = []
    try:
        for n in counts:
            jobs = [tier.submit(tier.make_spec("import time\ntime.sleep(1500)\n", name=f"load{i}"))
                    for i in range(n)]
            deadline = time.monotonic() + 120
            while True:
                states = tier.status([j.record for j in jobs])
                if all(s.state is JobState.RUNNING for s in states.values()):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"only some of {n} jobs started: {[s.state for s in states.values()]}")
                time.sleep(1)

            def ours(seconds: float) -> None:
                time.sleep(seconds)  # the watcher is already watching every job

            def naive(seconds: float, jobs: list = jobs) -> None:
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    tick = time.monotonic()
                    for j in jobs:
                        tier.transport.run(["squeue", "-h", "-j", j.id, "-o", "%T"], check=False)
                    time.sleep(max(0.0, args.naive_interval - (time.monotonic() - tick)))

            # Watch every job; let the watcher reach steady state (past its fast first polls).
            subs = [tier.watcher.watch(j.record, follow_logs=False) for j in jobs]
            time.sleep(40)
            queries_before = tier.watcher.scheduler_queries
            ours_rpc, ours_dbd = window(args.seconds, ours)
            ours_queries = tier.watcher.scheduler_queries - queries_before
            for s in subs:
                tier.watcher.unwatch(s)
            naive_rpc, naive_dbd = window(args.seconds, naive)
            for j in jobs:
                j.cancel()
            per_min = 60.0 / args.seconds
            rows.append((n, ours_queries * per_min, ours_rpc * per_min, naive_rpc * per_min,
                         ours_dbd * per_min, naive_dbd * per_min))
        latency = rank_latency(tier)
    finally:
        for rec in tier.registry.list(limit=1000):
            tier.cancel(rec)
        tier.close()
        cluster("up", "--nodes", env["JT_CLUSTER_NODES"], "--cpus", env["JT_CLUSTER_CPUS"])

    print(f"\nslurmctld status RPCs per minute ({', '.join(QUERY_RPCS[:3])}, ...), "
          f"window {args.seconds:.0f}s, naive loop every {args.naive_interval:.0f}s")
    print(f"{'jobs':>5} {'our queries':>12} {'our RPCs':>9} {'naive RPCs':>11} {'naive/ours':>11} "
          f"{'slurmdbd ours':>14} {'slurmdbd naive':>15}")
    for n, q, o, nv, od, nd in rows:
        ratio = nv / o if o else float("inf")
        print(f"{n:>5} {q:>12.1f} {o:>9.1f} {nv:>11.1f} {ratio:>10.1f}x {od:>14.1f} {nd:>15.1f}")
    print("(one squeue costs slurmctld 2-3 RPCs: JOB_INFO or JOB_INFO_SINGLE,"
          " plus FED_INFO and/or PARTITION_INFO)")
    print(f"\nrank exit -> watcher status: median {latency[0]:.2f}s, max {latency[1]:.2f}s "
          f"over {latency[2]} ranks (target <= 2 s)")


def rank_latency(tier) -> tuple[float, float, int]:
    """Ranks exit at staggered times; how long until the watcher reports each exit."""
    body = "import os, time\ntime.sleep(3 + int(os.environ['RANK']) * 1.3)\n"
    job = tier.submit(tier.make_spec(body, name="latency", ntasks_per_node=8))
    seen: dict[int, float] = {}
    done = threading.Event()
    final: list[JobStatus] = []

    def on_status(st: JobStatus) -> None:
        now = time.time()
        for r in st.ranks:
            if r.phase is RankPhase.EXITED and r.rank not in seen:
                seen[r.rank] = now

    def on_end(st: JobStatus) -> None:
        final.append(st)
        done.set()

    sub = tier.watcher.watch(job.record, on_status=on_status, on_end=on_end, follow_logs=False)
    done.wait(180)
    tier.watcher.unwatch(sub)
    delays = sorted(seen[r.rank] - r.ended_at for r in final[0].ranks
                    if r.rank in seen and r.ended_at)
    return delays[len(delays) // 2], delays[-1], len(delays)


if __name__ == "__main__":
    main()
