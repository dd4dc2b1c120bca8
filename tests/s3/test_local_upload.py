"""Checkpoint to object storage on the local tier, for real: a local job (real supervisor and
ranks) completes, the watcher uploads its newest checkpoint with the uploader process
(jupyter_tiers/data/s3_upload.py, boto3) to moto's S3 server, and the status, the summary line and
the registry show the URI. Waits are bounded only so that a broken tier fails instead of hanging."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.data.checkpoint_upload import PART_ENV, UploadError, payload, plan_upload, uploader_source
from jupyter_tiers.data.handoff import upload_of
from jupyter_tiers.data.objectstore import MANIFEST_NAME, parse_manifest
from jupyter_tiers.local.tier import LocalTier
from tests.local.test_local_tier import FAST
from tests.s3.conftest import S3Server

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("aws_env")]
GUARD = 180.0
PART = 5 * 1024 * 1024  # S3's smallest part: a 12 MB file goes in 3 parts
# Rank 0 writes a directory checkpoint (a 12 MB file: multipart, and a small one) after an older one.
TRAIN = """\
import os, pathlib
d = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"])
if os.environ["RANK"] == "0":
    (d / "ckpt-000050.pt").write_text("old")
    new = d / "ckpt-000100"
    new.mkdir()
    (new / "config.json").write_text('{"w": 3}')
    (new / "model.bin").write_bytes(bytes(range(256)) * (SIZE // 256))
    os.utime(d / "ckpt-000050.pt", (1, 1))
"""


def train(size: int) -> str:
    return TRAIN.replace("SIZE", str(size))


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PART_ENV, str(PART))


def make_tier(tmp_path: Path, **settings: object) -> LocalTier:
    profile = Profile(name="local", tier="local", settings={"workdir": str(tmp_path / "jobs"), **settings})
    return LocalTier(profile, Registry(tmp_path / "r.sqlite"), watcher_options=FAST)


@pytest.fixture
def tiers(tmp_path: Path) -> Iterator[list[LocalTier]]:
    made: list[LocalTier] = []
    yield made
    for t in made:
        for rec in t.registry.list(limit=100):
            t.cancel(rec)
        t.close()


def objects(s3: S3Server, bucket: str) -> dict[str, bytes]:
    client = s3.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    return {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def test_a_completed_jobs_checkpoint_directory_is_uploaded_multipart_with_a_manifest(
        s3_server: S3Server, tmp_path: Path, tiers: list[LocalTier]) -> None:
    bucket = s3_server.bucket()
    # An explicit URI on a profile whose object_store names the endpoint (another bucket).
    tier = make_tier(tmp_path, object_store={**s3_server.endpoint_settings, "bucket": "other"})
    tiers.append(tier)
    size = 12 * 1024 * 1024
    job = tier.submit(tier.make_spec(train(size), name="ft", checkpoint_to=f"s3://{bucket}/jt"))
    seen: list[str | None] = []
    sub = tier.watcher.watch(job.record, on_status=lambda st: seen.append(st.checkpoint), follow_logs=False)
    status = job.wait(timeout=GUARD)
    tier.watcher.unwatch(sub)
    assert status.state is JobState.COMPLETED
    uri = f"s3://{bucket}/jt/ft/{job.id}/ckpt-000100/"
    assert status.checkpoint == uri
    assert summary_line(status).endswith(f" — checkpoint {uri}")
    assert any(s and "(uploading to s3://" in s for s in seen), seen  # progress was shown
    got = objects(s3_server, bucket)
    prefix = f"jt/ft/{job.id}/"
    assert sorted(got) == sorted(prefix + k for k in ("ckpt-000100/config.json", "ckpt-000100/model.bin",
                                                      MANIFEST_NAME))
    manifest = parse_manifest(got[prefix + MANIFEST_NAME])
    assert manifest.uri == uri and manifest.kind == "dir"
    for f in manifest.files:
        body = got[prefix + "ckpt-000100/" + f.path]
        assert (f.size, f.sha256) == (len(body), hashlib.sha256(body).hexdigest())
    assert manifest.total_bytes == size + len('{"w": 3}')
    upload = upload_of(tier.registry.get(job.key).detail)
    assert upload is not None and upload["state"] == "done" and upload["uri"] == uri
    # A later status query (a new kernel's attach) shows the URI and keeps the upload's record.
    assert tier.status([tier.registry.get(job.key)])[job.id].checkpoint == uri
    assert upload_of(tier.registry.get(job.key).detail) == upload
    assert "AWS_SECRET_ACCESS_KEY" not in (Path(job.record.jobdir) / "upload-state.json").read_text()


def test_store_with_kernel_credentials_and_a_missing_bucket_is_one_line(
        s3_server: S3Server, tmp_path: Path, tiers: list[LocalTier]) -> None:
    store = {**s3_server.endpoint_settings, "bucket": "jt-no-such-bucket", "prefix": "p",
             "credentials": "kernel"}
    tier = make_tier(tmp_path, object_store=store)
    tiers.append(tier)
    job = tier.submit(tier.make_spec(train(1024), name="nb", checkpoint_to="store"))
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED
    assert status.checkpoint is not None and status.checkpoint.endswith(
        f"(not uploaded: upload to s3://jt-no-such-bucket/p/nb/{job.id}/ckpt-000100 failed: bucket "
        f"jt-no-such-bucket does not exist at {s3_server.endpoint})")
    with pytest.raises(UploadError) as err:
        job.upload()
    assert "\n" not in str(err.value) and "does not exist" in str(err.value)


def test_kernel_credentials_missing_is_a_refusal_naming_them(
        s3_server: S3Server, tmp_path: Path, tiers: list[LocalTier], monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3_server.bucket()
    store = {**s3_server.endpoint_settings, "bucket": bucket, "credentials": "kernel"}
    tier = make_tier(tmp_path, object_store=store)
    tiers.append(tier)
    job = tier.submit(tier.make_spec(train(1024), name="nocred"))
    job.wait(timeout=GUARD)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(UploadError, match="was submitted without --checkpoint-to"):
        job.upload()


def test_an_interrupted_upload_resumes_without_resending_finished_parts(
        s3_server: S3Server, tmp_path: Path, tiers: list[LocalTier]) -> None:
    """The uploader is killed (SIGKILL, as a cut connection ends it) after its first confirmed
    part; job.upload() then sends exactly the bytes the server did not confirm."""
    bucket = s3_server.bucket()
    tier = make_tier(tmp_path, object_store={**s3_server.endpoint_settings, "bucket": bucket})
    tiers.append(tier)
    size = 8 * PART  # 8 parts of the big file
    job = tier.submit(tier.make_spec(train(size), name="cut", checkpoint_to="store"))
    # Not watched: nothing uploads by itself; status() records COMPLETED and the checkpoint.
    deadline = time.monotonic() + GUARD
    while tier.status([job.record])[job.id].state is not JobState.COMPLETED:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    record = tier.registry.get(job.key)
    plan = plan_upload(tier.profile, record)
    request = json.loads(payload(plan, os.environ))
    request["concurrency"] = 1
    proc = subprocess.Popen([sys.executable, "-c", uploader_source()], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.close()
    parts = 0
    for line in proc.stdout:
        # progress after the small file (config.json), then one per part of model.bin
        if line.startswith(b"@@jt-upload progress ") and int(line.split()[2]) >= PART:
            parts += 1
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    state = json.loads((Path(record.jobdir) / "upload-state.json").read_text())
    confirmed = state["files"]["model.bin"].get("parts", {})
    assert 1 <= len(confirmed) < 8 and not state.get("complete")
    report = tier.upload_checkpoint(record)
    small = 0 if state["files"]["config.json"].get("done") else len('{"w": 3}')
    assert report.sent_this_run == size - len(confirmed) * PART + small
    got = objects(s3_server, bucket)
    body = got[f"cut/{job.id}/ckpt-000100/model.bin"]
    assert len(body) == size and body == bytes(range(256)) * (size // 256)
    assert MANIFEST_NAME in "".join(got)
    again = tier.upload_checkpoint(record)  # complete: nothing is sent again
    assert again.sent_this_run == 0
