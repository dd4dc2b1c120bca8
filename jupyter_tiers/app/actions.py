"""The service layer: what ``%tiers``, ``jupyter tiers`` and the server's REST API do, as plain
data (no printing), so the three faces never diverge.

Every function takes registry references (``id``, ``name`` or ``profile/id``) and returns
dataclasses or dicts. Errors are :class:`~jupyter_tiers.core.errors.TiersError` subclasses; the server
maps them to HTTP statuses (:func:`http_status`) and the commands to one-line messages.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..api import cached_tiers
from ..api import connect as api_connect
from ..batch.arrays import aggregate_status, counts_text, is_array, split_task_ref, task_index
from ..batch.history import HistoryRow, make_query, no_history_message
from ..batch.stacks import STACKS_WAIT, Stacks, stacks_data
from ..batch.status import summary_line
from ..config.profiles import load_config
from ..config.registry import JobRecord, Registry
from ..core.errors import (
    ApiError,
    ApiUnreachable,
    ConfigError,
    ControllerUnreachable,
    JobNotFound,
    OwnJob,
    SpecError,
    TiersError,
    Unsupported,
)
from ..core.model import JobState, JobStatus, ServiceStatus, WorkKind
from ..core.reachability import STALE_AFTER_S, ago, last_seen, stale_after
from ..data.files import file_group, in_display_order
from ..doctor import run_doctor
from ..engine.array_job import ArrayJob
from ..engine.handles import Handle, Job, Service
from ..engine.tier import CUT_PREFIX, BatchTier, ServeTier
from .items import (
    ActionResult,
    Item,
    Listing,
    LogRange,
    ProfileError,
    ProfileInfo,
    is_active,
    item_from,
    orphaned,
)
from .ownjob import check_cancel
from .viewstate import job as job_state
from .viewstate import schema as view_schema
from .viewstate import serve as serve_state
from .viewstate.array import task_row

if TYPE_CHECKING:
    from ..doctor.model import Report
    from ..engine.tier import BatchTier, Tier

#: Most log lines one ``log_range`` call returns.
MAX_LOG_LINES = 10_000
DEFAULT_LOG_LINES = 1000
#: Most replicas ``scale`` accepts (the Kubernetes tier's own bound).
MAX_REPLICAS = 1000


_counts_lock = threading.Lock()
#: Batched scheduler queries made by ``fetch_statuses`` in this process, per profile (the
#: server's ``GET stats`` reports them beside the shared watcher's own).
refresh_queries: dict[str, int] = {}


class WrongKind(TiersError):
    """The verb does not apply to this kind (cancel a service, scale a job): ``kind`` is what
    the reference is, ``verb`` what applies to it."""

    def __init__(self, message: str, kind: WorkKind, verb: str = "") -> None:
        super().__init__(message)
        self.kind, self.verb = kind, verb


class ProfileNotFound(TiersError):
    """No profile with that name."""


# --- registry and tiers ------------------------------------------------------------------------


def _connect(profile: str, kind: WorkKind = WorkKind.JOB) -> Tier:
    """The cached tier of ``profile`` for a kind of work."""
    if profile not in load_config().profiles:
        raise ProfileNotFound(f"no profile {profile!r}; known profiles: {', '.join(profile_names())}")
    return api_connect(profile, kind=kind)


def connect(profile: str, kind: WorkKind = WorkKind.JOB) -> Tier:
    """The cached tier of a configured ``profile`` for a kind of work; ProfileNotFound names
    the known profiles (the server's hub)."""
    return _connect(profile, kind)


def profile_names() -> list[str]:
    return sorted(load_config().profiles)


def recent_records(limit: int) -> list[JobRecord]:
    """The newest ``limit`` records of this user's registry, every profile and kind (what the
    server's hub scans)."""
    return Registry().list(limit=limit)


def record(ref: str, registry: Registry | None = None) -> JobRecord:
    """The registry record of ``ref`` (``id``, service name or ``profile/id``)."""
    return (registry or Registry()).get(ref)


def attach(ref: str, kind: WorkKind | None = None) -> Handle:
    """The Job or Service handle of ``ref``. With ``kind``, a record of the other kind is a
    :class:`WrongKind` error naming the verb that applies. ``ID_7`` is task 7 of array ID."""
    try:
        rec = record(ref)
    except JobNotFound:
        task = split_task_ref(ref)
        if task is None:
            raise
        array = record(task[0])
        if not is_array(array):
            raise
        _check_kind(ref, array.kind, kind)  # a task is a job of its own: cancel, never scale
        handle = _connect(array.profile, array.kind).handle(array)
        assert isinstance(handle, ArrayJob)  # an array record's handle (engine.tier.handle_for)
        return handle.task(task[1])
    _check_kind(ref, rec.kind, kind)
    return _connect(rec.profile, rec.kind).handle(rec)


def _check_kind(ref: str, actual: WorkKind, wanted: WorkKind | None) -> None:
    """A :class:`WrongKind` naming the verb that applies when ``actual`` is not ``wanted``."""
    if wanted is not None and actual != wanted:
        other = {WorkKind.JOB: "cancel", WorkKind.SERVICE: "delete"}[actual]
        raise WrongKind(f"{ref} is a {actual}, not a {wanted}; use {other}", actual, other)


def fetch_statuses(profile: str, records: Sequence[JobRecord]
                   ) -> dict[str, JobStatus | ServiceStatus]:
    """Ask one profile's tier about these records now: one batched query for jobs, the
    Deployment/pods/events per service. Keyed by registry key; states are recorded."""
    out: dict[str, JobStatus | ServiceStatus] = {}
    jobs = [r for r in records if r.kind == WorkKind.JOB]
    services = [r for r in records if r.kind == WorkKind.SERVICE]
    if jobs:
        tier = _connect(profile, WorkKind.JOB)
        if isinstance(tier, BatchTier):
            with _counts_lock:
                refresh_queries[profile] = refresh_queries.get(profile, 0) + 1
            by_id = tier.status(jobs)
            out.update({r.key: by_id[r.job_id] for r in jobs if r.job_id in by_id})
    if services:
        serve = _connect(profile, WorkKind.SERVICE)
        if isinstance(serve, ServeTier):
            for rec in services:
                out[rec.key] = serve.service_status(rec)
    return out


_last_answer: dict[str, float] = {}  # profile -> when its tier last answered list_items (this process)


def mark_stale(records: Sequence[JobRecord], items: Sequence[Item], limits: dict[str, float],
               answered: dict[str, float], now: float) -> tuple[list[JobRecord], list[Item]]:
    """Rows of the profiles in ``limits`` (those that did not answer now; profile -> its
    ``stale_after``) whose state was last confirmed longer ago than that become UNKNOWN, with
    the last seen state and when, never a confident RUNNING (pure). Confirmed: the record's
    last change, or ``answered[profile]``, the last time that profile's tier answered."""
    out_records, out_items = [], []
    for rec, item in zip(records, items, strict=True):
        limit = limits.get(rec.profile)
        seen = max(rec.updated_at, answered.get(rec.profile, 0.0))
        if limit is not None and not item.terminal and item.state != "UNKNOWN" and now - seen > limit:
            words = last_seen(item.state, seen, now)
            summary = f"{rec.kind} {rec.job_id} UNKNOWN — {words}"
            item = replace(item, state="UNKNOWN", reason=words, summary=summary)
            rec = replace(rec, state=f"UNKNOWN (last seen {rec.state} {ago(now - seen)} ago)")
        out_records.append(rec)
        out_items.append(item)
    return out_records, out_items


def _stale_after_of(profile: str) -> float:
    try:
        return stale_after(load_config().profiles[profile].settings)
    except Exception:  # an unknown or broken profile: its error is reported already
        return STALE_AFTER_S


def list_items(limit: int = 50, profile: str | None = None, kind: WorkKind | None = None,
               refresh: bool = True, registry: Registry | None = None) -> Listing:
    """Jobs and services, newest first. With ``refresh``, each profile's tier is asked once
    (batched) about its active items and their states are recorded; a profile that cannot be
    asked becomes an error and its items keep their recorded state."""
    registry = registry or Registry()
    records = registry.list(limit=limit, profile=profile, kind=kind)
    statuses: dict[str, JobStatus | ServiceStatus] = {}
    errors: list[ProfileError] = []
    gone = gone_profiles({r.profile for r in records})
    if refresh:
        by_profile: dict[str, list[JobRecord]] = {}
        for rec in records:
            if is_active(rec) and rec.profile not in gone:  # nobody to ask: orphaned below
                by_profile.setdefault(rec.profile, []).append(rec)
        for prof, recs in sorted(by_profile.items()):
            try:
                statuses.update(fetch_statuses(prof, recs))
                _last_answer[prof] = time.time()
            except (TiersError, ValueError) as exc:
                errors.append(ProfileError(prof, str(exc)))
        records = registry.list(limit=limit, profile=profile, kind=kind)
    now = time.time()
    items = [item_from(r, statuses.get(r.key), now) for r in records]
    items = [orphaned(i) if i.profile in gone else i for i in items]
    if errors:
        limits = {e.profile: _stale_after_of(e.profile) for e in errors}
        records, items = mark_stale(records, items, limits, _answered(limits), now)
    return Listing(items=items, records=records, errors=errors)


def gone_profiles(profiles: Iterable[str]) -> set[str]:
    """Which of ``profiles`` no longer exist in the configuration (an unreadable configuration
    says nothing: none, its error is reported where it is read)."""
    try:
        known = load_config().profiles
    except TiersError:
        return set()
    return {p for p in profiles if p not in known}


def forget(ref: str) -> ActionResult:
    """Drop a job or service from the registry, only when its profile no longer exists (nobody can
    check, cancel or delete it): anything else is refused, naming what to do instead."""
    rec = record(ref)
    if rec.profile not in gone_profiles([rec.profile]):
        verb = "delete it" if rec.kind == WorkKind.SERVICE else "cancel it"
        raise TiersError(f"{rec.kind} {rec.job_id}: its profile {rec.profile!r} exists, so jupyter-tiers "
                         f"still follows it; {verb} (or wait for its end) instead of forgetting it")
    Registry().remove(rec.key)
    return ActionResult(True, f"forgot {rec.kind} {rec.job_id} of the removed profile {rec.profile!r}")


def _answered(profiles: Iterable[str]) -> dict[str, float]:
    """When each profile's tier last answered in this process: a listing's, or its watcher's
    (a widget following a job for an hour saw the cluster answer, even with no listing since;
    without it, one failed listing showed that job UNKNOWN, "last seen RUNNING 1 h ago")."""
    answered = dict(_last_answer)
    wanted = set(profiles)
    for (name, _kind), tier in cached_tiers().items():
        at = tier.answered_at if isinstance(tier, BatchTier) and name in wanted else None
        if at is not None:
            answered[name] = max(answered.get(name, 0.0), at)
    return answered


def details(ref: str, status: JobStatus | ServiceStatus | None = None) -> dict[str, Any]:
    """An item plus ``view``: the same state the notebook widget syncs (JobView or ServeView
    traits), from ``status`` when the caller holds a current one (the server's shared watcher),
    else asked of the cluster now."""
    handle = attach(ref)
    rec = handle.record
    now = time.time()
    if isinstance(handle, ArrayJob):
        table, status = array_view(handle, status if isinstance(status, JobStatus) else None)
        return {**item_from(rec, status, now).to_json(), "view_kind": "array",
                "view": view_schema.checked(view_schema.ArrayViewState, table)}
    if status is None:
        status = handle.status()
    item = item_from(rec, status, now).to_json()
    if rec.kind == WorkKind.SERVICE:
        assert isinstance(status, ServiceStatus)
        spec = rec.spec or {}
        view: dict[str, Any] = {
            "service_name": rec.name, "profile": rec.profile, "tier_kind": rec.tier,
            "namespace": str(spec.get("namespace") or handle.tier.profile.get("namespace") or ""),
            "image": str(spec.get("image") or ""), "yaml": rec.script,
            "model_source": serve_state.model_note(spec),
            **serve_state.status_traits(status, now), "summary": item["summary"],
        }
    else:
        assert isinstance(status, JobStatus)
        summary = item["summary"]
        if status.state.terminal:
            why = end_reason(handle, status) if isinstance(handle, Job) else None
            if why:
                summary = summary_line(status, why=why)
        view = job_state.record_traits(rec, status, summary)
    schema = view_schema.ServeViewState if rec.kind == WorkKind.SERVICE else view_schema.JobViewState
    return {**item, "view_kind": rec.kind, "view": view_schema.checked(schema, view)}


_reasons_lock = threading.Lock()
#: (job key, state, exit code) -> why it ended (EndReason.line) or None, read once from the log's
#: end: the detail panel re-reads a job on every change.
_reasons: dict[tuple[str, str, int | None], str | None] = {}
_MAX_REASONS = 2_000


def used_line(job: Job, status: JobStatus | None = None) -> str | None:
    """What an ended job used of what it asked for, as the notebook widget's summary ends
    (viewstate/job.py ``used_line``)."""
    return job_state.used_line(job, status)


def end_reason(job: Job, status: JobStatus | None = None) -> str | None:
    """Why an ended job ended, with the fix (``why: … — fix: …``), or None for a job that
    completed, still runs, or ended in a way not recognised (batch.endreason). Read from the
    log's end once per job and end state; None when it cannot be read now."""
    if status is None:
        state = JobState.parse(job.record.state)
        if not state.terminal or state is JobState.COMPLETED:
            return None
        status = job.status()
    if not status.state.terminal or status.state is JobState.COMPLETED:
        return None
    key = (job.record.key, status.state.value, status.exit_code)
    with _reasons_lock:
        if key in _reasons:
            return _reasons[key]
    try:
        found = job.end_reason(status)
    except TiersError:  # not readable now: asked again next time
        return None
    line = found.line if found is not None else None
    with _reasons_lock:
        if len(_reasons) >= _MAX_REASONS:
            _reasons.clear()
        _reasons[key] = line
    return line


_results_lock = threading.Lock()
#: (array key, task, state, exit code) -> (failure, main metric) of an ended task, read once
#: from the end of its log: the detail panel re-reads an array on every change.
_task_results: dict[tuple[str, int, str, int | None], tuple[str | None, tuple[str, float] | None]] = {}
_MAX_TASK_RESULTS = 20_000


def array_view(job: ArrayJob, status: JobStatus | None = None) -> tuple[dict[str, Any], JobStatus]:
    """An array's ArrayTable state (the notebook's ArrayView table: ``tasks`` rows, ``counts``,
    ``state``, ``summary``, ...) and its status. With ``status`` (the server's shared watch of the
    array) the tasks' statuses come from that watch, else from one batched query now."""
    plan = job.plan
    tasks: dict[int, JobStatus] = {}
    if status is not None:
        tasks = {task_index(k): v for k, v in job.tier.watcher.array_tasks(job.record.key).items()}
    if len(tasks) < len(plan):
        tasks = job.task_statuses()
    failures: dict[int, str] = {}
    metrics: dict[int, tuple[str, float]] = {}
    unread: dict[int, JobStatus] = {}
    with _results_lock:
        for i, st in tasks.items():
            if not st.state.terminal:
                continue
            hit = _task_results.get((job.record.key, i, st.state.value, st.exit_code))
            if hit is None:
                unread[i] = st
                continue
            if hit[0] is not None:
                failures[i] = hit[0]
            if hit[1] is not None:
                metrics[i] = hit[1]
    if unread:
        new_failures, new_metrics = job.task_results(unread)
        failures.update(new_failures)
        metrics.update(new_metrics)
        with _results_lock:
            if len(_task_results) > _MAX_TASK_RESULTS:
                _task_results.clear()
            for i, st in unread.items():
                _task_results[(job.record.key, i, st.state.value, st.exit_code)] = (
                    new_failures.get(i), new_metrics.get(i))
    whole = aggregate_status(job.id, tasks)
    known = len(tasks) == len(plan)
    terminal = known and all(s.state.terminal for s in tasks.values())
    rows = [task_row(i, label, tasks.get(i), metrics.get(i), failures.get(i))
            for i, label in zip(plan.indices, plan.labels, strict=True)]
    view = {"array_id": job.id, "array_name": job.name, "profile": job.record.profile,
            "tier_kind": job.record.tier, "sweep": plan.sweep, "limit": plan.limit or 0,
            "state": whole.state.value, "counts": counts_text([s.state for s in tasks.values()]),
            "tasks": rows, "selected": -1, "terminal": terminal,
            # with --checkpoint-to, the tasks' checkpoint URIs (best first), as in the notebook
            "summary": job.summary_of(tasks, failures, metrics) if terminal else "",
            "cancel_requested": False, "message": ""}
    return view, whole


def check_limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_LOG_LINES
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise SpecError("limit", f"give a number of lines from 1 to {MAX_LOG_LINES}, got {limit!r}")
    return min(limit, MAX_LOG_LINES)


def log_range(ref: str, *, rank: int | None = None, pod: str | None = None, offset: int = 0,
              limit: int | None = None) -> LogRange:
    """Lines of the log from ``offset``, at most ``limit`` of them.

    For a job ``offset`` is a byte offset in the merged log (every rank's lines count, so a
    filtered read resumes exactly); for a service it counts lines of the merged pod log.
    """
    limit = check_limit(limit)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise SpecError("offset", f"give 0 or more, got {offset!r}")
    handle = attach(ref)
    rec = handle.record
    if rec.kind == WorkKind.JOB:
        if pod is not None:
            raise SpecError("pod", f"{ref} is a job; filter by rank, not pod")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
            raise SpecError("rank", f"give a rank from 0, got {rank!r}")
        tier = handle.tier
        assert isinstance(tier, BatchTier)
        return _job_log_range(tier, rec, rank, offset, limit)
    if rank is not None:
        raise SpecError("rank", f"{ref} is a service; filter by pod, not rank")
    assert isinstance(handle, Service)  # a record of kind WorkKind.SERVICE
    text = handle.logs(pod=pod)
    pairs: list[tuple[int | str | None, str]] = []
    for raw in text.splitlines():
        if raw.startswith(CUT_PREFIX):  # a bounded read left earlier output out: say so
            pairs.append((None, raw))
        elif pod is not None:
            pairs.append((pod, raw))
        else:
            name, _, rest = raw.partition(": ")
            pairs.append((name, rest))
    chunk = pairs[offset:offset + limit]
    end = min(len(pairs), offset + limit) if offset < len(pairs) else offset
    return LogRange(chunk, end, end >= len(pairs))


def _job_log_range(tier: BatchTier, rec: JobRecord, rank: int | None, offset: int, limit: int) -> LogRange:
    """A job's log range, read in chunks and stopped once ``limit`` lines are in hand and one
    more complete line shows the log goes on: the rest of a large log is never read. The next
    offset is then exactly the end of the last returned line; at the end of the log it is the
    end of its last complete line."""
    decoder = tier.log_decoder(offset)
    lines: list[tuple[int | str | None, str]] = []
    next_offset = offset
    with contextlib.closing(tier.log_chunks(rec, offset)) as chunks:
        for chunk in chunks:
            for line in decoder.feed(chunk):
                if len(lines) >= limit:
                    return LogRange(lines, next_offset, False)
                next_offset = line.end_offset
                if rank is None or line.rank == rank:
                    lines.append((line.rank, line.text))
    return LogRange(lines, decoder.offset, True)


def attach_job(ref: str) -> Job:
    """The Job handle of ``ref`` (an ArrayJob for an array, ``ID_7`` a task's); a service is a
    :class:`WrongKind` error naming the verb that applies."""
    handle = attach(ref, WorkKind.JOB)
    assert isinstance(handle, Job)  # attach checked the record's kind
    return handle


def attach_service(ref: str) -> Service:
    """The Service handle of ``ref``; a job is a :class:`WrongKind` error."""
    handle = attach(ref, WorkKind.SERVICE)
    assert isinstance(handle, Service)  # attach checked the record's kind
    return handle


def cancel(ref: str) -> ActionResult:
    """Cancel a job (a service is a :class:`WrongKind`; the Slurm job this notebook runs inside,
    :class:`OwnJob`, before any lookup)."""
    check_cancel(ref)
    return ActionResult(True, attach_job(ref).stop())


def stacks(ref: str, timeout: float = STACKS_WAIT) -> Stacks:
    """Every running rank's Python stacks of job ``ref`` (an array's task: ``ID_7``), taken at
    one moment and grouped (batch/stacks.py); ``str()`` of the result is the text to show."""
    if not 0 < timeout <= 600:
        raise ValueError(f"timeout {timeout}: give 1 to 600 seconds")
    return attach_job(ref).stacks(timeout=timeout)


def stacks_data_of(ref: str) -> dict[str, Any]:
    """:func:`stacks` as plain data (REST, the sidebar): ``text`` (what ``%tiers stacks`` prints),
    ``groups`` (``title``, ``ranks``, ``nodes``, ``threads``) and ``missing`` (``rank``, ``node``,
    ``why``)."""
    return stacks_data(stacks(ref))


def delete(ref: str) -> ActionResult:
    """Delete a service and everything its tier made (a job is a :class:`WrongKind`)."""
    return ActionResult(True, attach_service(ref).stop())


def check_replicas(replicas: Any) -> int:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= MAX_REPLICAS:
        raise SpecError("replicas", f"give a whole number from 0 to {MAX_REPLICAS}, got {replicas!r}")
    return replicas


def scale(ref: str, replicas: Any) -> ActionResult:
    """Set a service's replicas (0 to MAX_REPLICAS)."""
    replicas = check_replicas(replicas)
    service = attach_service(ref)
    service.scale(replicas)
    return ActionResult(True, f"service {service.name} scaled to {replicas}")


def restart(ref: str) -> ActionResult:
    """Roll every pod of a service."""
    service = attach_service(ref)
    service.restart()
    return ActionResult(True, f"service {service.name} restarting (rolling update)")


def promote(ref: str) -> ActionResult:
    """Make a service's canary (``--canary``) the whole service."""
    return ActionResult(True, attach_service(ref).promote())


def rollback(ref: str, revision: int | None = None) -> ActionResult:
    """Remove a service's canary (while one runs), else roll it back to ``revision`` of its
    history (default: the previous one)."""
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int) or revision < 1):
        raise SpecError("revision", f"give a whole number from 1, got {revision!r}")
    return ActionResult(True, attach_service(ref).rollback(revision))


def doctor(names: Sequence[str] = (), *, suggest_role: bool = False, compute: bool = False) -> Report:
    """``doctor [PROFILE...]``: the first-contact checks of the named profiles (default: the
    default profile) as a :class:`~jupyter_tiers.doctor.Report` (render it with
    :mod:`jupyter_tiers.doctor.render`). Read-only but for ``compute`` (a one-minute srun job on
    a Slurm profile); an unknown name is a ConfigError."""
    return run_doctor(load_config(), names, suggest_role=suggest_role, compute=compute)


@dataclass(frozen=True)
class History:
    """Jobs from a Slurm profile's accounting, newest first (``HistoryRow``: ``ours`` marks the
    jobs this registry submitted; the others are read-only). For one job asked with ``tail``,
    ``output`` is the end of its output file when this account can read it (else None)."""

    profile: str
    rows: list[HistoryRow]
    output: str | None = None
    output_path: str = ""  # the file ``output`` was read from (or could not be read from)

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "rows": [r.to_json() for r in self.rows], "output": self.output,
                "output_path": self.output_path}


def history(profile: str | None = None, *, days: Any = 7, user: Any = None, state: Any = None,
            limit: Any = 50, job: Any = None, tail: Any = None) -> History:
    """Job history of a Slurm profile (the default profile when None) from one sacct query:
    jobs active in the last ``days`` (1..366) of ``user`` (None: the login user; ``"all"``:
    everyone), in ``state`` (names like ``FAILED,TIMEOUT``); or one ``job`` (``123``,
    ``123_4``) whenever it ran, with the last ``tail`` lines of its output if it was submitted
    without jupyter-tiers and its output is readable. Values are checked before anything is
    asked; a cluster without accounting is an ``AccountingDisabled`` error."""
    query = make_query(days=days, user=user, states=state, limit=limit, job=job)
    if tail is not None and (isinstance(tail, bool) or not isinstance(tail, int) or not 0 <= tail <= 100_000):
        raise SpecError("tail", f"give 0 to 100000 lines, got {tail!r}"[:100])
    name = profile or load_config().default_profile
    tier = _connect(name, WorkKind.JOB)
    if not isinstance(tier, BatchTier):  # a Kubernetes profile serves, it runs no jobs
        raise SpecError("profile", no_history_message(name, tier.backend))
    try:
        rows = tier.history(query)
    except Unsupported as exc:  # a batch tier without accounting (local)
        raise SpecError("profile", str(exc)) from None
    output, path = None, ""
    if job is not None and tail is not None and len(rows) == 1 and not rows[0].ours:
        path, output = tier.output_tail(rows[0], tail)
    return History(name, rows, output, path)


def profiles() -> tuple[list[ProfileInfo], str]:
    """Every configured profile without secrets, and the default profile's name."""
    cfg = load_config()
    out = []
    for name, prof in sorted(cfg.profiles.items()):
        if prof.tier == "kubernetes":  # its cluster is the kubeconfig's, not this machine
            host = prof.get("context")
            where = host or "kubeconfig context"
            if prof.get("namespace"):
                where += f", namespace {prof.get('namespace')}"
        else:
            host = prof.get("host") or prof.get("context")
            where = host or "this machine"
        out.append(ProfileInfo(name=name, tier=prof.tier, host=str(host) if host else None, where=where,
                               default=name == cfg.default_profile, sources=tuple(prof.sources),
                               description=str(prof.get("description") or "").strip()))
    return out, cfg.default_profile


def http_status(exc: BaseException) -> int:
    """The HTTP status of an error from this module: 400 bad input, 404 unknown job or
    profile, 409 wrong verb for the kind or the notebook's own job, 502 cluster unreachable or refusing."""
    if isinstance(exc, (JobNotFound, ProfileNotFound)):
        return 404
    if isinstance(exc, (WrongKind, OwnJob)):
        return 409
    if isinstance(exc, (SpecError, ConfigError)):
        return 400
    if isinstance(exc, ApiError) and not isinstance(exc, ApiUnreachable) and exc.status == 404:
        return 404
    if isinstance(exc, (ControllerUnreachable, ApiError, TiersError)):
        return 502
    if isinstance(exc, ValueError):
        return 400
    return 500



def _job(ref: str) -> Job:
    handle = attach(ref, WorkKind.JOB)
    if not isinstance(handle, Job):
        raise WrongKind(f"{ref} is not a job", handle.kind, "delete")
    return handle


def job_files(ref: str, pattern: str = "*") -> list[dict[str, Any]]:
    """What job ``ref`` left in its job and checkpoint directories: ``{name, size, mtime,
    group}`` (files.py; the job's outputs first, jupyter-tiers' own files last), in one remote
    command."""
    return [{"name": f.name, "size": f.size, "mtime": f.mtime, "group": file_group(f.name)}
            for f in in_display_order(_job(ref).files(pattern))]


def job_file(ref: str, name: str) -> tuple[Any, Iterator[bytes]]:
    """One listed file of job ``ref``: its FileInfo and its bytes, streamed. JobNotFound if the
    job left no file of that name (only listed names are read)."""
    job = _job(ref)
    info = {f.name: f for f in job.tier.list_files(job.record)}.get(name)
    if info is None:
        raise JobNotFound(f"{ref} left no file named {name!r}")
    return info, job.tier.file_chunks(job.record, name, 0)
