"""Pure: the rows %tiers, `jupyter tiers` and the sidebar show, as plain data: one Item per job or
service (from its registry record and, when known, its status), the listing around them, a log
range, an action's result, a profile's summary. No I/O but reading this process's environment
(to say once that the notebook runs inside a Slurm job)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from ..batch.arrays import detail_counts, is_array
from ..batch.jobenv import enclosing_job
from ..batch.pending import explained_reason
from ..batch.status import ended_of, failure_reason, summary_line
from ..config.registry import JobRecord
from ..core.detail import entries
from ..core.model import JobState, JobStatus, ServiceState, ServiceStatus, WorkKind
from ..core.record import LIVE_CANARY
from ..data.checkpoint_upload import upload_item
from ..data.handoff import upload_of
from .viewstate.serve import summary_for

# --- plain data ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One job or service as a list row (the REST API's ``Item``)."""

    key: str
    id: str
    kind: WorkKind
    name: str
    profile: str
    tier: str
    state: str
    terminal: bool
    size: str
    where: str
    reason: str
    started: str | None
    elapsed_s: int | None
    summary: str
    submitted: str | None = None
    canary: int | None = None  # a service's live canary (--canary): its share in percent
    #: ``--checkpoint-to``: the upload on record (state, uri, sent, total, error), else None.
    upload: dict[str, Any] | None = None
    #: When ``elapsed_s`` was true (this server's epoch seconds): a list answer or a snapshot may
    #: carry a row computed minutes ago, and the sidebar ticks its age from here on the server's
    #: clock, never from when the row arrived (an age ran backwards that way).
    elapsed_at: float | None = None
    #: Its profile no longer exists (removed or renamed in tiers.yaml): nobody can check it, so no
    #: action but Forget (drop it from the registry) applies.
    orphan: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ProfileError:
    """A profile whose cluster could not be asked; its items keep their recorded state."""

    profile: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Listing:
    """What ``list_items`` found: items (newest first), their records, per-profile errors. A
    record of a profile that did not answer shows ``UNKNOWN (last seen ...)`` as its state once
    that is older than the profile's ``stale_after`` (for display; the registry keeps it)."""

    items: list[Item] = field(default_factory=list)
    records: list[JobRecord] = field(default_factory=list)
    errors: list[ProfileError] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"items": [i.to_json() for i in self.items], "errors": [e.to_json() for e in self.errors]}


@dataclass(frozen=True)
class LogRange:
    """Log lines from an offset: ``[rank or pod, text]`` pairs, the offset to ask next, and
    whether the log's current end was reached."""

    lines: list[tuple[int | str | None, str]]
    offset: int
    eof: bool

    def to_json(self) -> dict[str, Any]:
        return {"lines": [list(pair) for pair in self.lines], "offset": self.offset, "eof": self.eof}


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ProfileInfo:
    """A profile without anything secret: name, tier, host (or Kubernetes context), a
    human-readable ``where``, whether it is the default, the files it came from and its
    ``description`` (the profile's free text for people, "" when it has none)."""

    name: str
    tier: str
    host: str | None
    where: str
    default: bool
    sources: tuple[str, ...] = ()
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "tier": self.tier, "host": self.host, "where": self.where,
                "default": self.default, "description": self.description}


# --- pure item building ------------------------------------------------------------------------


_noted_inside = threading.Event()


def inside_job_note(environ: Mapping[str, str] | None = None) -> str | None:
    """"this notebook runs inside Slurm job N on node X" the first time it is asked in this
    process (the widget's cell and ``%tiers jobs`` say it once), else None; None outside a job."""
    job = enclosing_job(os.environ if environ is None else environ)
    if job is None or _noted_inside.is_set():
        return None
    _noted_inside.set()
    return job.sentence()


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="seconds")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def job_size(record: JobRecord) -> str:
    """``4 ranks on 2 nodes``; an array's task counts (``16 tasks: 14 COMPLETED, 2 FAILED``)."""
    if is_array(record):
        return detail_counts(record.detail) or "array"
    nodes = record.spec.get("nodes") if isinstance(record.spec, dict) else None
    text = _plural(record.world_size, "rank")
    if isinstance(nodes, int) and nodes > 0:
        text += f" on {_plural(nodes, 'node')}"
    return text


def item_from(record: JobRecord, status: JobStatus | ServiceStatus | None = None,
              now: float | None = None) -> Item:
    """The list row of a record, with the live details of ``status`` when one is at hand (pure)."""
    now = time.time() if now is None else now
    state: JobState | ServiceState
    reason, started, elapsed = "", None, None
    canary = _live_canary_percent(record)
    if record.kind == WorkKind.SERVICE:
        if isinstance(status, ServiceStatus):
            state = status.state
            size, where = f"{status.ready}/{status.desired} ready", status.endpoint or ""
            if status.canary is not None:
                size += f" + canary {status.canary.ready}/{status.canary.desired}"
                canary = status.canary.percent
            reason = status.reason or "" if state is not ServiceState.READY else ""
            if status.created_at is not None:
                started, elapsed = _iso(status.created_at), max(0, int(now - status.created_at))
            summary = summary_for(status, elapsed_s=now - record.submitted_at)
        else:
            known = record.state in ServiceState.__members__
            state = ServiceState(record.state) if known else ServiceState.UNKNOWN
            head, _, canary_part = (record.detail or "").partition(" + ")  # "9/9 + canary 1/1"
            size = f"{head} ready" + (f" + {canary_part}" if canary_part else "") if head else ""
            where = record.nodelist or ""
            summary = f"service {record.name} {state.value}" + (f" {record.detail}" if record.detail else "")
    elif isinstance(status, JobStatus):
        state = status.state
        size, where = job_size(record), status.nodelist or record.nodelist or ""
        pending = state in (JobState.PENDING, JobState.CONFIGURING)
        if (pending or state is JobState.UNKNOWN) and status.reason and status.reason != "None":
            # why pending (with what it means: some never pass); or an outage's "last seen ... ago"
            reason = explained_reason(state.value, status.reason)
        started, elapsed = (None if pending else status.start_time or None), status.elapsed_s
        if state.terminal:
            reason = failure_reason(status)  # "first failure: rank 3 (node2) exit 1", "TimeLimit"
            summary = summary_line(status)
        else:
            summary = f"job {record.job_id} {state.value}"
            summary += f" ({reason})" if reason else f" on {where}" if where else ""
    else:
        state = JobState.parse(record.state)
        size, where = job_size(record), record.nodelist or ""
        summary = f"job {record.job_id} {state.value}" + (f" on {where}" if where else "")
        if state.terminal and not is_array(record):  # what was recorded of its end
            reason, elapsed = ended_of(entries(record.detail))
            summary += f" — {reason}" if reason else ""
    if is_array(record):  # "array 51 RUNNING — 16 tasks: 4 RUNNING, 12 PENDING" (no log read here)
        summary = f"array {record.job_id} {state.value}" + (f" — {size}" if size else "")
    upload = None
    if record.kind == WorkKind.JOB and not is_array(record):
        upload = upload_item(upload_of(record.detail))
    return Item(key=record.key, id=record.job_id, kind=record.kind, name=record.name,
                profile=record.profile, tier=record.tier, state=state.value, terminal=state.terminal,
                size=size, where=where, reason=reason, started=started, elapsed_s=elapsed,
                summary=summary, submitted=_iso(record.submitted_at), canary=canary,
                upload=upload, elapsed_at=None if elapsed is None else round(now, 3))


def orphaned(item: Item) -> Item:
    """``item`` of a record whose profile no longer exists (pure): it cannot be asked, so a live
    state it recorded (READY 2/2, RUNNING) is not believed: UNKNOWN, saying why, its actions gone
    but Forget. A final state stays (it was final when recorded)."""
    why = f"profile {item.profile!r} no longer exists (removed or renamed in tiers.yaml)"
    if item.terminal:
        return replace(item, orphan=True, reason=why)
    return replace(item, state="UNKNOWN", reason=why, orphan=True, elapsed_s=None, elapsed_at=None,
                   summary=f"{item.kind} {item.id} UNKNOWN — {why}; %tiers forget {item.id} drops it")


def _live_canary_percent(record: JobRecord) -> int | None:
    live = record.spec.get(LIVE_CANARY) if isinstance(record.spec, dict) else None
    percent = live.get("percent") if isinstance(live, dict) else None
    return percent if isinstance(percent, int) and not isinstance(percent, bool) else None


def is_active(record: JobRecord) -> bool:
    """Whether a record may still change: an unfinished job or a service not deleted."""
    if record.kind == WorkKind.SERVICE:
        return record.state != ServiceState.DELETED.value
    return not JobState.parse(record.state).terminal


