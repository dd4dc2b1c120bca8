"""Serving from object storage: the fetch-model init container's download vs a plain boto3 download.

A model object of ``--mb`` MiB is put into moto's S3 server (started here on loopback), then
downloaded by (a) ours: the init container that ``%%k8s_serve --model-from s3://...`` gives the
pods (k8s/fetch.py), its command and environment exactly as rendered, run the way the
Kubernetes emulator's kubelet runs a container (a process with that argv and env, here with the
host's AWS CLI, into a fresh directory standing for the emptyDir); (b) baseline: boto3's
``download_file`` (s3transfer: 8 MiB parts, 10 threads) of the same object from this process.
The two alternate; medians of ``--runs``. moto serves every byte from Python on this 2-core
machine, so the ratio says what the init container's way costs against the library call, not
what S3 would do.

Run: .venv/bin/python bench/model_fetch.py [--mb 1024] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from checkpoint_upload import start_moto

from jupyter_tiers.data.objectstore import parse_object_store
from jupyter_tiers.k8s.fetch import fetch_init_container


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    import boto3

    keys = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
    os.environ.update(keys)
    moto, endpoint = start_moto()
    work = Path(tempfile.mkdtemp(prefix="jt-bench-fetch-"))
    times: dict[str, list[float]] = {}
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="bench-models")
        model = work / "model.bin"
        block = os.urandom(1 << 20)
        with open(model, "wb") as f:
            for _ in range(args.mb):
                f.write(block)
        size = model.stat().st_size
        client.upload_file(str(model), "bench-models", "llama/model.bin")
        model.unlink()
        uri = "s3://bench-models/llama/model.bin"
        store = parse_object_store({"endpoint_url": endpoint, "bucket": "bench-models",
                                    "region": "us-east-1", "credentials_secret": "s3-creds"}, "kubernetes")
        init = fetch_init_container(uri, store, None)
        # The Secret's keys as the kubelet resolves secretKeyRef; the emptyDir at /models.
        env = {"PATH": os.environ["PATH"], "HOME": str(work)}
        for e in init["env"]:
            env[e["name"]] = e.get("value") or keys.get(e["name"], "")
        env = {k: v for k, v in env.items() if v}

        def ours(run: int) -> Path:
            models = work / f"models-{run}"
            models.mkdir()
            argv = [a.replace("/models", str(models), 1) if a.startswith("/models") else a
                    for a in init["command"]]
            subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
            return models / "model.bin"

        def baseline(run: int) -> Path:
            dest = work / f"boto3-{run}.bin"
            client.download_file("bench-models", "llama/model.bin", str(dest))
            return dest

        print(f"init container: {' '.join(init['command'])}")
        for run in range(args.runs):
            order = [("init container", ours), ("boto3 download_file", baseline)]
            if run % 2:
                order.reverse()
            for name, fn in order:
                t0 = time.perf_counter()
                got = fn(run)
                times.setdefault(name, []).append(time.perf_counter() - t0)
                assert got.stat().st_size == size
                got.unlink()
                print(f"  run {run}: {name} {times[name][-1]:.2f} s", flush=True)
    finally:
        moto.terminate()
        moto.wait()
        shutil.rmtree(work, ignore_errors=True)
    starts = []
    for _ in range(5):  # what the container pays before its first byte: the CLI's own start
        t0 = time.perf_counter()
        subprocess.run(["aws", "--version"], env=env, check=True, capture_output=True)
        starts.append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    total = {k: sum(v) for k, v in times.items()}
    print(f"\nDownload of a {size / 2**20:,.0f} MiB model from moto on loopback, median of {args.runs}")
    for name in ("init container", "boto3 download_file"):
        print(f"  {name:<22} {med[name]:6.2f} s {size / 2**20 / med[name]:6.0f} MiB/s")
    ratio = med["boto3 download_file"] / med["init container"]
    print(f"  init container / download_file: {ratio:.2f}x speed (median), "
          f"{total['boto3 download_file'] / total['init container']:.2f}x (sum of all runs)")
    print(f"  the AWS CLI's start (aws --version, median of 5): {statistics.median(starts):.2f} s")


if __name__ == "__main__":
    main()
