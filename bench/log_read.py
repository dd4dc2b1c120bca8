"""Reading a 1 GB finished log: ``%tiers logs ID --tail 100`` and the full read, against raw ssh.

A log of ``--mb`` MiB (1024: 1 GiB) of 77-byte rank-prefixed lines is written into a job
directory on the cluster in a box (this machine), then read over the same sshd by
(a) ours: ``Job.logs(tail=100)`` (what ``%tiers logs ID --tail 100`` prints) and
``Job.iter_logs()`` (what ``%tiers logs ID`` prints, piece by piece, decoded to text), and
``Job.logs()`` (the whole log as one string), through a warm SlurmTier connection;
(b) raw: ``ssh host tail -n 100 FILE`` and ``ssh host cat FILE`` (bytes counted, not decoded)
over a warm OpenSSH ControlMaster. Ours and raw alternate; medians of ``--runs``. The peak
resident memory this process reached is printed after the streamed reads and again after
``Job.logs()``, which has to hold the whole text.

Run: .venv/bin/python bench/log_read.py [--mb 1024] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _cluster import box_tier, cluster_env

from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.engine.handles import Job

BENCH_DIR = Path("/var/lib/jupyter-tiers-jobs/bench")


def write_log(path: Path, mib: int) -> tuple[int, int]:
    """``mib`` MiB of lines like the shim writes; returns (bytes, lines)."""
    block = "".join(f"{i % 8}: step {i:07d} loss 0.{i * 7919 % 10**6:06d} lr 3.0e-04 "
                    f"tokens/s 81234 {'x' * 16}\n" for i in range(8192)).encode()
    target = mib << 20
    written = lines = 0
    with open(path, "wb") as f:
        while written < target:
            f.write(block)
            written += len(block)
            lines += 8192
    return written, lines


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    env = cluster_env()
    jobdir = BENCH_DIR / f"log-read-{os.getpid()}"
    shutil.rmtree(jobdir, ignore_errors=True)
    BENCH_DIR.parent.mkdir(mode=0o710, exist_ok=True)  # root's own (0710 as a job workdir), not in /var/tmp
    BENCH_DIR.mkdir(mode=0o700, exist_ok=True)
    jobdir.mkdir()
    log = jobdir / "job.log"
    size, nlines = write_log(log, args.mb)
    tier = box_tier()
    tier.transport.connect()
    job = Job(tier, JobRecord(profile="box", tier="slurm", job_id="1", name="log-read",
                              jobdir=str(jobdir), world_size=8))
    control = Path(tempfile.mkdtemp(prefix="jt-bench-cm-")) / "cm"
    ssh = ["ssh", "-i", env["JT_SSH_KEY"], "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
           "-o", "BatchMode=yes", "-o", "ControlMaster=auto", "-o", f"ControlPath={control}",
           "-o", "ControlPersist=600", "-p", env["JT_SSH_PORT"],
           f"{env['JT_SSH_USER']}@{env['JT_SSH_HOST']}"]
    subprocess.run([*ssh, "true"], check=True)

    def raw_cat() -> int:
        proc = subprocess.Popen([*ssh, "cat", str(log)], stdout=subprocess.PIPE, bufsize=0)
        assert proc.stdout is not None
        n = 0
        while data := os.read(proc.stdout.fileno(), 1 << 20):
            n += len(data)
        proc.wait()
        return n

    def ours_stream() -> int:
        return sum(len(piece) for piece in job.iter_logs())  # characters (ASCII: = bytes)

    def ours_bytes() -> int:
        return sum(len(chunk) for chunk in tier.log_chunks(job.record))

    times: dict[str, list[float]] = {}

    def timed(name: str, fn) -> object:
        t0 = time.perf_counter()
        out = fn()
        times.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    try:
        for run in range(args.runs):
            tail_ours = timed("tail ours", lambda: job.logs(tail=100))
            tail_raw = timed("tail raw", lambda: subprocess.run([*ssh, "tail", "-n", "100", str(log)],
                                                                check=True, capture_output=True).stdout)
            assert tail_ours == tail_raw.decode(), "--tail 100 differs from raw tail"
            order = [("full raw", raw_cat), ("full ours", ours_stream), ("full ours, bytes", ours_bytes)]
            if run % 2:
                order.reverse()
            for name, fn in order:
                n = timed(name, fn)
                assert n == size, f"{name}: {n} of {size} bytes"
        streamed_peak = peak_mib()
        whole = timed("whole string ours", job.logs)
        assert len(whole) == size
        del whole
        whole_peak = peak_mib()
    finally:
        subprocess.run([*ssh, "-O", "exit"], capture_output=True)
        tier.close()
        shutil.rmtree(jobdir, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nA finished log of {size / 2**20:,.0f} MiB ({nlines:,} lines of {size / nlines:.0f} B) over ssh "
          f"to {env['JT_SSH_HOST']}:{env['JT_SSH_PORT']}, warm connections, median of {args.runs}")
    row = "{:<52} {:>10} {:>10} {:>9}"
    print(row.format("", "ours", "raw ssh", "ours/raw"))
    print(row.format("  --tail 100 (ms): Job.logs(tail=100) | tail -n 100", f"{med['tail ours'] * 1e3:.0f}",
                     f"{med['tail raw'] * 1e3:.0f}", f"{med['tail raw'] / med['tail ours']:.2f}x speed"))
    for name, label in (("full ours", "full read, decoded text (s): Job.iter_logs() | cat"),
                        ("full ours, bytes", "full read, bytes only (s): log_chunks | cat")):
        print(row.format(f"  {label}", f"{med[name]:.2f}", f"{med['full raw']:.2f}",
                         f"{med['full raw'] / med[name]:.2f}x speed"))
    print(row.format("  full read, MiB/s (decoded text)", f"{size / 2**20 / med['full ours']:,.0f}",
                     f"{size / 2**20 / med['full raw']:,.0f}", ""))
    print(row.format("  full read, lines/s (decoded text)", f"{nlines / med['full ours'] / 1e6:.2f}M",
                     f"{nlines / med['full raw'] / 1e6:.2f}M", ""))
    print(row.format("  Job.logs(), the whole log as one string (s)",
                     f"{med['whole string ours']:.2f}", "", ""))
    print(f"  peak memory of this process: {streamed_peak:,.0f} MiB after the streamed reads, "
          f"{whole_peak:,.0f} MiB after Job.logs()")


if __name__ == "__main__":
    main()
