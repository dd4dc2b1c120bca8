"""The watcher's part of --checkpoint-to, on a fake tier (no cluster, no S3): a COMPLETED job's
upload runs before its subscribers end; progress is delivered as statuses; an interrupted upload
(an SSH cut) is resumed on the next attempt; a refusal ends the job with the one-line reason."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.model import JobState, JobStatus
from jupyter_tiers.data import checkpoint_upload
from jupyter_tiers.data.checkpoint_upload import UploadError
from jupyter_tiers.data.handoff import encode_detail
from jupyter_tiers.data.objectstore import UploadReport
from jupyter_tiers.engine.watch import JobSubscription, Watcher, _Watched

URI = "s3://team-ckpt/jt/ft/7/ckpt-000100/"
PATH = "/jobs/ft/7/checkpoints/ckpt-000100"
REC = JobRecord(profile="fake", tier="fake", job_id="7", name="ft", jobdir="/jobs/7", world_size=1,
                state="COMPLETED", spec={"checkpoint_to": "store"},
                detail=encode_detail("/jobs/ft/7/checkpoints", PATH))


class FakeTier:
    name = "fake"
    profile = SimpleNamespace(name="fake", tier="local", get=lambda key, default=None: (
        {"bucket": "team-ckpt", "prefix": "jt"} if key == "object_store" else default))

    def __init__(self) -> None:
        self.registry = SimpleNamespace(get=lambda key: REC, update=lambda key, **kw: None,
                                        record_end=lambda rec, status: None)


def run(monkeypatch: pytest.MonkeyPatch, script: list[Any]) -> tuple[list[JobStatus], list[JobStatus], int]:
    calls = [0]

    def fake_upload(tier: Any, record: Any, on_progress: Any = None, env: Any = None) -> UploadReport:
        step = script[calls[0]]
        calls[0] += 1
        if isinstance(step, Exception):
            raise step
        on_progress(UploadReport(sent=5, total=10))
        return step

    monkeypatch.setattr(checkpoint_upload, "upload_checkpoint", fake_upload)
    statuses: list[JobStatus] = []
    ends: list[JobStatus] = []
    w = Watcher(FakeTier())  # type: ignore[arg-type]
    w.upload_retry_delay = 0.01
    watched = _Watched(REC, subs=[JobSubscription(REC, on_status=statuses.append, on_end=ends.append)])
    w._jobs[REC.key] = watched
    status = w._upload_started(REC, JobStatus(job_id="7", state=JobState.COMPLETED, checkpoint=PATH))
    assert status.checkpoint == f"{PATH} (uploading to {URI.rstrip('/')})"
    w._upload_then_end(watched, status)
    deadline = time.monotonic() + 30
    while not ends and time.monotonic() < deadline:
        time.sleep(0.01)
    return statuses, ends, calls[0]


def test_an_interrupted_upload_is_resumed_and_the_job_ends_with_its_uri(
        monkeypatch: pytest.MonkeyPatch) -> None:
    statuses, ends, calls = run(monkeypatch, [UploadError("interrupted", retry=True),
                                              UploadReport(sent=10, total=10, done_uri=URI)])
    assert calls == 2
    progress = f"{PATH} (uploading to {URI.rstrip('/')} 50% (0.0/0.0 MB))"
    assert any(s.checkpoint == progress for s in statuses)
    assert statuses[-1].checkpoint == URI and [e.checkpoint for e in ends] == [URI]


def test_a_refusal_is_not_retried_and_ends_the_job_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    refusal = UploadError("upload to s3://x/y failed: bucket x does not exist at AWS S3")
    _, ends, calls = run(monkeypatch, [refusal, UploadReport(done_uri=URI)])
    assert calls == 1
    assert [e.checkpoint for e in ends] == [f"{PATH} (not uploaded: {refusal})"]


def test_a_job_attached_after_its_upload_ended_is_not_uploaded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_tiers.core.model import SchedulerInfo
    from jupyter_tiers.data.handoff import with_upload

    done = JobRecord(**{**REC.__dict__, "detail": with_upload(REC.detail, {"state": "done", "uri": URI})})
    monkeypatch.setattr(checkpoint_upload, "upload_checkpoint", lambda *a, **k: pytest.fail("uploaded again"))
    tier = FakeTier()
    tier.registry = SimpleNamespace(get=lambda key: done, update=lambda key, **kw: None,
                                        record_end=lambda rec, status: None)
    statuses: list[JobStatus] = []
    w = Watcher(tier)  # type: ignore[arg-type]
    watched = _Watched(done, subs=[JobSubscription(done, on_status=statuses.append)])
    w._jobs[done.key] = watched
    w._apply([watched], {"7": SchedulerInfo(job_id="7", state=JobState.COMPLETED, checkpoint=PATH)}, {}, True,
             None)
    assert statuses[-1].checkpoint == URI and not w._uploading


def test_an_array_tasks_checkpoint_is_listed_then_uploaded_and_a_cut_listing_is_retried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A task record (derived, not stored): the watcher lists the array's task checkpoints (one
    command; the first attempt's connection drops and is retried), hands the task's newest
    checkpoint to the upload, and ends the task with its URI."""
    from jupyter_tiers.core.errors import TiersError

    array = JobRecord(profile="fake", tier="fake", job_id="7", name="sw", jobdir="/jobs/7", world_size=1,
                      state="RUNNING", spec={"checkpoint_to": "store", "array": "0-1"})
    task = JobRecord(**{**array.__dict__, "job_id": "7_1", "jobdir": "/jobs/7/tasks/1"})
    task_uri = "s3://team-ckpt/jt/sw/7_1/ckpt-9.pt"
    listings = [TiersError("connection lost"), ({1: ("/jobs/sw/7_1/checkpoints", "ckpt-9.pt")}, None)]
    seen: list[Any] = []

    def task_checkpoints(record: Any, tail_lines: int = 0) -> Any:
        assert record is array
        step = listings.pop(0) if len(listings) > 1 else listings[0]
        if isinstance(step, Exception):
            raise step
        return step

    def fake_upload(tier: Any, record: Any, on_progress: Any = None, env: Any = None) -> UploadReport:
        record = checkpoint_upload.with_checkpoint(tier, record)
        seen.append((record.job_id, record.state, record.detail))
        on_progress(UploadReport(sent=1, total=2))
        return UploadReport(sent=2, total=2, done_uri=task_uri)

    monkeypatch.setattr(checkpoint_upload, "upload_checkpoint", fake_upload)
    tier = FakeTier()
    tier.registry = SimpleNamespace(get=lambda key: array if key == "fake/7" else pytest.fail(key),
                                    update=lambda key, **kw: None, change_detail=lambda key, fn: None)
    tier.task_checkpoints = task_checkpoints  # type: ignore[attr-defined]
    statuses: list[JobStatus] = []
    ends: list[JobStatus] = []
    w = Watcher(tier)  # type: ignore[arg-type]
    w.upload_retry_delay = 0.01
    watched = _Watched(task, subs=[JobSubscription(task, on_status=statuses.append, on_end=ends.append)])
    w._jobs[task.key] = watched
    w._upload_then_end(watched, JobStatus(job_id="7_1", state=JobState.COMPLETED))
    deadline = time.monotonic() + 30
    while not ends and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [("7_1", "COMPLETED", encode_detail("/jobs/sw/7_1/checkpoints",
                                                       "/jobs/sw/7_1/checkpoints/ckpt-9.pt"))]
    # The first listing was cut, so the progress names the task's destination, not its file.
    shown = [s.checkpoint for s in statuses]
    assert "checkpoint (uploading to s3://team-ckpt/jt/sw/7_1 50% (0.0/0.0 MB))" in shown, shown
    assert [e.checkpoint for e in ends] == [task_uri]
