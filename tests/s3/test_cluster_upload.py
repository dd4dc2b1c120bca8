"""Checkpoint to object storage on the real Slurm test cluster: the job runs under Slurm, and the
uploader runs on the login node (this machine's sshd on loopback, as the cluster user) with the
job's python, over the tier's SSH connection, to moto's S3 server. Waits are bounded only so
that a broken cluster fails instead of hanging; no assertion is on time."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.data.checkpoint_upload import PART_ENV, UploadError
from jupyter_tiers.data.objectstore import MANIFEST_NAME, UploadReport, parse_manifest
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.conftest import profile_yaml
from tests.s3.conftest import S3Server
from tests.s3.test_local_upload import PART, objects, train

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.s3, pytest.mark.usefixtures("aws_env"),
              pytest.mark.slurm_beside]
GUARD = 300.0


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PART_ENV, str(PART))


@pytest.fixture
def hpc(cluster_env: dict[str, str], s3_server: S3Server, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SlurmTier, str]]:
    """The cluster's profile with an object_store on moto (kernel credentials), and a bucket."""
    bucket = s3_server.bucket()
    text = profile_yaml(cluster_env) + (
        f"    object_store: {{{s3_server.endpoint_yaml}, bucket: {bucket}, prefix: jt,"
        " credentials: kernel}\n")
    path = tmp_path / "tiers.yaml"
    path.write_text(text)
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    tier = SlurmTier(load_config().profile("box"), Registry(tmp_path / "registry.sqlite"))
    yield tier, bucket
    for rec in tier.registry.list(limit=1000):
        tier.cancel(rec)
    tier.close()


def test_a_slurm_jobs_checkpoint_is_uploaded_from_the_login_node_multipart(
        hpc: tuple[SlurmTier, str], s3_server: S3Server) -> None:
    tier, bucket = hpc
    size = 3 * PART + 1000  # 4 parts
    job = tier.submit(tier.make_spec(train(size), name="s3ft", checkpoint_to="store"))
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED
    uri = f"s3://{bucket}/jt/s3ft/{job.id}/ckpt-000100/"
    assert status.checkpoint == uri, status.checkpoint
    assert job.summary(status).endswith(f" — checkpoint {uri}")
    got = objects(s3_server, bucket)
    prefix = f"jt/s3ft/{job.id}/"
    manifest = parse_manifest(got[prefix + MANIFEST_NAME])
    assert {f.path for f in manifest.files} == {"config.json", "model.bin"}
    for f in manifest.files:
        assert hashlib.sha256(got[prefix + "ckpt-000100/" + f.path]).hexdigest() == f.sha256
    # The kernel's credentials went on stdin only: not in the state file the login node keeps.
    state = Path(job.record.jobdir) / "upload-state.json"
    assert "jt-test-secret" not in state.read_text()


def holders(path: str) -> list[int]:
    """The processes holding ``path`` open (the uploader holds its state file's lock)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == path for fd in os.listdir(f"/proc/{pid}/fd")):
                found.append(int(pid))
    return found


def test_an_ssh_cut_mid_upload_resumes_without_resending_finished_parts(
        hpc: tuple[SlurmTier, str], s3_server: S3Server) -> None:
    """The connection is closed and the uploader on the login node killed after its first
    confirmed part; the resumed run sends exactly the parts the server does not hold."""
    tier, bucket = hpc
    parts = 16
    size = parts * PART
    job = tier.submit(tier.make_spec(train(size), name="s3cut", checkpoint_to="store"))
    # Not watched, so nothing uploads by itself; status() records COMPLETED and the checkpoint.
    deadline = time.monotonic() + GUARD
    while tier.status([job.record])[job.id].state is not JobState.COMPLETED:
        assert time.monotonic() < deadline
        time.sleep(1)
    record = tier.registry.get(job.key)
    lock = f"{record.jobdir}/upload-state.json.lock"

    def cut(report: UploadReport) -> None:
        if report.sent >= PART + 8:  # the small file and a first part are confirmed
            for pid in holders(lock):  # the uploader this test started (by its lock file)
                os.kill(pid, signal.SIGKILL)
            tier.transport.close()

    with pytest.raises(UploadError) as err:
        tier.upload_checkpoint(record, on_progress=cut)
    assert err.value.retry and "interrupted" in str(err.value) and "\n" not in str(err.value)
    deadline = time.monotonic() + GUARD
    while holders(lock):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    state = json.loads((Path(record.jobdir) / "upload-state.json").read_text())
    key = f"jt/s3cut/{job.id}/ckpt-000100/model.bin"
    listed = s3_server.client().list_parts(Bucket=bucket, Key=key,
                                           UploadId=state["files"]["model.bin"]["upload_id"])
    held = len(listed.get("Parts", []))
    assert 1 <= held < parts and not state.get("complete")
    report = tier.upload_checkpoint(record)
    assert report.done_uri == f"s3://{bucket}/jt/s3cut/{job.id}/ckpt-000100/"
    # Only parts the server did not hold: none of the `held` is sent again. A part the killed
    # uploader had fully sent may still complete on the server after `held` was read, and the
    # resumed run then skips it too, so the figure is at most, not exactly, the rest.
    assert report.sent_this_run % PART == 0 and PART <= report.sent_this_run <= size - held * PART
    state = json.loads((Path(record.jobdir) / "upload-state.json").read_text())
    assert state["complete"] and state["files"]["model.bin"]["done"]
    body = objects(s3_server, bucket)[key]
    assert body == bytes(range(256)) * (size // 256)


def test_no_boto3_for_the_jobs_python_on_the_login_node_is_one_line(hpc: tuple[SlurmTier, str]) -> None:
    tier, _ = hpc
    # Debian's /usr/bin/python3 on the login node has no boto3 (the venv's python has).
    job = tier.submit(tier.make_spec(train(1024), name="s3nob", checkpoint_to="store",
                                     python="/usr/bin/python3"))
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED
    assert status.checkpoint is not None and "(not uploaded: " in status.checkpoint
    assert "boto3 is not installed for /usr/bin/python3 on " in status.checkpoint
    with pytest.raises(UploadError, match=r"boto3 is not installed for /usr/bin/python3") as err:
        job.upload()
    assert "\n" not in str(err.value)


def test_a_missing_bucket_is_one_line_naming_it(hpc: tuple[SlurmTier, str]) -> None:
    tier, _ = hpc
    job = tier.submit(tier.make_spec(train(1024), name="s3nobucket", checkpoint_to="s3://jt-missing-bucket/x"))
    status = job.wait(timeout=GUARD)
    assert status.checkpoint is not None
    assert status.checkpoint.endswith("bucket jt-missing-bucket does not exist at "
                                      f"{tier.profile.get('object_store')['endpoint_url']})")


def test_a_slurm_sweeps_tasks_each_upload_their_checkpoint_from_the_login_node(
        hpc: tuple[SlurmTier, str], s3_server: S3Server) -> None:
    """Each task's newest checkpoint is found with one listing of the array's task directories
    over SSH and uploaded by the login node's uploader (its state file in the task's directory)
    to {name}/{ID}_{i}/; the summary lists them best first."""
    from jupyter_tiers.engine.array_job import ArrayJob

    tier, bucket = hpc
    body = ("import os, pathlib\n"
            "d = pathlib.Path(os.environ['JT_CHECKPOINT_DIR'])\n"
            "(d / 'ckpt-1.pt').write_text('task %s' % params['lr'])\n"
            "print('loss=%s' % params['lr'], flush=True)\n")
    job = tier.submit(tier.make_spec(body, name="s3sw", sweep="lr=0.5,0.25", checkpoint_to="store"))
    assert isinstance(job, ArrayJob)
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED, status
    got = objects(s3_server, bucket)
    for i, lr in ((0, "0.5"), (1, "0.25")):
        assert got[f"jt/s3sw/{job.id}_{i}/ckpt-1.pt"] == f"task {lr}".encode()
        assert parse_manifest(got[f"jt/s3sw/{job.id}_{i}/{MANIFEST_NAME}"]).kind == "file"
    uri = {i: f"s3://{bucket}/jt/s3sw/{job.id}_{i}/ckpt-1.pt" for i in (0, 1)}
    assert job.summary().endswith(f"; checkpoints {uri[1]} (task 1, best), {uri[0]} (task 0)")
