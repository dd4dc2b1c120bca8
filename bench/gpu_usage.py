"""Per-rank GPU use on a real GPU machine: what the rank grid shows against nvidia-smi's own
numbers, in the same run.

A 1-node job with one rank per GPU (``--ranks``, default every GPU nvidia-smi lists), each a
CUDA matmul loop on its GPU (torch) for ``--seconds``, run through the local tier (the same rank
shim and sampling as on Slurm) or, with ``--profile NAME``, a Slurm profile (``--gpus-per-node``
set to the rank count). While it runs, every few seconds: each rank's usage as the watcher
delivers it (the grid's numbers: GPU util %, GPU memory MiB, CPU %, RSS) beside nvidia-smi's
``--query-compute-apps`` (memory per process) and ``--query-gpu`` (utilisation per GPU),
queried here. At the end: ``job.usage()`` row counts and the largest difference seen per rank.

On a machine without ``nvidia-smi`` (or without torch with CUDA) it prints why and exits 0:
nothing is measured there. The GPU parsing is unit-tested without a GPU (tests/unit/data/nvidia_smi).

Run: .venv/bin/python bench/gpu_usage.py [--seconds 60] [--ranks N] [--profile NAME]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

BODY = """
import os, time, torch
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
a = torch.randn(4096, 4096, device=dev)
b = torch.randn(4096, 4096, device=dev)
end = time.time() + {seconds}
n = 0
while time.time() < end:
    c = a @ b
    n += 1
    if n % 50 == 0:
        torch.cuda.synchronize(dev)
print("matmuls", n, flush=True)
"""


def skip(reason: str) -> None:
    print(f"gpu_usage: skipped — {reason}")
    sys.exit(0)


def smi(query: str, fields: str) -> list[list[str]]:
    out = subprocess.run(["nvidia-smi", f"--query-{query}={fields}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=30)
    return [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--ranks", type=int, default=0, help="ranks (GPUs) to use; 0: every GPU")
    ap.add_argument("--profile", default="", help="a Slurm profile to run on instead of this machine")
    ap.add_argument("--every", type=float, default=5.0, help="seconds between comparisons")
    args = ap.parse_args()

    if shutil.which("nvidia-smi") is None:
        skip("no nvidia-smi on this machine (a CPU-only machine: the GPU path is unit-tested with "
             "nvidia-smi outputs in tests/unit/data/nvidia_smi)")
    gpus = smi("gpu", "index,uuid,name")
    if not gpus:
        skip("nvidia-smi lists no GPU")
    try:
        import torch
    except ImportError:
        skip("torch is not installed (pip install torch with CUDA)")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    ranks = args.ranks or len(gpus)
    print(f"{len(gpus)} GPU(s): {', '.join(g[2] for g in gpus)}; {ranks} rank(s), {args.seconds} s")

    from jupyter_tiers.config.registry import Registry

    if args.profile:
        from jupyter_tiers.api import connect

        tier = connect(args.profile)
        spec = tier.make_spec(BODY.format(seconds=args.seconds), name="gpu-usage-bench", nodes=1,
                              ntasks_per_node=ranks, gpus_per_node=ranks)
    else:
        from jupyter_tiers.config.profiles import Profile
        from jupyter_tiers.local.tier import LocalTier

        tmp = Path(tempfile.mkdtemp(prefix="jt-gpu-bench-"))
        tier = LocalTier(Profile(name="local", tier="local", settings={"workdir": str(tmp / "jobs")}),
                         Registry(tmp / "registry.sqlite"))
        spec = tier.make_spec(BODY.format(seconds=args.seconds), name="gpu-usage-bench", nodes=1,
                              ntasks_per_node=ranks)
    # A beat every 2 s (default 10 s), as a profile's setup line sets it (JT_* is not --env's);
    # the local tier's ranks take it from this process's environment.
    os.environ.setdefault("JT_HEARTBEAT", "2")
    job = tier.submit(replace(spec, setup=(*spec.setup, "export JT_HEARTBEAT=2")))
    print(f"job {job.id}: {job.record.jobdir}")
    uuid_index = {g[1]: g[0] for g in gpus}
    worst: dict[int, tuple[float, float]] = {}  # rank -> largest |ours - nvidia-smi| (util, MiB)
    try:
        status = job.status()
        while not status.state.terminal:
            time.sleep(args.every)
            status = job.status()
            util = {row[0]: row[1] for row in smi("gpu", "index,utilization.gpu")}
            mem_by_pid = {int(row[0]): (uuid_index.get(row[1], row[1]), row[2])
                          for row in smi("compute-apps", "pid,gpu_uuid,used_memory") if row[0].isdigit()}
            print(f"-- {time.strftime('%H:%M:%S')} {status.state.value}")
            print(f"{'rank':>4} {'ours GPU%':>9} {'smi GPU%':>8} {'ours MiB':>9} {'smi MiB':>8} "
                  f"{'CPU%':>6} {'RSS MiB':>8} gpus")
            for r in status.ranks:
                u = r.usage
                if u is None:
                    print(f"{r.rank:>4} (no sample yet)")
                    continue
                mine = [mem_by_pid[p] for p in u.pids if p in mem_by_pid]
                smi_mem = sum(float(m) for _, m in mine if m.replace(".", "", 1).isdigit())
                smi_util = [float(util[i]) for i in {g for g, _ in mine} if util.get(i, "").isdigit()]
                smi_u = sum(smi_util) / len(smi_util) if smi_util else None
                print(f"{r.rank:>4} {_f(u.gpu_util):>9} {_f(smi_u):>8} {_f(u.gpu_mem_mib):>9} "
                      f"{_f(smi_mem if mine else None):>8} {u.cpu_pct:>6.0f} {u.rss_kib / 1024:>8.0f} "
                      f"{','.join(u.gpus)}")
                if u.gpu_util is not None and smi_u is not None and u.gpu_mem_mib is not None:
                    du, dm = abs(u.gpu_util - smi_u), abs(u.gpu_mem_mib - smi_mem)
                    old = worst.get(r.rank, (0.0, 0.0))
                    worst[r.rank] = (max(old[0], du), max(old[1], dm))
    finally:
        if not job.status().state.terminal:
            job.cancel()
    rows = job.usage()
    count = len(rows)
    print(f"job.usage(): {count} rows")
    for rank, (du, dm) in sorted(worst.items()):
        print(f"rank {rank}: largest difference from nvidia-smi: {du:.0f} % util "
              f"(samples up to one beat apart), {dm:.0f} MiB")
    if not worst:
        print("no rank ever had GPU numbers on both sides: check that nvidia-smi reports the ranks' pids "
              "(a container with its own pid namespace shows other pids)")


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


if __name__ == "__main__":
    main()
