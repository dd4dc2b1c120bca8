"""Pure translation of ServiceStatus / PodLogLine values into the ServeView's synced state and
the text view's lines (no I/O, no clock: callers pass ``now``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ...batch.requeue import marker_restart
from ...core.model import EventInfo, PodInfo, PodLogLine, ServiceState, ServiceStatus
from ...core.plaintext import strip_ansi
from ...core.timefmt import format_elapsed
from ...serving.status import CAUSE_LINES, canary_text, exit_detail, failed_pod, summary_line
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


def _gone_pod(obj: str, pods: Collection[str] | None) -> bool:
    """Whether an event's object is a pod the service no longer has (None: pods unknown)."""
    kind, _, name = obj.partition("/")
    return pods is not None and kind == "Pod" and name not in pods


def live_pod_names(status: ServiceStatus) -> set[str]:
    """Every pod the service has now: its own and its canary's."""
    return {p.name for p in status.pods} | set(status.canary.pods if status.canary is not None else ())


def event_rows(events: tuple[EventInfo, ...], now: float, pods: Collection[str] | None = None,
               state: ServiceState | None = None) -> list[list[Any]]:
    """Recent Warning events as [reason, object, message, count, age_s, gone], newest last,
    bounded. Repeats (the same reason, object and message) are one row with their counts added
    and the newest time. ``gone``: the event is about a pod the service no longer has (``pods``:
    the names of those it has); such events are dropped once the service is READY (history,
    not trouble) and otherwise kept, marked, for the front end to fade. The front end ticks
    the ages on from ``age_s``."""
    merged: dict[tuple[str, str, str], list[Any]] = {}
    for e in events:
        if e.type != "Warning":
            continue
        message = " ".join(e.message.split())
        key = (e.reason, e.object, message)
        row = merged.get(key)
        if row is None:
            merged[key] = [e.reason, e.object, message, e.count, e.at]
        else:
            row[3] += e.count
            if e.at is not None and (row[4] is None or e.at > row[4]):
                row[4] = e.at
    rows = sorted(merged.values(), key=lambda r: r[4] if r[4] is not None else float("-inf"))
    out = []
    for reason, obj, message, count, at in rows:
        gone = _gone_pod(obj, pods)
        if gone and state is ServiceState.READY:
            continue
        out.append([reason, obj, message, count, _age(at, now), gone])
    return out[-MAX_EVENTS:]


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
        # A deleted service has no endpoint (its Ingress's "pending: no address yet" is not news).
        "endpoint": "" if status.state is ServiceState.DELETED else status.endpoint or "",
        "age_s": _age(status.created_at, now),
        "desired": status.desired,
        "updated": status.updated,
        "ready": status.ready,
        "available": status.available,
        "pods": pod_rows(status, now),
        "events": event_rows(status.events, now, live_pod_names(status), status.state),
        "banner": banner_text(status),
        "settled": status.state.settled,
        "terminal": status.state.terminal,
        "canary": canary_text(status.canary) if status.canary is not None else "",
        # the header counts both revisions while a canary runs: [ready, desired] of the canary
        "canary_counts": ([status.canary.ready, status.canary.desired] if status.canary is not None else []),
    }


def order_batch(lines: list[PodLogLine]) -> list[PodLogLine]:
    """One batch of log lines with each pod's lines together (in the order the pods first
    appear) and in container-restart order, then in the order they came (their time): two
    crash-looping pods' tracebacks no longer interleave line by line, and a restart's lines
    (after its ``— restart N —`` marker) never land inside the run before it. Lines of an
    unknown restart keep their place after the known ones before them."""
    by_pod: dict[str, list[PodLogLine]] = {}
    for line in lines:
        by_pod.setdefault(line.pod, []).append(line)
    out: list[PodLogLine] = []
    for pod_lines in by_pod.values():
        known = -1
        keyed = []
        for i, line in enumerate(pod_lines):
            if line.restart is not None:
                known = max(known, line.restart)
            keyed.append(((line.restart if line.restart is not None else known), i, line))
        out.extend(line for _, _, line in sorted(keyed, key=lambda k: (k[0], k[1])))
    return out


def line_rows(lines: list[PodLogLine]) -> list[list[Any]]:
    """Pod log lines as [pod, text, is_error] rows for the front end (a restart marker is a
    row of its own: ``— restart N —``, which the front end draws as a divider)."""
    rows = []
    for ln in lines:
        text = strip_ansi(ln.text)  # vLLM colours its lines: [0;36m(APIServer pid=41)[0;0m
        rows.append([ln.pod, text, bool(ERROR_RE.search(text)) and marker_restart(text) is None])
    return rows


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


#: Pods whose last lines a view keeps (the first seen; a service has at most a few hundred).
MAX_TAIL_PODS = 256


class PodTails:
    """Each pod's last :data:`~jupyter_tiers.serving.status.CAUSE_LINES` lines as a view
    receives them (restart markers left out), so its summary can say why a failed pod failed."""

    def __init__(self, keep: int = CAUSE_LINES) -> None:
        self.keep = keep
        self._by_pod: dict[str, deque[str]] = {}
        self._last_pod: str | None = None

    def feed(self, lines: Iterable[PodLogLine]) -> None:
        for line in lines:
            if marker_restart(line.text) is not None:
                continue
            tail = self._by_pod.get(line.pod)
            if tail is None:
                if len(self._by_pod) >= MAX_TAIL_PODS:
                    continue
                tail = self._by_pod[line.pod] = deque(maxlen=self.keep)
            tail.append(line.text)
            self._last_pod = line.pod

    def lines_for(self, status: ServiceStatus) -> list[str]:
        """The failed pod's kept lines (serving.status.failed_pod), else the lines of the pod
        that wrote last."""
        pod = failed_pod(status)
        if pod is None or pod not in self._by_pod:
            pod = self._last_pod
        return list(self._by_pod.get(pod, ())) if pod is not None else []


def summary_for(status: ServiceStatus, elapsed_s: float | None = None,
                last_log_line: str | None = None, tails: PodTails | None = None) -> str:
    """The one-line summary (serving.status.summary_line, as at the end of a ``--wait``); with
    ``tails``, a failed service's summary quotes the line that explains the failure."""
    lines = tails.lines_for(status) if tails is not None and status.state is not ServiceState.READY else None
    return summary_line(status, elapsed_s=elapsed_s, last_log_line=last_log_line, log_lines=lines)


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
