"""Loading profiles from a large tiers.yaml: every magic call runs load_config(); with the parse
cache (jupyter_tiers/config/cache.py) an unchanged file is parsed once.

A ~1 MB file of slurm profiles is written (its mtime set a minute back, as a file that has not
just been edited), then load_config() is timed with the cache cleared before every call (the
baseline: what each call cost before) and with the cache kept, in the same process, medians of
``--runs``.

Run: .venv/bin/python bench/config_load.py [--profiles 3600] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from jupyter_tiers.config import cache as config_cache
from jupyter_tiers.config.profiles import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", type=int, default=3600)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jt-bench-config-"))
    path = tmp / "tiers.yaml"
    lines = ["profiles:"]
    for i in range(args.profiles):
        lines += [f"  p{i}:", "    tier: slurm", f"    host: login{i}.cluster.example", "    user: alice",
                  "    workdir: ~/jupyter-tiers", "    setup: [\"module load cuda/12.4\"]",
                  "    env: {NCCL_DEBUG: WARN, OMP_NUM_THREADS: '4'}",
                  "    defaults: {partition: gpu, time: '02:00:00', gpus_per_node: 8, launcher: torchrun}"]
    path.write_text("\n".join(lines) + "\n")
    old = time.time() - 60
    os.utime(path, (old, old))
    os.environ["JUPYTER_TIERS_CONFIG"] = str(path)

    def timed(clear: bool) -> float:
        if clear:
            config_cache.clear()
        t0 = time.perf_counter()
        cfg = load_config()
        elapsed = time.perf_counter() - t0
        assert len(cfg.profiles) >= args.profiles
        return elapsed

    uncached, cached = [], []
    timed(False)
    for _ in range(args.runs):
        uncached.append(timed(True))
        timed(False)  # refill
        cached.append(timed(False))
    u, c = statistics.median(uncached), statistics.median(cached)
    print(f"load_config() of a {path.stat().st_size / 1e6:.2f} MB tiers.yaml ({args.profiles} profiles), "
          f"median of {args.runs}:")
    print(f"  parsed every call (cache cleared): {u * 1e3:8.1f} ms")
    print(f"  unchanged file, from the cache:    {c * 1e3:8.1f} ms   ({u / c:.1f}x faster)")


if __name__ == "__main__":
    main()
