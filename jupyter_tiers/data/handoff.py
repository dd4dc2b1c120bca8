"""The train-to-serve handoff: a training job's checkpoint, and where a serving tier sees it.

Every rank of a training job gets ``JT_CHECKPOINT_DIR`` (default ``{workdir}/{name}/{job_id}/
checkpoints``; ``--checkpoint-dir`` overrides). The tier lists that directory in the same round
trip as its status query and records the directory and its newest entry in the job's registry
``detail`` (JSON). ``%%k8s_serve --model-from JOB`` resolves the job to that checkpoint and maps
its path into the serving profile's view: on Kubernetes through ``model_volume`` and its
``path_map`` (training-side prefix -> path inside the volume, mounted read-only at /models), on
the local tier directly (or through the local profile's ``path_map`` for another machine's path).

A sweep's task (``51_7``, ``NAME_7``, a task handle) or a whole array (its best task) is resolved
through :func:`split_task_ref`, :func:`task_checkpoint` and :func:`pick_best_task` here (pure) and
task_handoff.py (the I/O: the tasks' states, checkpoint listings and log tails).

Everything here is pure except :func:`attach_checkpoints` (records what a tier listed in the
registry), :func:`find_job` and :func:`resolve` (read the registry, and ask the training tier once
when the record is not final yet). The listing itself is the tiers' I/O (slurm/commands.py).
"""

from __future__ import annotations

import json
import posixpath
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..batch.arrays import best_task, plan_of
from ..batch.metrics import format_value
from ..core.detail import entries, with_entries
from ..core.errors import JobNotFound, SpecError, TiersError
from ..core.model import WorkKind
from ..core.profile import Profile
from ..core.record import JobRecord, RecordStore
from .objectstore import S3Uri, parse_uri, progress_text

#: Where the Kubernetes tier mounts the profile's model volume (read-only): k8s/render.py's
#: MODEL_DIR, repeated so that the training tiers need not import the Kubernetes renderer.
MODEL_DIR = "/models"
#: The token of a serving cell's body replaced by the model's path.
MODEL_PATH_TOKEN = "{model_path}"

# What a checkpoint's path may hold. The path reaches a shell (a --shell serving body) and a Python
# string literal in a body, so it is kept to characters that need no quoting anywhere.
_SAFE_PATH_RE = re.compile(r"^[A-Za-z0-9_./+@=,:-]+$")
#: The largest array task index a reference may name (arrays.MAX_INDEX has 7 digits).
_MAX_TASK_DIGITS = 7


class HandoffError(TiersError):
    """A checkpoint cannot be handed to a serving tier; the message is one line naming the job
    and what is missing."""


@dataclass(frozen=True)
class Checkpoint:
    """A completed job's newest checkpoint, as the training side sees it."""

    job_key: str  # profile/job_id
    job_id: str
    job_name: str
    profile: str
    tier: str  # the training tier: slurm or local
    directory: str
    path: str  # directory/newest entry
    uri: str | None = None  # where --checkpoint-to uploaded it (complete), if it did
    upload: str | None = None  # an upload not complete: "uploading to s3://... 40% (...)", "failed: ..."

    @property
    def source(self) -> str:
        """``profile/job_id (name)``: what a service records as its model's origin."""
        return f"{self.job_key} ({self.job_name})"


def attach_checkpoints(records: Sequence[Any], found: dict[str, Any],
                       listed: Mapping[str, tuple[str, str | None]], registry: RecordStore,
                       noted: dict[str, str]) -> None:
    """Put each listed job's newest checkpoint into its SchedulerInfo in ``found`` (in place) and
    record directory and checkpoint in the registry's ``detail`` when they changed.

    ``listed`` is keyed by record key; ``noted`` is the tier's memory of what it last recorded, so
    an unchanged listing writes nothing.
    """
    from dataclasses import replace

    for rec in records:
        info, got = found.get(rec.job_id), listed.get(rec.key)
        if info is None or got is None:
            continue
        directory, newest = got
        path = posixpath.join(directory, newest) if newest else None
        detail = encode_detail(directory, path)
        uploaded = None
        if '"upload"' in (rec.detail or ""):  # --checkpoint-to: keep its record, show its URI
            upload = upload_of(rec.detail)
            if upload is not None:
                detail = with_upload(detail, upload)
                if upload.get("state") == "done" and decode_detail(rec.detail)[1] == path:
                    uploaded = upload.get("uri")
        found[rec.job_id] = replace(info, checkpoint=uploaded if isinstance(uploaded, str) else path)
        if noted.get(rec.key) != detail:
            try:
                registry.update(rec.key, state=info.state.value, detail=detail)
            except Exception:  # the registry is a record, not the source of truth
                continue
            noted[rec.key] = detail


# --- the registry's detail --------------------------------------------------------------------


def encode_detail(directory: str, checkpoint: str | None) -> str:
    """A job's registry ``detail``: JSON with its checkpoint directory and newest checkpoint."""
    data: dict[str, str] = {"checkpoint_dir": directory}
    if checkpoint:
        data["checkpoint"] = checkpoint
    return json.dumps(data, sort_keys=True)


def decode_detail(detail: str | None) -> tuple[str | None, str | None]:
    """``(checkpoint_dir, checkpoint)`` from a job's ``detail`` (``(None, None)`` if absent)."""
    data = entries(detail)
    directory, checkpoint = data.get("checkpoint_dir"), data.get("checkpoint")
    return (directory if isinstance(directory, str) else None,
            checkpoint if isinstance(checkpoint, str) else None)


def upload_of(detail: str | None) -> dict[str, Any] | None:
    """The ``upload`` entry of a job's registry detail (state, uri, sent, total, error)."""
    up = entries(detail).get("upload")
    return up if isinstance(up, dict) else None


def with_upload(detail: str | None, upload: Mapping[str, Any]) -> str:
    """``detail`` with its ``upload`` entry replaced (the checkpoint entries kept)."""
    return with_entries(detail, upload=dict(upload))


def task_upload_of(detail: str | None, index: int) -> dict[str, Any] | None:
    """The upload entry of an array's task ``index`` (in the array record's ``detail``, under
    ``uploads``: task records are derived, not stored)."""
    uploads = entries(detail).get("uploads")
    up = uploads.get(str(index)) if isinstance(uploads, dict) else None
    return up if isinstance(up, dict) else None


def task_uploads(detail: str | None) -> dict[int, dict[str, Any]]:
    """Every task's upload entry of an array record's ``detail`` (task index -> entry)."""
    uploads = entries(detail).get("uploads")
    if not isinstance(uploads, dict):
        return {}
    return {int(k): v for k, v in uploads.items()
            if isinstance(k, str) and k.isascii() and k.isdigit() and len(k) <= _MAX_TASK_DIGITS
            and isinstance(v, dict)}


def with_task_upload(detail: str | None, index: int, upload: Mapping[str, Any]) -> str:
    """An array record's ``detail`` with task ``index``'s upload entry replaced (the counts
    line and the other tasks' entries kept)."""
    uploads = entries(detail).get("uploads")
    kept = uploads if isinstance(uploads, dict) else {}
    return with_entries(detail, uploads={**kept, str(index): dict(upload)})


def checkpoint_of(record: JobRecord) -> Checkpoint:
    """The checkpoint of a completed job's registry record, or a one-line refusal."""
    who = f"job {record.job_id} ({record.name})"
    if getattr(record, "kind", WorkKind.JOB) != WorkKind.JOB:
        raise HandoffError(f"--model-from {record.job_id}: {record.name!r} is a service, not a "
                           "training job; give a job id, a job name or a Job variable")
    if record.state != "COMPLETED":
        raise HandoffError(f"--model-from: {who} is {record.state}, not COMPLETED; a model is served "
                           "from a job that completed")
    directory, path = decode_detail(record.detail)
    if directory is None:
        raise HandoffError(f"--model-from: {who} has no checkpoint directory on record (it was "
                           "submitted before jupyter-tiers gave jobs JT_CHECKPOINT_DIR)")
    if path is None:
        raise HandoffError(f"--model-from: {who} completed but left no checkpoint in {directory} "
                           "(save one under $JT_CHECKPOINT_DIR)")
    if not _SAFE_PATH_RE.fullmatch(path):
        raise HandoffError(f"--model-from: {who}: the checkpoint path {path!r} has characters that "
                           "are unsafe in a shell or a string literal; use letters, digits and "
                           "_ . / + @ = , : -")
    uri, upload = _upload_state(record.detail)
    return Checkpoint(job_key=record.key, job_id=record.job_id, job_name=record.name,
                      profile=record.profile, tier=record.tier, directory=directory, path=path,
                      uri=uri, upload=upload)


def _upload_state(detail: str | None) -> tuple[str | None, str | None]:
    """(the URI of a complete upload, or a note on one that is not) from a job's ``detail``."""
    up = upload_of(detail)
    if up is None:
        return None, None
    uri = up.get("uri") if isinstance(up.get("uri"), str) else None
    if up.get("state") == "done" and uri:
        return uri, None
    sent, total = up.get("sent"), up.get("total")
    done = progress_text(sent, total) if isinstance(sent, int) and isinstance(total, int) else ""
    note = f"{up.get('state')} ({uri} {done})".replace(" )", ")")
    if up.get("error"):
        note += f": {up['error']}"
    return None, note


def serving_model(ckpt: Checkpoint, serve_profile: Profile) -> tuple[str | None, str | None]:
    """``(path, uri)``: where the serving profile sees ``ckpt`` through shared storage (uri
    None), else, when the profile has an ``object_store``, the URI of its upload (path: where a
    Kubernetes init container puts it; None on the local tier, which downloads it into a
    cache). A one-line refusal when neither reaches it (the upload's progress, if it runs)."""
    try:
        return serving_model_path(ckpt, serve_profile), None
    except HandoffError:
        if serve_profile.get("object_store") is None:
            raise
        shared = sys.exc_info()[1]
    who = f"--model-from: job {ckpt.job_id} ({ckpt.job_name})"
    if ckpt.uri is None:
        if ckpt.upload:
            raise HandoffError(f"{who}: its checkpoint is not in the object store yet: {ckpt.upload}; "
                               "wait for the upload or run job.upload()")
        raise HandoffError(f"{who}: its checkpoint {ckpt.path} was not uploaded (submit with "
                           f"--checkpoint-to store) and {str(shared).split(': ', 1)[-1]}")
    if serve_profile.tier == "kubernetes":
        return fetched_model_path(ckpt.uri), ckpt.uri
    return None, ckpt.uri



def model_uri(uri: str) -> S3Uri:
    """``--model-from``'s object-store URI, parsed; a SpecError unless it names an object or a
    prefix inside a bucket."""
    try:
        parsed = parse_uri(uri)
    except ValueError as exc:
        raise SpecError("model_uri", str(exc)) from None
    if not parsed.key:
        raise SpecError("model_uri", f"{uri}: name an object or a prefix inside the bucket")
    return parsed


def fetched_model_path(uri: str) -> str:
    """Where a Kubernetes server sees a model its init container fetched from the object store
    (k8s/fetch.py): ``/models/{last segment of the key}``."""
    return f"{MODEL_DIR}/{posixpath.basename(model_uri(uri).key)}"

# --- path maps --------------------------------------------------------------------------------


def parse_path_map(value: Any) -> tuple[tuple[str, str], ...]:
    """A profile's ``path_map`` (training-side prefix -> path here) as pairs, longest prefix
    first. Raises ValueError with what is allowed."""
    if not isinstance(value, Mapping) or not value:
        raise ValueError("expected a mapping of absolute paths, e.g. {/scratch/ckpt: /}")
    pairs = []
    for src, dst in value.items():
        for path in (src, dst):
            if not isinstance(path, str) or not path.startswith("/") or not _SAFE_PATH_RE.fullmatch(path) \
                    or ".." in path.split("/"):
                raise ValueError(f"{path!r} is not an absolute path of letters, digits and "
                                 "_ . / + @ = , : - (no '..')")
        pairs.append((_norm(src), _norm(dst)))
    return tuple(sorted(pairs, key=lambda p: -len(p[0])))


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path != "/" else "/"


def map_path(path: str, pairs: Sequence[tuple[str, str]]) -> str | None:
    """``path`` with its longest matching prefix (on a ``/`` boundary) replaced, or None."""
    path = _norm(path)
    for src, dst in sorted(pairs, key=lambda p: -len(p[0])):
        if src == "/":
            rest = path.lstrip("/")
        elif path == src:
            rest = ""
        elif path.startswith(src + "/"):
            rest = path[len(src) + 1:]
        else:
            continue
        return posixpath.join(dst, rest) if rest else dst
    return None


def volume_model_path(ckpt: Checkpoint, profile: str, model_volume: Any) -> str:
    """Where a Kubernetes pod sees ``ckpt``: /models + (its path inside the volume, mapped by
    ``model_volume.path_map``, less ``sub_path``). A one-line refusal when nothing covers it."""
    who = f"--model-from: job {ckpt.job_id} ({ckpt.job_name})"
    if not isinstance(model_volume, Mapping):
        raise HandoffError(f"{who}: profile {profile!r} has no model_volume, so its pods cannot see "
                           f"{ckpt.path}; add model_volume: {{host_path|nfs|pvc: ..., path_map: "
                           f"{{{posixpath.dirname(ckpt.directory)}: /}}}}")
    if "path_map" not in model_volume:
        raise HandoffError(f"{who}: profile {profile!r}'s model_volume has no path_map saying where "
                           f"{ckpt.path} appears inside it; add path_map: {{PREFIX: /PATH/IN/VOLUME}}")
    try:
        pairs = parse_path_map(model_volume["path_map"])
    except ValueError as exc:
        raise HandoffError(f"{who}: profile {profile!r}: model_volume.path_map: {exc}") from None
    inside = map_path(ckpt.path, pairs)
    if inside is None:
        covered = ", ".join(src for src, _ in pairs)
        raise HandoffError(f"{who}: profile {profile!r}'s model_volume.path_map covers {covered}, "
                           f"not {ckpt.path}; the two profiles share no storage for it")
    sub = model_volume.get("sub_path")
    if sub:
        root = _norm("/" + str(sub))
        rest = map_path(inside, [(root, "/")])
        if rest is None:
            raise HandoffError(f"{who}: {ckpt.path} is at {inside} in the volume, outside its "
                               f"sub_path {sub!r} that profile {profile!r} mounts")
        inside = rest
    return MODEL_DIR if inside == "/" else MODEL_DIR + inside


def local_model_path(ckpt: Checkpoint, profile: str, path_map: Any) -> str:
    """Where a local server sees ``ckpt``: the path itself for a local job, else through the
    local profile's ``path_map`` (a cluster's storage mounted on this machine)."""
    if path_map:
        try:
            pairs = parse_path_map(path_map)
        except ValueError as exc:
            raise HandoffError(f"--model-from: profile {profile!r}: path_map: {exc}") from None
        mapped = map_path(ckpt.path, pairs)
        if mapped is not None:
            return mapped
    if ckpt.tier == "local":
        return ckpt.path
    raise HandoffError(f"--model-from: job {ckpt.job_id} ({ckpt.job_name}) ran on {ckpt.tier} profile "
                       f"{ckpt.profile!r}; profile {profile!r} has no path_map covering {ckpt.path} "
                       "(add path_map: {CLUSTER_PREFIX: /WHERE/IT/IS/MOUNTED/HERE})")


def serving_model_path(ckpt: Checkpoint, serve_profile: Profile) -> str:
    """Where the serving tier of ``serve_profile`` (a config.Profile) sees ``ckpt``."""
    if serve_profile.tier == "kubernetes":
        return volume_model_path(ckpt, serve_profile.name, serve_profile.get("model_volume"))
    return local_model_path(ckpt, serve_profile.name, serve_profile.get("path_map"))


def substitute_model_path(body: str, path: str) -> str:
    """The serving cell's body with every ``{model_path}`` replaced (nothing else is formatted,
    so the body's other braces stay as written)."""
    return body.replace(MODEL_PATH_TOKEN, path)


# --- finding the job (reads the registry) -----------------------------------------------------


def find_job(ref: str, registry: RecordStore, user_ns: Mapping[str, Any] | None = None) -> JobRecord:
    """The registry record ``ref`` names: a notebook variable holding a Job (what ``--out``
    made), a job id (``42`` or ``profile/42``), or a job name (the newest of that name)."""
    value = (user_ns or {}).get(ref) if ref.isidentifier() else None
    record = getattr(value, "record", None)
    if record is not None and getattr(record, "kind", None) == WorkKind.JOB:
        try:
            return registry.get(record.key)
        except JobNotFound:
            return record
    if ref.isdigit() or "/" in ref:
        try:
            return registry.get(ref)
        except JobNotFound:
            pass
    named = registry.find_named(ref, kind=WorkKind.JOB)
    if named is not None:
        return named
    try:
        return registry.get(ref)  # a service of that name: checkpoint_of says it is not a job
    except JobNotFound:
        pass
    shown = ref.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate cannot be printed
    raise HandoffError(f"--model-from {shown}: no such job in the registry ({registry.path}); give a "
                       "job id, a job name, or a notebook variable holding a Job (--out)")


def resolve(ref: str, registry: RecordStore, user_ns: Mapping[str, Any] | None = None,
            refresh: Callable[[JobRecord], object] | None = None) -> Checkpoint:
    """``ref`` -> its completed job's checkpoint. ``refresh(record)`` asks the training tier once
    when the record is not final or has no checkpoint yet (then the registry is read again)."""
    record = find_job(ref, registry, user_ns)
    if refresh is not None and (record.state != "COMPLETED" or decode_detail(record.detail)[1] is None):
        try:
            refresh(record)
            record = registry.get(record.key)
        except TiersError:
            pass  # the recorded state stands; the refusal below says what it is
    return checkpoint_of(record)


# --- a sweep's tasks (pure; the I/O is in task_handoff.py) -------------------------------------


def split_task_ref(ref: str) -> tuple[str, int] | None:
    """``51_7``, ``hpc/51_7`` or ``NAME_7`` -> (the array's reference, task index 7); None when
    ``ref`` does not end in ``_`` and 1 to 7 ASCII digits after a non-empty reference."""
    if not isinstance(ref, str):
        return None
    base, sep, index = ref.rpartition("_")
    if not sep or not base or base.endswith("/") or not index.isascii() or not index.isdigit() \
            or len(index) > _MAX_TASK_DIGITS:
        return None
    return base, int(index)


def task_who(array: JobRecord, index: int) -> str:
    """``job 51_7 (lr-sweep)``: how a refusal names a task."""
    return f"job {array.job_id}_{index} ({array.name})"


def task_checkpoint(array: JobRecord, index: int, state: str | None,
                    listed: tuple[str, str | None] | None) -> Checkpoint:
    """Task ``index`` of the array record ``array`` -> its newest checkpoint, or the same
    one-line refusals as a job's (not COMPLETED, no checkpoint, unsafe path).

    ``state`` is the task's state now (None: the scheduler does not know the task), ``listed``
    its checkpoint directory and newest entry (None: its directory could not be found).
    """
    from dataclasses import replace

    plan = plan_of(array.spec)
    if plan is None or index not in plan.indices:
        tasks = plan.slurm_spec if plan is not None else "none"
        raise HandoffError(f"--model-from {array.job_id}_{index}: array {array.job_id} ({array.name}) "
                           f"has no task {index}; its tasks: {tasks}")
    _refuse_shared_dir(array, index)
    if state == "COMPLETED" and listed is None:
        raise HandoffError(f"--model-from: {task_who(array, index)} completed, but the scheduler no "
                           "longer says which job id it ran as, so its checkpoint directory "
                           "({workdir}/NAME/JOB_ID/checkpoints) is unknown")
    directory, newest = listed if listed is not None else ("", None)
    path = posixpath.join(directory, newest) if newest else None
    detail = encode_detail(directory, path)
    upload = task_upload_of(array.detail, index)  # --checkpoint-to: where the task's went
    if upload is not None and (upload.get("state") != "done" or upload.get("path") in (None, path)):
        detail = with_upload(detail, upload)
    record = replace(array, job_id=f"{array.job_id}_{index}", state=state or "UNKNOWN", detail=detail)
    return checkpoint_of(record)


def _refuse_shared_dir(array: JobRecord, index: int) -> None:
    """Refuse an array submitted with ``--checkpoint-dir``: its tasks share that directory, so
    no checkpoint in it is one task's."""
    shared = array.spec.get("checkpoint_dir") if isinstance(array.spec, Mapping) else None
    if shared:
        raise HandoffError(f"--model-from: {task_who(array, index)}: its array was submitted with "
                           f"--checkpoint-dir {shared}, which every task shares, so no checkpoint "
                           "there is one task's; serve a sweep's task from an array submitted "
                           "without --checkpoint-dir")


@dataclass(frozen=True)
class BestTask:
    """The task a whole array's ``--model-from`` chose, and the line that says why."""

    index: int
    checkpoint: Checkpoint
    line: str  # "model from array 51 task 7 (best loss 0.0123 at lr=3e-4 bs=64)"


def pick_best_task(array: JobRecord, states: Mapping[int, str], listed: Mapping[int, tuple[str, str | None]],
                   metrics: Mapping[int, tuple[str, float]]) -> BestTask:
    """The task of a whole array to serve: the best main-metric value (arrays.best_task, the
    ranking the array's summary line prints) among COMPLETED tasks with a checkpoint; a
    one-line refusal naming what is missing when no task qualifies."""
    plan = plan_of(array.spec)
    who = f"--model-from {array.job_id}: array {array.job_id} ({array.name})"
    if plan is None:
        raise HandoffError(f"{who} is not an array")
    _refuse_shared_dir(array, plan.indices[0])
    completed = [i for i in plan.indices if states.get(i) == "COMPLETED"]
    with_ckpt = [i for i in completed if (listed.get(i) or ("", None))[1] is not None]
    if not completed:
        raise HandoffError(f"{who} has no COMPLETED task ({_counts(plan.indices, states)}); a model is "
                           "served from a task that completed")
    if not with_ckpt:
        raise HandoffError(f"{who}: none of its {len(completed)} COMPLETED tasks left a checkpoint "
                           "(save one under $JT_CHECKPOINT_DIR)")
    best = best_task({i: metrics[i] for i in with_ckpt if i in metrics})
    if best is None:
        raise HandoffError(f"{who}: none of its {len(with_ckpt)} COMPLETED tasks with a checkpoint "
                           f"reported a metric to rank them by; name one task: --model-from "
                           f"{array.job_id}_{with_ckpt[0]}")
    index, key, value = best
    ckpt = task_checkpoint(array, index, "COMPLETED", listed[index])
    where = f" at {plan.label(index)}" if plan.sweep else ""
    line = f"model from array {array.job_id} task {index} (best {key} {format_value(value)}{where})"
    return BestTask(index, ckpt, line)


def _counts(indices: Sequence[int], states: Mapping[int, str]) -> str:
    counts: dict[str, int] = {}
    for i in indices:
        state = states.get(i, "UNKNOWN")
        counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
