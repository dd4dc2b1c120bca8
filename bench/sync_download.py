"""--sync round trips and bytes, and job.download of a 1 GiB file, on the cluster in a box.

(a) --sync of a 1,000-file project (about 220 kB of Python) to the cluster over the real SSH
transport, counted where the transport sends (round trips, stdin bytes): the first sync, an
unchanged one, one changed file. (b) ``Job.download`` of a ``--mb`` MiB file (default 1024) from
a job directory over the same transport, against raw ``ssh cat`` over a warm OpenSSH
ControlMaster, and against the same download on a connection negotiating paramiko's own first
choice (aes128-ctr with hmac-sha2-256, what every connection used before AES-GCM was asked for
first), in ``--reps`` interleaved rounds so that a loaded machine slows all three alike; the
peak resident memory growth during a download is printed (the download is streamed: it stays
small whatever the file's size).

Run: .venv/bin/python bench/sync_download.py [--mb 1024] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _cluster import box_tier, cluster_env

from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.data.sync import build_manifest
from jupyter_tiers.engine.handles import Job
from jupyter_tiers.slurm.sync_remote import sync_to_cluster

BENCH_DIR = Path("/var/lib/jupyter-tiers-jobs/bench")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_sync(tier: Any) -> None:
    project = Path(tempfile.mkdtemp(prefix="jt-bench-sync-"))
    for i in range(1000):
        f = project / f"pkg{i % 10}" / f"m{i}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"VALUE = {i}\n" + "# padding\n" * 20)
    sent: list[int] = []
    real = tier.transport.run

    def run(argv: Any, **kw: Any) -> Any:
        sent.append(len(kw.get("stdin") or b""))
        return real(argv, **kw)

    tier.transport.run = run
    name = f"bench-{secrets.token_hex(3)}"
    print(f"--sync of 1,000 files ({sum(p.stat().st_size for p in project.rglob('*.py')):,} bytes):")
    try:
        for label in ("first sync", "unchanged", "one file changed"):
            if label == "one file changed":
                (project / "pkg3/m13.py").write_text("VALUE = 'changed'\n")
            sent.clear()
            t0 = time.perf_counter()
            manifest, sources = build_manifest(project)
            out = sync_to_cluster(tier.transport, tier.profile.workdir, name, manifest, sources)
            dt = time.perf_counter() - t0
            print(f"  {label:<16} {len(sent)} round trip(s), {sum(sent):>9,} bytes sent "
                  f"({len(out.sent_files)} files), {dt * 1e3:.0f} ms")
    finally:
        tier.transport.run = real
        shutil.rmtree(project, ignore_errors=True)
        tier.transport.run(["rm", "-rf", "--", f"{tier.profile.workdir}/.sync/{name}"], check=False)


def ctr_tier() -> Any:
    """A tier whose connection negotiates paramiko's own first choice, aes128-ctr with
    hmac-sha2-256 (what every connection used before AES-GCM was asked for first)."""
    from jupyter_tiers.transport import connection

    tier = box_tier()
    real = connection.prefer_aead_ciphers
    connection.prefer_aead_ciphers = lambda t: None
    try:
        tier.transport.run(["true"])
    finally:
        connection.prefer_aead_ciphers = real
    return tier


def bench_download(tier: Any, mib: int, reps: int) -> None:
    env = cluster_env()
    jobdir = BENCH_DIR / f"download-{os.getpid()}"
    BENCH_DIR.parent.mkdir(mode=0o710, exist_ok=True)
    BENCH_DIR.mkdir(mode=0o700, exist_ok=True)
    jobdir.mkdir()
    big = jobdir / "big.bin"
    with open(big, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(mib):
            f.write(block)
    size = big.stat().st_size
    record = JobRecord(profile="box", tier="slurm", job_id="1", name="dl", jobdir=str(jobdir), world_size=1)
    old = ctr_tier()
    jobs = {"job.download (AES-GCM)": Job(tier, record),
            "job.download (aes128-ctr, before)": Job(old, record)}
    dest = Path(tempfile.mkdtemp(prefix="jt-bench-dl-"))
    control = Path(tempfile.mkdtemp(prefix="jt-bench-cm-")) / "cm"
    ssh = ["ssh", "-i", env["JT_SSH_KEY"], "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
           "-o", "BatchMode=yes", "-o", "ControlMaster=auto", "-o", f"ControlPath={control}",
           "-o", "ControlPersist=600", "-p", env["JT_SSH_PORT"], f"{env['JT_SSH_USER']}@{env['JT_SSH_HOST']}"]
    subprocess.run([*ssh, "true"], check=True)
    times: dict[str, list[float]] = {name: [] for name in (*jobs, "ssh cat")}
    growth = 0.0
    print(f"job.download of {size / 2**20:,.0f} MiB, {reps} interleaved rounds (wall time each):")
    try:
        for job in jobs.values():
            job.files()  # warm connections
        for _ in range(reps):
            for name, job in jobs.items():
                before = peak_mib()
                t0 = time.perf_counter()
                got = job.download("big.bin", dest=str(dest))
                times[name].append(time.perf_counter() - t0)
                growth = max(growth, peak_mib() - before)
                assert got[0].stat().st_size == size
                got[0].unlink()
            t0 = time.perf_counter()
            with open(dest / "raw.bin", "wb") as out:
                subprocess.run([*ssh, "cat", str(big)], stdout=out, check=True)
            times["ssh cat"].append(time.perf_counter() - t0)
            print("  " + ", ".join(f"{n} {t[-1]:.1f} s" for n, t in times.items()), flush=True)
    finally:
        subprocess.run([*ssh, "-O", "exit"], capture_output=True)
        old.close()
        shutil.rmtree(jobdir, ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
    raw = sum(times["ssh cat"])
    for name, t in times.items():
        total = sum(t)
        print(f"{name:<34} {total / reps:5.1f} s ({size / 2**20 * reps / total:4.0f} MiB/s)"
              + ("" if name == "ssh cat" else f", {raw / total:.2f}x ssh cat's speed"))
    print(f"peak RSS growth during a download {growth:.1f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3, help="interleaved rounds of the download race")
    args = ap.parse_args()
    tier = box_tier()
    try:
        bench_sync(tier)
        bench_download(tier, args.mb, args.reps)
    finally:
        tier.close()


if __name__ == "__main__":
    main()
