"""``--checkpoint-to`` on a sweep, on the local tier for real (supervisor, ranks, the uploader
process, moto's S3 server): each COMPLETED task's newest checkpoint goes to
``{name}/{ID}_{i}/{checkpoint}`` as the task ends, with progress in that task's statuses; a
FAILED task uploads nothing; the summary lists the URIs best task first; ``job.upload()``
resumes every task (a finished one sends no byte again); ``--model-from ID_i`` then knows the
task's URI. Waits are bounded only so that a broken tier fails instead of hanging."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.core.model import JobState, JobStatus
from jupyter_tiers.data import handoff
from jupyter_tiers.data.checkpoint_upload import PART_ENV, UploadError
from jupyter_tiers.data.objectstore import MANIFEST_NAME, parse_manifest
from jupyter_tiers.engine.array_job import ArrayJob
from jupyter_tiers.local.tier import LocalTier
from tests.s3.conftest import S3Server
from tests.s3.test_local_upload import GUARD, make_tier, objects

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("aws_env")]

# Task lr=0.3 fails before saving; the others save a file checkpoint and print their loss
# (lr=0.2 is the best: the lowest loss).
SWEEP = """\
import os, pathlib
d = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"])
if params["lr"] == 0.3:
    raise ValueError("diverged")
(d / "ckpt-000010.pt").write_bytes(b"w" * (1000 + int(params["lr"] * 10)))
print(f"loss={abs(params['lr'] - 0.2) + 0.01:.3f}", flush=True)
"""


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PART_ENV, str(5 * 1024 * 1024))


@pytest.fixture
def tier(s3_server: S3Server, tmp_path: Path) -> Iterator[LocalTier]:
    made = make_tier(tmp_path, object_store={**s3_server.endpoint_settings, "bucket": "unused"})
    yield made
    for rec in made.registry.list(limit=100):
        made.cancel(rec)
    made.close()


def test_each_completed_tasks_checkpoint_is_uploaded_best_first_and_upload_resumes_all(
        s3_server: S3Server, tier: LocalTier) -> None:
    bucket = s3_server.bucket()
    job = tier.submit(tier.make_spec(SWEEP, name="sw", sweep="lr=0.1,0.2,0.3",
                                     checkpoint_to=f"s3://{bucket}/jt"))
    assert isinstance(job, ArrayJob)
    seen: dict[int, list[str | None]] = {0: [], 1: [], 2: []}
    subs = [tier.watcher.watch(t.record, on_status=lambda st, i=i: seen[i].append(st.checkpoint),
                               follow_logs=False) for i, t in enumerate(job.tasks)]
    status = job.wait(timeout=GUARD)
    for sub in subs:
        tier.watcher.unwatch(sub)
    assert status.state is JobState.FAILED  # task 2 failed; 0 and 1 completed
    uri = {i: f"s3://{bucket}/jt/sw/{job.id}_{i}/ckpt-000010.pt" for i in (0, 1)}
    # Each completed task showed its own upload's progress, then its URI.
    for i in (0, 1):
        assert any(f"(uploading to {uri[i]}" in (s or "") for s in seen[i]), seen[i]
        assert seen[i][-1] == uri[i], seen[i]
    got = objects(s3_server, bucket)
    assert sorted(got) == sorted([f"jt/sw/{job.id}_{i}/{n}" for i in (0, 1)
                                  for n in ("ckpt-000010.pt", MANIFEST_NAME)])
    for i in (0, 1):
        manifest = parse_manifest(got[f"jt/sw/{job.id}_{i}/{MANIFEST_NAME}"])
        assert manifest.uri == uri[i] and manifest.kind == "file"
        assert manifest.files[0].size == 1000 + i + 1
    # The registry keeps every task's upload in the array's record, beside its counts.
    uploads = job.uploads()
    assert {i: (u["state"], u["uri"]) for i, u in uploads.items()} == {i: ("done", uri[i]) for i in (0, 1)}
    summary = job.summary()
    assert summary.startswith(f"array {job.id} (3 tasks) 2 COMPLETED, 1 FAILED (task 2")
    assert summary.endswith(f"; best loss 0.01 at lr=0.2; checkpoints {uri[1]} (task 1, best), "
                            f"{uri[0]} (task 0)"), summary
    # job.upload(): every COMPLETED task, best first, nothing re-sent; the best task's URI.
    assert job.upload_all() == {1: uri[1], 0: uri[0]}
    assert list(job.upload_all()) == [1, 0]
    assert job.upload() == uri[1]
    # A task on its own (job.task(i).upload()), and a failed one's one-line refusal.
    assert job.task(0).upload() == uri[0]
    with pytest.raises(UploadError, match=f"job {job.id}_2 .* is FAILED"):
        job.task(2).upload()
    # --model-from ID_i: the task's checkpoint carries its URI.
    array = tier.registry.get(job.key)
    listed, _ = tier.task_checkpoints(array)
    ckpt = handoff.task_checkpoint(array, 1, "COMPLETED", listed[1])
    assert ckpt.uri == uri[1]


def test_an_array_with_no_completed_task_uploads_nothing_and_says_so(
        s3_server: S3Server, tier: LocalTier) -> None:
    bucket = s3_server.bucket()
    job = tier.submit(tier.make_spec(SWEEP, name="bad", sweep="lr=0.3", checkpoint_to=f"s3://{bucket}/jt"))
    assert isinstance(job, ArrayJob)
    ends: list[JobStatus] = []
    sub = tier.watcher.watch(job.tasks[0].record, on_end=ends.append, follow_logs=False)
    assert job.wait(timeout=GUARD).state is JobState.FAILED
    tier.watcher.unwatch(sub)
    assert objects(s3_server, bucket) == {}
    assert job.uploads() == {}
    with pytest.raises(UploadError, match="has no COMPLETED task"):
        job.upload()
