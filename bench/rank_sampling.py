"""What the rank shim's per-beat resource sampling costs, on a machine that holds many processes.

``--ranks`` idle ranks run through the real rank shim (batch/jobdir.RANK_SHIM) with a 1 s beat
for ``--beats`` beats, beside ``--fillers`` sleeping processes (a busy node, or the local tier
running a 1024-rank job on one machine). Three runs in this process: sampling off
(``JT_USAGE=0``, the baseline: heartbeat only), the tree walked down /proc/PID/task/*/children
(the default), and the whole-/proc scan kept for kernels without those files. Each prints the CPU
seconds its shims used (getrusage of the waited-for children) per rank and beat, and its ratio
to the baseline.

Run: .venv/bin/python bench/rank_sampling.py [--ranks 64] [--fillers 1000] [--beats 8]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jupyter_tiers.batch.jobdir import RANK_SHIM  # noqa: E402


def children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run(ranks: int, beats: int, **env_extra: str) -> tuple[float, int]:
    """CPU seconds used by ``ranks`` shims over ``beats`` beats, and the samples they wrote."""
    with tempfile.TemporaryDirectory(prefix="jt-sampling-") as tmp:
        jobdir = Path(tmp)
        (jobdir / "ranks").mkdir()
        (jobdir / "rank.sh").write_text(RANK_SHIM, encoding="utf-8")
        before = children_cpu()
        procs = []
        for rank in range(ranks):
            env = {"PATH": os.environ["PATH"], "HOME": tmp, "JT_JOB_DIR": tmp, "JT_HEARTBEAT": "1",
                   "RANK": str(rank), "SLURMD_NODENAME": "node0", **env_extra}
            argv = ["bash", str(jobdir / "rank.sh"), "sleep", str(beats + 0.5)]
            procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for proc in procs:
            proc.wait()
        used = children_cpu() - before
        usage = jobdir / "usage"
        samples = sum(len(f.read_text().splitlines()) for f in usage.iterdir()) if usage.exists() else 0
    return used, samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--fillers", type=int, default=1000)
    parser.add_argument("--beats", type=int, default=8)
    args = parser.parse_args()
    fillers = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.fillers)]
    try:
        procs = sum(1 for p in os.listdir("/proc") if p.isdigit())
        print(f"rank_sampling: {args.ranks} ranks x {args.beats} beats of 1 s beside {procs} processes "
              f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.2f})")
        base, _ = run(args.ranks, args.beats, JT_USAGE="0")
        per = args.ranks * args.beats
        print("| run | CPU s | ms per rank-beat | samples | vs heartbeat only |\n|---|---|---|---|---|")
        print(f"| heartbeat only (JT_USAGE=0) | {base:.2f} | {1000 * base / per:.1f} | 0 | 1.00x |")
        for name, walk in (("walk /proc/PID/task/*/children", "children"), ("scan all of /proc", "scan")):
            used, samples = run(args.ranks, args.beats, JT_USAGE_WALK=walk)
            print(f"| {name} | {used:.2f} | {1000 * used / per:.1f} | {samples} | {used / base:.2f}x |")
    finally:
        for f in fillers:
            f.kill()
        for f in fillers:
            f.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
