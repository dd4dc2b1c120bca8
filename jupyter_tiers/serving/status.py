"""Pure: a service's status in words, the same on every serving tier: the one-line summary at the
end of a ``--wait`` (and in the text view and the REST list), and why one pod (replica) is not
ready. The Kubernetes parser and the local tier's status both describe pods with these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..core.errors import SpecError, TiersError
from ..core.model import TRACKS, CanaryStatus, PodInfo, ServiceState, ServiceStatus
from ..core.rootcause import RootCause, root_cause, strip_prefixes
from ..core.timefmt import format_elapsed

# Reasons that stop a rollout until someone changes something.
FAILING_WAITING = frozenset({
    "CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
    "CreateContainerConfigError", "CreateContainerError",
})
_EXITED = ("CrashLoopBackOff", "OOMKilled", "Error", "Completed", "Terminated")
_WORDS_SHOWN = (FAILING_WAITING - {"CrashLoopBackOff"}) | {"Unhealthy", "ContainerCreating"}
#: Phases of a pod that has stopped for good (an evicted pod stays Failed until deleted): not a
#: replica, not running, whatever its containers last said.
TERMINAL_PHASES = frozenset({"Failed", "Succeeded"})
#: How a failed init container's own line starts (k8s/fetch.py's fetch_failure): shown whatever
#: the reason (its back-off's CrashLoopBackOff, or Error the first time).
INIT_FAILURE = "init container "


def _first_sentence(message: str) -> str:
    """The scheduler's message without its preemption postscript."""
    head, sep, _ = message.partition(" preemption:")
    return head.strip() if sep else message.strip()


def terminal_words(message: str) -> str:
    """The first sentence of why a pod stopped for good, e.g. the kubelet's ``The node was low
    on resource: memory. Threshold quantity: ...`` -> ``The node was low on resource: memory``."""
    text = " ".join(message.split())
    head, sep, _ = text.partition(". ")
    return head if sep else text.rstrip(".")


def exit_detail(pod: PodInfo) -> str:
    """`` (exit 1, 3 restarts)`` after a reason that means the container exited (CrashLoopBackOff,
    OOMKilled, Error, ...): its exit code and the pod's restarts so far; "" otherwise."""
    if pod.reason not in _EXITED:
        return ""
    parts = [f"exit {pod.exit_code}"] if pod.exit_code is not None else []
    if pod.restarts > 0:
        parts.append(f"{pod.restarts} restart{'s' if pod.restarts != 1 else ''}")
    return f" ({', '.join(parts)})" if parts else ""


def describe_pod_problem(pod: PodInfo) -> str:
    """``pod NAME REASON (exit N): words`` — one line naming the pod and what is wrong with it."""
    text = f"pod {pod.name} {pod.reason or pod.phase}{exit_detail(pod)}"
    if pod.reason == "Unschedulable" and pod.message:
        text += f": {_first_sentence(pod.message)}"
    elif pod.phase in TERMINAL_PHASES and pod.message:  # Evicted: The node was low on resource: memory
        text += f": {terminal_words(pod.message)}"
    elif pod.message and (pod.reason in _WORDS_SHOWN or pod.message.startswith(INIT_FAILURE)):
        text += f": {pod.message}"  # an init container's failure (the model's fetch): whatever the reason
    return " ".join(text.split())


def canary_status(percent: int, status: ServiceStatus) -> CanaryStatus:
    """The canary's summary from the status of its own Deployment and pods (parse.service_status)."""
    return CanaryStatus(
        percent=percent, desired=status.desired, ready=status.available,
        restarts=sum(p.restarts for p in status.pods), state=status.state, reason=status.reason,
        pods=tuple(p.name for p in status.pods if p.phase not in TERMINAL_PHASES))


def with_canary(stable: ServiceStatus, percent: int, canary: ServiceStatus) -> ServiceStatus:
    """The stable revision's status with the canary's beside it: its counts stay the stable
    one's, ``canary`` sums up the canary's, and ``pods`` lists both revisions' pods, each marked
    with its track (the Service sends traffic to both)."""
    pods = tuple(replace(p, track="stable") for p in stable.pods) + tuple(
        replace(p, track="canary") for p in canary.pods)
    return replace(stable, pods=pods, canary=canary_status(percent, canary))


def check_track(track: str | None) -> str | None:
    """``track=`` as given: None (or "both") for any ready pod, else one of TRACKS; SpecError
    naming what is allowed otherwise."""
    if track is None or track == "both":
        return None
    if track not in TRACKS:
        raise SpecError("track", f"stable, canary or both (None), got {track!r}"[:120])
    return str(track)


def track_pods(status: ServiceStatus, track: str | None) -> list[PodInfo]:
    """The ready pods (not terminating) a request to ``track`` may go to. TiersError when a
    track is asked of a service that runs no canary's pods."""
    track = check_track(track)
    if track == "canary" and status.canary is None:
        raise TiersError(f"service {status.name} runs no canary (track='canary')")
    return [p for p in status.pods if p.ready and p.phase != "Terminating"
            and (track is None or status.canary is None or p.track == track)]


def canary_text(canary: CanaryStatus) -> str:
    """The canary's part of a summary line, e.g. ``canary 10 %: READY 1/1, 0 restarts``."""
    text = f"canary {canary.percent} %: {canary.state.value} {canary.ready}/{canary.desired}"
    text += f", {canary.restarts} restart{'' if canary.restarts == 1 else 's'}"
    if canary.reason and canary.state is not ServiceState.READY:
        text += f" ({canary.reason})"
    return text


#: Lines of a failed pod's log read for why it failed (its last ones).
CAUSE_LINES = 200
_MAX_QUOTED = 200
_SIZE = re.compile(r"(\d{1,9}(?:\.\d{1,3})?) ?([KMGT])i?B")
_SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _shm_suggestion(detail: str) -> str:
    """A --shm-size for a server that asked for ``detail``'s ``N MiB required``: twice that,
    in whole GiB, at least 1Gi."""
    m = _SIZE.search(detail)
    need = float(m[1]) * _SIZE_UNITS[m[2]] if m else 0.0
    return f"{max(1, -(-int(2 * need) // (1 << 30)))}Gi"


def cause_fix(cause: RootCause) -> str | None:
    """What to change for a known cause of a server's crash (``--shm-size`` for /dev/shm, ...),
    None for a cause not known."""
    if cause.kind == "shm":
        need = f" ({cause.detail})" if cause.detail else ""
        return (f"give the pods a larger /dev/shm{need}: --shm-size {_shm_suggestion(cause.detail)} "
                "(it counts against --memory)")
    if cause.kind == "cuda_oom":
        return ("the model does not fit the GPU: lower the server's context length or memory share "
                "(vLLM: --max-model-len, --gpu-memory-utilization), use a smaller or quantized model, "
                "or more --gpus with tensor parallelism")
    if cause.kind == "no_module":
        return (f"the image has no Python module {cause.detail!r}: use an --image that has it, or install "
                "it in the image")
    if cause.kind == "addr_in_use":
        port = f"port {cause.detail}" if cause.detail else "the port"
        return (f"{port} was taken inside the pod: start the server once, listening on {{port}} "
                "(the container port, also $PORT), and nothing else on it")
    if cause.kind == "no_command":
        return (f"the image has no command {cause.detail!r}: use an --image that has it, or give its full "
                "path")
    return None


def _quoted(text: str) -> str:
    line = " ".join(text.split())
    return line[:_MAX_QUOTED - 1] + "…" if len(line) > _MAX_QUOTED else line


def crash_words(lines: Sequence[str]) -> str:
    """What a failed pod's last ``lines`` say about why: ``cause: LINE — fix: ...`` for the line
    that explains the crash (core.rootcause: the first error of the last traceback chain,
    vLLM's per-process lines read apart, "see root cause above" skipped), with the fix of a known
    cause; else ``last line: LINE``; "" without lines."""
    cause = root_cause(lines)
    if cause is not None and cause.line:
        fix = cause_fix(cause)
        return f"cause: {_quoted(cause.line)}" + (f" — fix: {fix}" if fix else "")
    last = next((text for text in (strip_prefixes(line)[1] for line in reversed(lines)) if text.strip()), "")
    return f"last line: {_quoted(last)}" if last else ""


def failed_pod(status: ServiceStatus) -> str | None:
    """The pod whose log says why the service failed: the first one crash looping or stopped
    with an error, else None (every pod's)."""
    for pod in status.pods:
        if (pod.reason in _EXITED and pod.reason != "Completed") or pod.phase == "Failed":
            return pod.name
    return None


def summary_line(
    status: ServiceStatus, elapsed_s: float | None = None, last_log_line: str | None = None,
    log_lines: Sequence[str] | None = None,
) -> str:
    """One line for the end of a ``--wait`` or the text fallback, e.g.
    ``service llama-svc READY 2/2 in 00:01:12 — http://llama-svc.team-llm.svc:8000 (revision 3)``.

    For a service that is not ready, ``log_lines`` (the failed pod's last lines, oldest first)
    add why (:func:`crash_words`: the line that explains the crash, with its fix); without them,
    ``last_log_line`` is quoted as the last line.
    """
    state = status.state
    text = f"service {status.name} {state.value}"
    if state in (ServiceState.READY, ServiceState.DEGRADED, ServiceState.DEPLOYING, ServiceState.SCALED_DOWN):
        text += f" {status.available}/{status.desired}"
    if elapsed_s is not None and state is not ServiceState.DELETED:
        text += f" {'in' if state is ServiceState.READY else 'after'} {format_elapsed(elapsed_s)}"
    if status.reason and state is not ServiceState.READY:
        text += f": {status.reason}"
    elif status.message and state is ServiceState.UNKNOWN:
        text += f": {status.message}"
    if status.endpoint and state in (ServiceState.READY, ServiceState.DEGRADED):
        text += f" — {status.endpoint}"
    if status.revision and state not in (ServiceState.DELETED, ServiceState.FAILED):
        text += f" (revision {status.revision})"
    if status.canary is not None and state is not ServiceState.DELETED:
        text += f"; {canary_text(status.canary)}"
    if state is not ServiceState.READY:
        said = crash_words(log_lines) if log_lines else ""
        if not said and last_log_line and _quoted(last_log_line):
            said = f"last line: {_quoted(last_log_line)}"
        if said:
            text += f" — {said}"
    return text
