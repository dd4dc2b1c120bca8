"""Checkpoint to object storage: a completed job's newest checkpoint, uploaded from the cluster side.

``--checkpoint-to s3://BUCKET/PREFIX`` (or ``store``: the profile's ``object_store``) sends the
job's newest checkpoint to ``s3://BUCKET/PREFIX/{name}/{job_id}/{checkpoint}`` when the job
COMPLETES. The upload runs where the checkpoint is: on a Slurm profile as one remote command on
the login node (s3_upload.py with the job's python, over the tier's SSH connection), on the
local tier as a process on this machine; the notebook never carries the bytes. The watcher starts
it when it sees the job COMPLETED (watch.py), ``job.upload()`` runs (or resumes) it by hand.

What a run achieved is recorded in the job's registry ``detail`` under ``upload`` (state, URI,
bytes), so a later ``--model-from`` knows the checkpoint's URI and a refusal can show progress.

An array's tasks (``--array`` / ``--sweep``) each upload their own newest checkpoint, to
``{name}/{ID}_{i}/{checkpoint}``, as each task COMPLETES (the watcher follows every task); a
task's record is derived, not stored, so its upload is recorded in the array record's ``detail``
under ``uploads`` (task index -> the same entry). ``ArrayJob.upload()`` runs or resumes every
COMPLETED task's, the best task (the summary's ranking) first.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import SpecError, TiersError
from ..core.model import JobStatus
from ..core.profile import Profile
from ..core.record import JobRecord, RecordStore
from .handoff import decode_detail, encode_detail, task_upload_of, upload_of, with_task_upload, with_upload
from .objectstore import (
    MANIFEST_NAME,
    ObjectStore,
    S3Uri,
    UploadReport,
    checkpoint_to_uri,
    kernel_credentials,
    parse_object_store,
    parse_upload_output,
    progress_text,
)

#: Multipart settings (bytes): files of at least THRESHOLD go in parts of PART_SIZE, CONCURRENCY
#: at a time. A profile may set ``object_store_part_mb`` only through the environment below (the
#: tests use small parts so that a multipart upload stays fast).
PART_SIZE = 16 * 1024 * 1024
THRESHOLD = 16 * 1024 * 1024
CONCURRENCY = 8
PART_ENV = "JT_UPLOAD_PART_BYTES"
STATE_NAME = "upload-state.json"


class UploadError(TiersError):
    """The checkpoint could not be uploaded; one line naming the bucket and what is wrong.
    ``retry``: the upload was interrupted (a dropped connection) and resuming it may succeed."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


class UploadingTier(Protocol):
    """What an upload asks of the training tier (``BatchTier`` is one): its profile and
    registry, a status query, an array's task checkpoints, and running the uploader."""

    @property
    def profile(self) -> Profile: ...

    @property
    def registry(self) -> RecordStore: ...

    def status(self, records: Sequence[JobRecord]) -> Mapping[str, JobStatus]: ...

    def task_checkpoints(self, record: JobRecord, tail_lines: int = 0
                         ) -> tuple[dict[int, tuple[str, str | None]], dict[int, str] | None]: ...

    def run_uploader(self, python: str, data: bytes) -> Iterator[bytes]: ...


def store_of(profile: Profile) -> ObjectStore | None:
    """The profile's validated ``object_store`` (None when it has none)."""
    raw = profile.get("object_store")
    if raw is None:
        return None
    try:
        return parse_object_store(raw, profile.tier)
    except ValueError as exc:  # config/profiles.py validated it already; a hand-built Profile may not be
        sub, message = exc.args[0]
        raise UploadError(f"profile {profile.name!r}: object_store.{sub}: {message}") from None


def task_of(record: JobRecord) -> tuple[str, int] | None:
    """(the array record's key, task index) when ``record`` is one task of an array (a derived
    record, ``ID_i``); None for a job or a whole array."""
    spec = getattr(record, "spec", None)
    if not isinstance(spec, Mapping) or not (spec.get("array") or spec.get("sweep")):
        return None
    base, sep, index = str(getattr(record, "job_id", "")).rpartition("_")
    if not sep or not base or not index.isascii() or not index.isdigit() or len(index) > 7:
        return None
    return f"{record.profile}/{base}", int(index)


def recorded_upload(registry: RecordStore, record: JobRecord) -> dict[str, Any] | None:
    """The upload on record for a job or an array's task (None: none, or no such record)."""
    task = task_of(record)
    try:
        if task is None:
            return upload_of(registry.get(record.key).detail)
        return task_upload_of(registry.get(task[0]).detail, task[1])
    except TiersError:
        return None


def with_checkpoint(tier: UploadingTier, record: JobRecord) -> JobRecord:
    """``record`` as plan_upload needs it: a job's as given; an array task's with its state (one
    status query, unless the caller knows it COMPLETED) and its newest checkpoint (one listing
    of the array's task directories) filled in."""
    task = task_of(record)
    if task is None:
        return record
    from dataclasses import replace

    try:
        if record.state != "COMPLETED":
            status = tier.status([record]).get(record.job_id)
            record = replace(record, state=status.state.value if status is not None else "UNKNOWN")
        if decode_detail(record.detail)[1] is not None:
            return record
        listed, _ = tier.task_checkpoints(tier.registry.get(task[0]), 0)
    except UploadError:
        raise
    except TiersError as exc:  # a dropped connection, say: the next attempt may succeed
        raise UploadError(f"job {record.job_id} ({record.name}): cannot find its checkpoint: {exc}",
                          retry=True) from None
    directory, newest = listed.get(task[1]) or (None, None)
    if directory is None:
        raise UploadError(f"job {record.job_id} ({record.name}): the scheduler no longer says "
                          "which job id it ran as, so its checkpoint directory is unknown")
    record = replace(record, detail=encode_detail(directory, posixpath.join(directory, newest)
                                                  if newest else None))
    return record


def check_checkpoint_to(value: Any, profile: Profile) -> str:
    """A ``--checkpoint-to`` value for ``profile``; SpecError naming what is allowed."""
    if not isinstance(value, str):
        raise SpecError("checkpoint_to", "write store (the profile's object_store) or s3://BUCKET/PREFIX")
    try:
        checkpoint_to_uri(value, store_of(profile))
    except (ValueError, UploadError) as exc:
        raise SpecError("checkpoint_to", str(exc).removeprefix("--checkpoint-to ")) from None
    return value


# --- the record in the registry's detail ---------------------------------------------------------


def shown_checkpoint(path: str | None, report: UploadReport | None, uri: str) -> str | None:
    """What a status shows as the checkpoint while and after it is uploaded."""
    if report is None:
        return path
    if report.done_uri:
        return report.done_uri
    if report.error:
        note = f"upload to {uri} failed: {report.error}"
    elif report.total <= 0:  # not started yet: no size known
        note = f"uploading to {uri}"
    else:
        note = f"uploading to {uri} {progress_text(report.sent, report.total)}"
    return f"{path} ({note})" if path else f"checkpoint ({note})"  # a task's path: not listed yet


def target_uri(profile: Profile, record: JobRecord, path: str | None) -> str:
    """Where ``record``'s checkpoint ``path`` goes (for display; ``--checkpoint-to`` as given
    when it cannot be resolved)."""
    value = str(record.spec.get("checkpoint_to")) if isinstance(record.spec, Mapping) else ""
    try:
        root = checkpoint_to_uri(value, store_of(profile))
        return str(root.join(record.name, record.job_id, posixpath.basename(path or "")))
    except (ValueError, UploadError):
        return value


# --- the request ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class UploadPlan:
    """One upload's request (credentials are added at run time, never stored) and its target."""

    request: dict[str, Any]
    uri: str  # the checkpoint's URI without the trailing "/" a directory gets
    python: str
    store: ObjectStore | None

    @property
    def mode(self) -> str:
        return self.request["mode"]


def wants_upload(record: JobRecord) -> bool:
    """Whether ``record`` (a job) was submitted with ``--checkpoint-to``."""
    spec = getattr(record, "spec", None)
    return isinstance(spec, Mapping) and bool(spec.get("checkpoint_to"))


def plan_upload(profile: Profile, record: JobRecord) -> UploadPlan:
    """The request for uploading ``record``'s newest checkpoint; UploadError when it has none."""
    who = f"job {record.job_id} ({record.name})"
    value = record.spec.get("checkpoint_to") if isinstance(record.spec, Mapping) else None
    if not value:
        raise UploadError(f"{who} was submitted without --checkpoint-to; nothing to upload")
    if record.state != "COMPLETED":
        raise UploadError(f"{who} is {record.state}; a checkpoint is uploaded when the job COMPLETES")
    store = store_of(profile)
    try:
        root = checkpoint_to_uri(value, store)
    except ValueError as exc:
        raise UploadError(str(exc)) from None
    directory, path = decode_detail(record.detail)
    if path is None:
        raise UploadError(f"{who} completed but left no checkpoint in {directory} (save one under "
                          "$JT_CHECKPOINT_DIR)")
    base = root.join(record.name, record.job_id)
    target = base.join(posixpath.basename(path))
    part = int(os.environ.get(PART_ENV) or PART_SIZE)
    request: dict[str, Any] = {
        "source": path,
        "bucket": target.bucket,
        "key": target.key,
        "manifest_key": base.join(MANIFEST_NAME).key,
        "uri": str(S3Uri(target.bucket, target.key)),
        "endpoint_url": store.endpoint_url if store else None,
        "region": store.region if store else None,
        "mode": store.credentials if store else "cluster",
        "state": posixpath.join(record.jobdir, STATE_NAME),
        "part_size": max(5 * 1024 * 1024, part),
        "threshold": max(5 * 1024 * 1024, min(THRESHOLD, part)),
        "concurrency": CONCURRENCY,
        "source_ref": f"{record.key} ({record.name})",
    }
    python = record.spec.get("python") or "python3"
    return UploadPlan(request, str(request["uri"]), str(python), store)


def uploader_source() -> str:
    """The uploader program's text (run as ``python -c``)."""
    return (Path(__file__).parent / "s3_upload.py").read_text()


def payload(plan: UploadPlan, env: Mapping[str, str]) -> bytes:
    """The request line sent on the uploader's stdin (with the kernel's credentials when the
    profile says ``credentials: kernel``)."""
    request = dict(plan.request)
    if plan.mode == "kernel":
        try:
            request["credentials"] = kernel_credentials(env)
        except ValueError as exc:
            raise UploadError(f"upload to {plan.uri}: {exc}") from None
    return (json.dumps(request) + "\n").encode()


def upload_item(upload: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A job's upload record as the REST list row carries it (the sidebar formats it): only
    known keys of the right types (the registry's detail may be anything)."""
    if not isinstance(upload, Mapping) or upload.get("state") not in UPLOAD_STATES:
        return None
    out: dict[str, Any] = {"state": upload["state"]}
    for key in ("uri", "error"):
        if isinstance(upload.get(key), str):
            out[key] = " ".join(str(upload[key]).split())[:500]
    for key in ("sent", "total"):
        value = upload.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62:
            out[key] = value
    return out


# --- running it ----------------------------------------------------------------------------------

#: What an upload record's ``state`` may be.
UPLOAD_STATES = ("uploading", "done", "interrupted", "failed")
#: How often a running upload's progress is written to the registry (the sidebar reads it there).
PROGRESS_EVERY_S = 1.0


def upload_checkpoint(tier: UploadingTier, record: JobRecord,
                      on_progress: Callable[[UploadReport], None] | None = None,
                      env: Mapping[str, str] | None = None) -> UploadReport:
    """Upload (or finish uploading) ``record``'s newest checkpoint through ``tier.run_uploader``;
    records the outcome in the registry. Returns the final report; UploadError on a refusal."""
    record = with_checkpoint(tier, record)
    plan = plan_upload(tier.profile, record)
    data = payload(plan, os.environ if env is None else env)
    report = UploadReport()
    _record(tier, record, {"state": "uploading", "uri": plan.uri})
    buffer = b""
    recorded = time.monotonic()
    try:
        for chunk in tier.run_uploader(plan.python, data):
            buffer += chunk
            lines, _, buffer = buffer.rpartition(b"\n")
            if lines:
                report = parse_upload_output(lines.decode("utf-8", "replace"), report)
                if on_progress is not None:
                    on_progress(report)
                if report.total and time.monotonic() - recorded >= PROGRESS_EVERY_S:
                    recorded = time.monotonic()  # for the sidebar, which reads the registry
                    _record(tier, record, {"state": "uploading", "uri": plan.uri, "sent": report.sent,
                                           "total": report.total})
        report = parse_upload_output(buffer.decode("utf-8", "replace"), report)
    except TiersError as exc:
        _record(tier, record, {"state": "interrupted", "uri": plan.uri, "sent": report.sent,
                               "total": report.total, "error": str(exc)})
        raise UploadError(f"upload to {plan.uri} interrupted at {progress_text(report.sent, report.total)}"
                          f" (run job.upload() to resume): {exc}", retry=True) from None
    if report.done_uri:
        _record(tier, record, {"state": "done", "uri": report.done_uri, "sent": report.total,
                               "total": report.total})
        return report
    if report.busy:
        raise UploadError(f"upload to {plan.uri}: another upload of this checkpoint is running",
                          retry=True)
    if report.error is None:  # the uploader always says done or error: its output was cut
        _record(tier, record, {"state": "interrupted", "uri": plan.uri, "sent": report.sent,
                               "total": report.total})
        raise UploadError(f"upload to {plan.uri} interrupted at {progress_text(report.sent, report.total)}"
                          " (run job.upload() to resume): its output ended", retry=True)
    error = report.error
    _record(tier, record, {"state": "failed", "uri": plan.uri, "sent": report.sent,
                           "total": report.total, "error": error})
    raise UploadError(f"upload to {plan.uri} failed: {error}")


def _record(tier: UploadingTier, record: JobRecord, upload: Mapping[str, Any]) -> None:
    task = task_of(record)
    if task is not None:  # in the array's record; the task's path says which checkpoint it was
        entry = {**upload, "path": decode_detail(record.detail)[1]}
        with contextlib.suppress(TiersError):
            tier.registry.change_detail(task[0], lambda detail: with_task_upload(detail, task[1], entry))
        return
    try:
        current = tier.registry.get(record.key)
        tier.registry.update(record.key, state=current.state, detail=with_upload(current.detail, upload))
    except TiersError:
        pass  # the registry is a record; the upload's outcome is returned anyway


def local_uploader(python: str, data: bytes) -> Iterator[bytes]:
    """Run the uploader on this machine (the local tier): its stdout as it comes."""
    import subprocess

    proc = subprocess.Popen([python, "-c", uploader_source()], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    said_error = False
    try:
        proc.stdin.write(data)
        proc.stdin.close()
        while line := proc.stdout.readline():
            said_error = said_error or line.startswith(b"@@jt-upload error")
            yield line
        err = proc.stderr.read() if proc.stderr is not None else b""
        if proc.wait() != 0 and err.strip() and not said_error:
            last = err.decode("utf-8", "replace").strip().splitlines()[-1][:300]
            yield f"\n@@jt-upload error {python}: {last}\n".encode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- an array's tasks ------------------------------------------------------------------------------


def task_order(indices: Sequence[int], best: int | None) -> list[int]:
    """The tasks in upload (and listing) order: the best task first, then by index."""
    return ([best] if best is not None and best in indices else []) + [i for i in indices if i != best]


def uploads_text(uploads: Mapping[int, Mapping[str, Any]], best: int | None, shown: int = 3) -> str:
    """An array's tasks' uploads for its summary line, best task first: ``checkpoints s3://b/jt/
    sw/51_3/ckpt/ (task 3, best), s3://b/jt/sw/51_0/ckpt/ (task 0) and 2 more; task 5 upload
    failed: ...`` ("" when none is on record)."""
    done: list[str] = []
    other: list[str] = []
    for i in task_order(sorted(uploads), best):
        up = uploads[i]
        uri = up.get("uri") if isinstance(up.get("uri"), str) else ""
        if up.get("state") == "done" and uri:
            done.append(f"{uri} (task {i}{', best' if i == best else ''})")
            continue
        sent, total = up.get("sent"), up.get("total")
        progress = (f" {progress_text(sent, total)}" if isinstance(sent, int) and isinstance(total, int)
                    and total > 0 else "")
        if up.get("state") == "uploading":
            other.append(f"task {i} uploading{progress}")
        else:
            why = f": {up['error']}" if up.get("error") else ""
            other.append(f"task {i} upload {up.get('state', 'failed')}{progress}{why}")
    parts = []
    if done:
        more = len(done) - shown
        parts.append("checkpoint" + ("s " if len(done) > 1 else " ") + ", ".join(done[:shown])
                     + (f" and {more} more" if more > 0 else ""))
    parts += other[:shown] + ([f"{len(other) - shown} more not uploaded"] if len(other) > shown else [])
    return " ".join("; ".join(parts).split())  # one line, whatever an error said
