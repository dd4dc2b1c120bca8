"""Checkpoint to object storage: our upload from the cluster side vs boto3's ``upload_file``.

A checkpoint file of ``--mb`` MiB is written into a job's checkpoint directory on the cluster in
a box (this machine), and uploaded to moto's S3 server (started here on loopback) by
(a) ours: ``SlurmTier.upload_checkpoint`` of a COMPLETED job record, i.e. one remote command
over the tier's warm SSH connection running jupyter_tiers/data/s3_upload.py with the job's python on
the login node (sha256 pass, multipart of 16 MiB parts, 8 at a time, state file, manifest);
(b) baseline: boto3's ``upload_file`` (s3transfer: 8 MiB parts, 10 threads) of the same file
from this process. Every upload goes to a fresh moto (its in-memory store slows down as it fills,
which would favour whichever upload runs first); ours and baseline alternate; medians of
``--runs``. moto is the bottleneck on this machine: the ratio says what our wrapping costs (an
SSH round trip, a sha256 pass, the state file), not what S3 would do.

Run: .venv/bin/python bench/checkpoint_upload.py [--mb 1024] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

from _cluster import box_tier

from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.data.handoff import encode_detail

BENCH_DIR = Path("/var/lib/jupyter-tiers-jobs/bench")


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(endpoint + "/", timeout=5).close()
            return proc, endpoint
        except urllib.error.HTTPError:
            return proc, endpoint
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    import boto3

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
    jobdir = BENCH_DIR / f"upload-{os.getpid()}"
    BENCH_DIR.parent.mkdir(mode=0o710, exist_ok=True)
    BENCH_DIR.mkdir(mode=0o700, exist_ok=True)
    ckdir = jobdir / "checkpoints"
    ckdir.mkdir(parents=True)
    ckpt = ckdir / "ckpt-000100.pt"
    block = os.urandom(1 << 20)
    with open(ckpt, "wb") as f:
        for _ in range(args.mb):
            f.write(block)
    size = ckpt.stat().st_size
    tier = box_tier()
    tier.transport.connect()
    times: dict[str, list[float]] = {}

    def ours(endpoint: str, run: int) -> None:
        store = {"endpoint_url": endpoint, "bucket": "bench-ckpt", "credentials": "kernel"}
        tier.profile = replace(tier.profile, settings={**tier.profile.settings, "object_store": store})
        (jobdir / "upload-state.json").unlink(missing_ok=True)
        record = JobRecord(profile="box", tier="slurm", job_id=f"{run}", name="bench", jobdir=str(jobdir),
                           state="COMPLETED", spec={"checkpoint_to": "store", "python": sys.executable},
                           detail=encode_detail(str(ckdir), str(ckpt)))
        tier.registry.add(record)
        report = tier.upload_checkpoint(record)
        assert report.done_uri and report.sent_this_run == size, report

    def baseline(endpoint: str, run: int) -> None:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.upload_file(str(ckpt), "bench-ckpt", f"baseline/{run}/ckpt-000100.pt")

    try:
        for run in range(args.runs):
            order = [("ours", ours), ("boto3 upload_file", baseline)]
            if run % 2:
                order.reverse()
            for name, fn in order:
                # A fresh moto for every upload: its in-memory store slows down as it fills,
                # which would favour whichever upload runs first.
                moto, endpoint = start_moto()
                try:
                    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
                    client.create_bucket(Bucket="bench-ckpt")
                    t0 = time.perf_counter()
                    fn(endpoint, run)
                    times.setdefault(name, []).append(time.perf_counter() - t0)
                    if name == "ours":
                        manifest = json.loads(client.get_object(
                            Bucket="bench-ckpt", Key=f"bench/{run}/.jt-manifest.json")["Body"].read())
                        assert manifest["files"][0]["size"] == size
                finally:
                    moto.terminate()
                    moto.wait()
    finally:
        tier.close()
        shutil.rmtree(jobdir, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nUpload of a {size / 2**20:,.0f} MiB checkpoint to moto on loopback, median of {args.runs}")
    row = "{:<60} {:>8} {:>8}"
    print(row.format("", "s", "MiB/s"))
    for name, label in (("ours", "ours: login-node command over SSH (sha256 + multipart)"),
                        ("boto3 upload_file", "boto3 upload_file from this process")):
        print(row.format(f"  {label}", f"{med[name]:.2f}", f"{size / 2**20 / med[name]:,.0f}"))
    print(f"  ours / upload_file: {med['boto3 upload_file'] / med['ours']:.2f}x speed")


if __name__ == "__main__":
    main()
