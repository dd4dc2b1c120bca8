"""Pure translation of ServiceStatus / PodLogLine values into the ServeView's synced state and
the text view's lines (no I/O, no clock: callers pass ``now``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import EventInfo, PodInfo, PodLogLine, ServiceState, ServiceStatus
from ..servestatus import canary_text, exit_detail, summary_line
from ..timefmt import format_elapsed
from .job import ERROR_RE

#: Warning events kept in the widget (newest last).
MAX_EVENTS = 20

def _age(started: float | None, now: float) -> int:
    return max(0, int(now - started)) if started is not None else -1


def pod_problem(pod: PodInfo) -> str:
    """Why a pod is not ready, in one line: ``CrashLoopBackOff (exit 1, 2 restarts)``,
    ``Unschedulable: 0/3 nodes are available: ...``; "" for a ready pod or one with no reason."""
    if pod.ready or not pod.reason:
        return ""
    text = pod.reason + exit_detail(pod)
    if pod.message:
        text += f": {pod.message}"
    return " ".join(text.split())


def current_revision(pods: tuple[PodInfo, ...]) -> str | None:
    """The pod-template hash of the current rollout: the one the newest pod belongs to (a
    rollout only creates pods of its new revision, old ones are only removed)."""
    dated = [p for p in pods if p.revision and p.phase != "Terminating"]
    if not dated:
        return None
    newest = max(dated, key=lambda p: (p.started_at or 0.0, p.name))
    return newest.revision


def pod_rows(status: ServiceStatus, now: float) -> list[list[Any]]:
    """One row per pod: [name, phase, ready, restarts, node, age_s, problem, current, track],
    the pods of the current revision first, then by track (stable, canary) and name. While a
    canary runs each track has its own current revision and ``track`` says which it is ("")."""
    current = {t: current_revision(tuple(p for p in status.pods if p.track == t))
               for t in {p.track for p in status.pods}}
    rows = [
        [p.name, p.phase, p.ready, p.restarts, p.node or "", _age(p.started_at, now), pod_problem(p),
         current[p.track] is None or p.revision == current[p.track], p.track]
        for p in status.pods
    ]
    rows.sort(key=lambda r: (not r[7], r[8] == "canary", r[0]))
    return rows


def event_rows(events: tuple[EventInfo, ...], now: float) -> list[list[Any]]:
    """Recent Warning events as [reason, object, message, count, age_s], newest last, bounded."""
    warnings = [e for e in events if e.type == "Warning"][-MAX_EVENTS:]
    return [[e.reason, e.object, " ".join(e.message.split()), e.count, _age(e.at, now)] for e in warnings]


def banner_text(status: ServiceStatus) -> str:
    """The sticky line about trouble talking to the cluster; "" when all is well."""
    if not status.api_reachable:
        return "Kubernetes API unreachable" + (f": {status.message}" if status.message else "")
    return status.message or ""


def status_traits(status: ServiceStatus, now: float) -> dict[str, Any]:
    """The ServeView traits that mirror a ServiceStatus at wall-clock time ``now``."""
    return {
        "state": status.state.value,
        "reason": status.reason or "",
        "revision": status.revision or "",
        "endpoint": status.endpoint or "",
        "age_s": _age(status.created_at, now),
        "desired": status.desired,
        "updated": status.updated,
        "ready": status.ready,
        "available": status.available,
        "pods": pod_rows(status, now),
        "events": event_rows(status.events, now),
        "banner": banner_text(status),
        "settled": status.state.settled,
        "terminal": status.state.terminal,
        "canary": canary_text(status.canary) if status.canary is not None else "",
        # the header counts both revisions while a canary runs: [ready, desired] of the canary
        "canary_counts": ([status.canary.ready, status.canary.desired] if status.canary is not None else []),
    }


def line_rows(lines: list[PodLogLine]) -> list[list[Any]]:
    """Pod log lines as [pod, text, is_error] rows for the front end."""
    return [[ln.pod, ln.text, bool(ERROR_RE.search(ln.text))] for ln in lines]


def state_label(status: ServiceStatus) -> str:
    """``DEPLOYING 0/2``, ``READY 2/2``, ``DELETED``: the text view's state marker; while a
    canary runs, both revisions counted: ``READY 2/2 (stable 1/1, canary 1/1)``."""
    if status.state in (ServiceState.DELETED, ServiceState.UNKNOWN):
        return status.state.value
    canary = status.canary
    if canary is None:
        return f"{status.state.value} {status.ready}/{status.desired}"
    return (f"{status.state.value} {status.ready + canary.ready}/{status.desired + canary.desired} "
            f"(stable {status.ready}/{status.desired}, canary {canary.ready}/{canary.desired})")


def format_line(line: PodLogLine) -> str:
    return f"{line.pod}: {line.text}"


def summary_for(status: ServiceStatus, elapsed_s: float | None = None,
                last_log_line: str | None = None) -> str:
    """The one-line summary (servestatus.summary_line, as at the end of a ``--wait``)."""
    return summary_line(status, elapsed_s=elapsed_s, last_log_line=last_log_line)


def model_note(spec: Mapping[str, Any] | None) -> str:
    """``model from local/3 (ft)`` for a service started with ``--model-from``, else ``""``."""
    source = (spec or {}).get("model_source")
    return f"model from {source}" if isinstance(source, str) and source else ""


def fallback_summary(status: ServiceStatus, elapsed_s: float | None = None) -> str:
    text = f"service {status.name} {state_label(status)}"
    if elapsed_s is not None:
        text += f" after {format_elapsed(elapsed_s)}"
    if status.reason and status.state is not ServiceState.READY:
        text += f": {status.reason}"
    if status.endpoint and status.state in (ServiceState.READY, ServiceState.DEGRADED):
        text += f" — {status.endpoint}"
    return text
