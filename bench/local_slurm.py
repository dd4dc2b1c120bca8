"""The on-cluster path (a slurm profile without host: LocalTransport, no SSH) against raw Slurm
on the same machine, in one run: the submit round trip and log throughput, with ratios.

Submit: ours is the whole ``SlurmTier.submit`` a notebook cell makes (render, the job directory
written, one ``sbatch`` in it: slurm/submit_here.py; parse, registry write); raw is
``sbatch --parsable`` of the same script already on disk (a subprocess, as a user's ``!sbatch``).
Submits alternate ours, raw, ours, ... so a busy machine slows both alike; medians of
``--count`` each. Every job is held (``--hold``) and cancelled at the end: nothing runs.

Also the bare round trip of one command (``true``) through LocalTransport vs ``subprocess.run``.

Log: a ``--mb`` MB log of 100-byte lines, read from the start as a followed log: ours is
``SlurmTier.open_log`` (on this machine plain ``tail -F``, slurm/follow_local.py, read by
LocalStream), raw is ``tail -c +1 -F`` on a pipe. Each is timed from its start to
its last byte (stopping the command comes after, for both); best of ``--rounds``. Ratios are
ours / raw speed (1.0 = as fast; the goal is >= 0.95).

Run: .venv/bin/python bench/local_slurm.py [--count 20] [--mb 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _cluster import cluster_env, slurm

BODY = "print('hello from the on-cluster bench')\n"


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def local_tier(env: dict[str, str]):  # -> SlurmTier
    from jupyter_tiers.config.profiles import merge_layers, validate_profile
    from jupyter_tiers.config.registry import Registry
    from jupyter_tiers.slurm.tier import SlurmTier
    from jupyter_tiers.transport.local import LocalTransport

    raw = {"tier": "slurm", "workdir": "/var/lib/jupyter-tiers-jobs/bench-local",
           "defaults": {"time": "00:30:00"}}
    cfg = merge_layers([("bench", {"profiles": {"cluster": validate_profile("cluster", raw, "bench")}})])
    tmp = tempfile.mkdtemp(prefix="jt-bench-")
    transport = LocalTransport(environ={**os.environ, "SLURM_CONF": env["SLURM_CONF"]})
    return SlurmTier(cfg.profile("cluster"), Registry(Path(tmp) / "registry.sqlite"), transport=transport)


def bench_submit(tier, env: dict[str, str], count: int) -> tuple[float, float]:
    spec = tier.make_spec(BODY, name="local-submit-bench", sbatch_options=["--hold"])
    first = tier.submit(spec)
    script = f"{first.record.jobdir}/job.sbatch"
    ids = [first.id]
    raw_env = {**os.environ, "SLURM_CONF": env["SLURM_CONF"]}

    def raw_submit() -> str:
        return subprocess.run(["sbatch", "--parsable", "--hold", script], check=True, env=raw_env,
                              capture_output=True, text=True, cwd=first.record.jobdir).stdout.strip()

    ids.append(raw_submit())  # warm both
    ours, raw = [], []
    try:
        for _ in range(count):
            t0 = time.perf_counter()
            ids.append(tier.submit(spec).id)
            ours.append(ms(t0))
            t0 = time.perf_counter()
            ids.append(raw_submit())
            raw.append(ms(t0))
    finally:
        for i in range(0, len(ids), 50):
            slurm("scancel", *[j.split(";")[0] for j in ids[i:i + 50]])
    return statistics.median(ours), statistics.median(raw)


def bench_transport(tier, count: int) -> tuple[float, float]:
    """The bare round trip of one command: LocalTransport.run(["true"]) vs subprocess.run."""
    ours, raw = [], []
    for _ in range(count):
        t0 = time.perf_counter()
        tier.transport.run(["true"])
        ours.append(ms(t0))
        t0 = time.perf_counter()
        subprocess.run(["true"], check=True)
        raw.append(ms(t0))
    return statistics.median(ours), statistics.median(raw)


def bench_log(tier, mb: int, rounds: int) -> tuple[float, float]:
    from jupyter_tiers.batch.jobdir import LOG_NAME
    from jupyter_tiers.config.registry import JobRecord

    jobdir = Path(tempfile.mkdtemp(prefix="jt-bench-log-"))
    line = b"0: " + b"x" * 96 + b"\n"
    with open(jobdir / LOG_NAME, "wb") as f:
        block = line * 10_000
        for _ in range(mb * 1_000_000 // len(block)):
            f.write(block)
    size = (jobdir / LOG_NAME).stat().st_size
    record = JobRecord(profile="cluster", tier="slurm", job_id="1", name="log-bench", jobdir=str(jobdir))

    def ours() -> float:  # to the last byte, as raw's (closing the stream is after, as raw's kill)
        t0 = time.perf_counter()
        got = 0
        elapsed = 0.0
        stream = tier.open_log(record, 0)
        with stream:
            for chunk in stream:
                got += len(chunk)
                if got >= size:
                    elapsed = time.perf_counter() - t0
                    break
        return elapsed

    def raw() -> float:
        t0 = time.perf_counter()
        p = subprocess.Popen(["tail", "-c", "+1", "-F", "-s", "1", str(jobdir / LOG_NAME)],
                             stdout=subprocess.PIPE)
        assert p.stdout is not None
        got = 0
        while got < size:
            got += len(os.read(p.stdout.fileno(), 65536))
        elapsed = time.perf_counter() - t0
        p.kill()
        p.wait()
        return elapsed

    ours_s, raw_s = [], []
    for _ in range(rounds):
        ours_s.append(ours())
        raw_s.append(raw())
    (jobdir / LOG_NAME).unlink()
    return size / min(ours_s) / 1e6, size / min(raw_s) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    env = cluster_env()
    tier = local_tier(env)
    try:
        ours_ms, raw_ms = bench_submit(tier, env, args.count)
        bare_ms, sub_ms = bench_transport(tier, args.count)
        ours_mbs, raw_mbs = bench_log(tier, args.mb, args.rounds)
    finally:
        tier.close()
    load = os.getloadavg()[0]
    print(f"on-cluster path (LocalTransport) vs raw Slurm on this machine; load {load:.1f}, "
          f"{os.cpu_count()} CPUs")
    print(f"submit round trip (median of {args.count}): ours {ours_ms:.0f} ms, raw sbatch "
          f"{raw_ms:.0f} ms: {raw_ms / ours_ms:.2f}x raw speed")
    print(f"  of which one command's round trip: LocalTransport {bare_ms:.1f} ms, subprocess.run "
          f"{sub_ms:.1f} ms: {sub_ms / bare_ms:.2f}x raw speed (the rest: the job directory "
          "written and the registry entry)")
    print(f"log throughput ({args.mb} MB, best of {args.rounds}): ours {ours_mbs:.0f} MB/s, "
          f"raw tail -F {raw_mbs:.0f} MB/s: {ours_mbs / raw_mbs:.2f}x raw speed")


if __name__ == "__main__":
    sys.exit(main())
