"""Kubernetes scenarios on the emulator: the API server restarted mid-rollout, a pod deleted by
hand, a node's pods evicted (memory pressure, or drained through the Eviction API). The workload
is a service whose replicas number their log lines; it is followed the way the service widget
follows it (``tier.watch(record, on_status=..., on_lines=...)``).

Invariants: every line of a pod that still runs at the end is seen exactly once and in order (the
kubelet's own log is the ground truth); a pod gone during the run was seen from its first line
without gap or repeat; once the faults stop, the followed status equals a fresh list (a new tier's
status); the watch sees a change made right after each restart (time to recover).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.core.model import PodLogLine, ServiceState, ServiceStatus
from jupyter_tiers.k8s.render import CONTAINER_NAME
from jupyter_tiers.k8s.tier import K8sTier
from jupyter_tiers.serving.status import TERMINAL_PHASES, summary_line
from tests.chaos import schedules
from tests.chaos.faults import delete_pod, evict_pod, node_pressure, restart_api_server
from tests.chaos.harness import Outcome, check_sequence, wait_until
from tests.k8s_emulator.emulator import Emulator

GUARD = 120.0  # bounds every wait (a broken watch fails the scenario instead of hanging it)
IMAGE = "python:3.11-slim"
MARK = "chaos.jupyter-tiers.io/mark"

# Each replica answers HTTP on its port (the probes), from {listen_after} s after it starts (a
# model loading: it is not ready before), and numbers its log lines from the start: "n <i> <pod>".
WRITER = """\
import http.server, os, threading, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
def serve():
    time.sleep({listen_after})
    http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["JT_PORT"])), H).serve_forever()
threading.Thread(target=serve, daemon=True).start()
name = os.environ["HOSTNAME"]
i = 0
while True:
    print("n", i, name, flush=True)
    i += 1
    time.sleep({delay})
"""


def emulator_options() -> dict[str, Any]:
    """The emulator as tests/k8s runs it: short crash back-off, fast probes and HPA resync."""
    return {"kubelet_options": {"backoff_base": 1.0, "probe_period": 0.25},
            "controller_options": {"hpa_sync": 1.0}}


def _key(status: ServiceStatus) -> tuple[Any, ...]:
    return (status.state, status.desired, status.ready,
            tuple(sorted((p.name, p.phase, p.ready, p.reason) for p in status.pods)))


def _replicas(status: ServiceStatus) -> list[Any]:
    """The pods that are replicas: not the ones stopped for good (an evicted pod stays Failed)."""
    return [p for p in status.pods if p.phase not in TERMINAL_PHASES]


class FollowedService:
    """A line-numbering service, followed as the widget follows it, with what it delivered."""

    def __init__(self, emulator: Emulator, namespace: str, name: str, *, replicas: int = 2,
                 rate: float = 20.0, stale_after: float = 300.0, listen_after: float = 0.0) -> None:
        self.emulator = emulator
        self.namespace = namespace
        self.profile = Profile(name="chaos", tier="kubernetes",
                               settings={"kubeconfig": str(emulator.kubeconfig_path),
                                         "namespace": namespace, "request_timeout": 10,
                                         "stale_after": stale_after},
                               defaults={"image": IMAGE}, sources=("chaos",))
        self.replicas = replicas
        self.tier = K8sTier(self.profile)
        self.lock = threading.Lock()
        self.lines: dict[str, list[int]] = {}
        self.first_line_at: dict[str, float] = {}
        self.statuses: list[ServiceStatus] = []
        self.marks: dict[str, float] = {}
        body = WRITER.format(delay=1.0 / rate, listen_after=listen_after)
        self.service = self.tier.apply(self.tier.make_spec(body, name=name, replicas=replicas, port=8000))
        self.record = self.service.record
        self.tier._watch_of_namespace().add_listener(self._on_event)
        self.sub = self.tier.watch(self.record, on_status=self._on_status, on_lines=self._on_lines)

    # --- what the follower delivers ----------------------------------------------------------
    def _on_status(self, status: ServiceStatus) -> None:
        with self.lock:
            self.statuses.append(status)

    def _on_lines(self, lines: list[PodLogLine]) -> None:
        now = time.monotonic()
        with self.lock:
            for line in lines:
                parts = line.text.split()
                if len(parts) == 3 and parts[0] == "n" and parts[1].isdigit():
                    self.lines.setdefault(line.pod, []).append(int(parts[1]))
                    self.first_line_at.setdefault(line.pod, now)

    def _on_event(self, kind: str, etype: str, obj: dict[str, Any]) -> None:
        if kind != "deployments" or not obj:
            return
        mark = ((obj.get("metadata") or {}).get("annotations") or {}).get(MARK)
        if mark:
            with self.lock:
                self.marks.setdefault(mark, time.monotonic())

    @property
    def last(self) -> ServiceStatus | None:
        with self.lock:
            return self.statuses[-1] if self.statuses else None

    # --- what the harness does ---------------------------------------------------------------
    def mark(self, value: str) -> None:
        """A change the watch must see: an annotation on the Deployment (no rollout)."""
        from kubernetes import client

        with self.emulator.api_client() as api:
            client.AppsV1Api(api).patch_namespaced_deployment(
                self.record.name, self.namespace, {"metadata": {"annotations": {MARK: value}}})

    def seen_mark(self, value: str) -> float | None:
        with self.lock:
            return self.marks.get(value)

    def rolling(self) -> bool:
        """Whether the Deployment's rollout is still under way (the emulator's store, read in
        this process: no API call, so it answers while the API server is down too)."""
        d = self.emulator.store.get("deployments", self.namespace, self.record.name)
        if d is None:
            return False
        status = d.get("status") or {}
        want = int(d["spec"].get("replicas", 1))
        return not (int(status.get("observedGeneration", 0)) >= int(d["metadata"].get("generation", 1))
                    and status.get("updatedReplicas") == want and status.get("replicas") == want
                    and status.get("availableReplicas") == want)

    def live_pods(self) -> list[str]:
        pods = self.emulator.store.list("pods", self.namespace,
                                        label_selector={"app.kubernetes.io/name": self.record.name})
        return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))

    def written(self, pod: str) -> int:
        """How many lines the pod's container has written so far (the kubelet's log)."""
        chunks = self.emulator.kubelet.read_log(self.namespace, pod, container=CONTAINER_NAME)
        text = b"".join(chunks or ()).decode(errors="replace")
        numbers = [int(p[1]) for p in (ln.split() for ln in text.splitlines())
                   if len(p) == 3 and p[0] == "n" and p[1].isdigit()]
        return max(numbers) + 1 if numbers else 0

    def fresh_status(self) -> ServiceStatus:
        tier = K8sTier(self.profile)
        try:
            return tier.service_status(self.record)
        finally:
            tier.close()

    def wait_ready(self, outcome: Outcome) -> bool:
        if wait_until(lambda: self.last and self.last.state is ServiceState.READY, GUARD, interval=0.2):
            return True
        outcome.wrong(f"the service never became READY before the faults: {self.last}")
        return False

    def settle(self, outcome: Outcome) -> None:
        """Wait for the rollout to finish and the followed status to equal a fresh list."""
        def settled() -> bool:
            last = self.last
            return bool(last and last.state is ServiceState.READY and last.ready == self.replicas
                        and len(_replicas(last)) == self.replicas and all(p.ready for p in _replicas(last))
                        and last.api_reachable and _key(last) == _key(self.fresh_status()))

        if not wait_until(settled, GUARD, interval=0.25):
            outcome.wrong(f"followed status {self.last} never equalled a fresh list "
                          f"{self.fresh_status()}")

    def check_logs(self, outcome: Outcome) -> None:
        """Every line of the pods that run now seen once, in order; the others without gaps."""
        live = set(self.live_pods())
        for pod in sorted(live):
            written = self.written(pod)

            def caught_up(pod: str = pod, written: int = written) -> bool:
                with self.lock:
                    return max(self.lines.get(pod, [-1])) >= written - 1

            wait_until(caught_up, GUARD, interval=0.1)
            self._count(outcome, pod, written)
        with self.lock:
            gone = [p for p in self.lines if p not in live]
        for pod in sorted(gone):
            with self.lock:
                seen = list(self.lines[pod])
            self._count(outcome, pod, max(seen) + 1)

    def _count(self, outcome: Outcome, pod: str, written: int) -> None:
        with self.lock:
            seen = list(self.lines.get(pod, []))
        result = check_sequence(seen, written)
        outcome.checked += min(len(seen), written)
        outcome.lost += result.lost
        outcome.duplicated += result.duplicated
        if result.out_of_order:
            outcome.wrong(f"pod {pod}: {result.out_of_order} lines out of order")
        if result.lost or result.duplicated:
            outcome.problems.append(f"pod {pod}: {result.lost} lost, {result.duplicated} duplicated "
                                    f"of {written} written")

    def close(self) -> None:
        self.tier.unwatch(self.sub)
        self.tier.close()


def _recovery(svc: FollowedService, outcome: Outcome, label: str, since: float) -> None:
    svc.mark(label)
    seen = wait_until(lambda: svc.seen_mark(label), GUARD)
    if seen is None:
        outcome.wrong(f"the watch never saw change {label} after the fault")
    else:
        outcome.recover_s.append(max(0.0, seen - since))


def api_server_restarts(emulator: Emulator, namespace: str, *, seed: int, restarts: int,
                        progress: Callable[[str], None] | None = None) -> Outcome:
    """The API server restarted ``restarts`` times, each a seeded moment after a rollout began,
    inside the rollout: its replicas listen K8S_LISTEN_AFTER_S after they start, so a rollout
    (one replica after another) lasts at least K8S_ROLLOUT_MIN_S. A restart that still finds the
    rollout finished (a machine busy enough to oversleep that long) is counted undelivered."""
    outcome = Outcome("k8s: API server restarted mid-rollout")
    svc = FollowedService(emulator, namespace, "chaos-api", replicas=schedules.K8S_REPLICAS,
                          listen_after=schedules.K8S_LISTEN_AFTER_S)
    try:
        if not svc.wait_ready(outcome):
            return outcome
        for i, fault in enumerate(schedules.k8s_api_restarts(seed, restarts)):
            svc.service.restart()
            time.sleep(fault.at)
            if svc.rolling():
                outcome.faults += 1
            else:  # restarted all the same: the run goes on as scheduled
                outcome.undelivered_fault(f"restart {i}: the rollout had ended {fault.at:.2f} s after "
                                          "it began")
            up = restart_api_server(emulator, fault.hold)
            _recovery(svc, outcome, f"restart-{i}", up)
            if progress:
                progress(f"  API server restart {i + 1}/{restarts}")
            time.sleep(1.1)  # the next rollout's restartedAt stamp differs (whole seconds)
        svc.settle(outcome)
        svc.check_logs(outcome)
    finally:
        svc.close()
    return outcome


def pod_deletions(emulator: Emulator, namespace: str, *, seed: int, deletions: int,
                  progress: Callable[[str], None] | None = None) -> Outcome:
    """A pod deleted by hand ``deletions`` times: the replacement is followed, its log read."""
    outcome = Outcome("k8s: pod deleted by hand")
    svc = FollowedService(emulator, namespace, "chaos-pod", replicas=schedules.K8S_REPLICAS)
    try:
        if not svc.wait_ready(outcome):
            return outcome
        for i, fault in enumerate(schedules.k8s_pod_deletions(seed, deletions)):
            before = set(svc.live_pods())
            ordered = sorted(before)
            victim = ordered[int(fault.kind) % len(ordered)]
            time.sleep(fault.at)
            with svc.lock:
                known = before | set(svc.first_line_at)  # earlier victims too
            at = time.monotonic()
            delete_pod(emulator, namespace, victim)
            outcome.faults += 1

            def replacement_logs(known: set[str] = known) -> float | None:
                with svc.lock:
                    return next((t for p, t in svc.first_line_at.items() if p not in known), None)

            first = wait_until(replacement_logs, GUARD)
            if first is None:
                outcome.wrong(f"no line of a replacement for {victim} was followed")
            else:
                outcome.recover_s.append(max(0.0, first - at))
            svc.settle(outcome)
            if progress:
                progress(f"  pod deletion {i + 1}/{deletions}")
        svc.check_logs(outcome)
    finally:
        svc.close()
    return outcome


def node_evictions(emulator: Emulator, namespace: str, *, seed: int, evictions: int,
                   progress: Callable[[str], None] | None = None) -> Outcome:
    """Every pod of the node evicted ``evictions`` times mid-serving: by the kubelet under memory
    pressure (even rounds: the pods stay Failed/Evicted) or drained through the Eviction API (odd
    rounds: the pods are deleted gracefully). The replacements are followed and their logs read,
    every line of an evicted pod seen once; the followed status names a memory eviction
    (``Evicted: The node was low on resource: memory``) and never counts an evicted pod as a
    replica or shows it running. Recovery is from the eviction to the service READY again."""
    outcome = Outcome("k8s: node's pods evicted")
    svc = FollowedService(emulator, namespace, "chaos-evict", replicas=schedules.K8S_REPLICAS)
    try:
        if not svc.wait_ready(outcome):
            return outcome
        for i, fault in enumerate(schedules.k8s_evictions(seed, evictions)):
            time.sleep(fault.at)
            with svc.lock:
                seen_before = len(svc.statuses)
            at = time.monotonic()
            pressure = fault.kind == "memory pressure"
            if pressure:
                victims = node_pressure(emulator, namespace)
            else:
                victims = svc.live_pods()
                for pod in victims:
                    evict_pod(emulator, namespace, pod)
            outcome.faults += 1
            if not victims:
                outcome.wrong(f"eviction {i}: no pod was evicted")
                continue

            def replaced(victims: list[str] = victims) -> ServiceStatus | None:
                last = svc.last
                names = {p.name for p in _replicas(last)} if last else set(victims)
                ready = bool(last and last.state is ServiceState.READY and not names & set(victims)
                             and last.ready == svc.replicas)
                return last if ready else None

            if wait_until(replaced, GUARD, interval=0.1) is None:
                outcome.wrong(f"eviction {i}: the replacements of {victims} never became READY: {svc.last}")
            else:
                outcome.recover_s.append(time.monotonic() - at)
            svc.settle(outcome)
            with svc.lock:
                after = svc.statuses[seen_before:]
            outcome.checked += len(after)
            _check_evicted_shown(outcome, i, after, victims, pressure)
            if progress:
                progress(f"  eviction {i + 1}/{evictions} ({'memory pressure' if pressure else 'drain'})")
        svc.check_logs(outcome)
    finally:
        svc.close()
    return outcome


def _check_evicted_shown(outcome: Outcome, i: int, statuses: list[ServiceStatus], victims: list[str],
                         pressure: bool) -> None:
    """An evicted pod is never a ready or running replica; under memory pressure the pod row and
    a summary line name the eviction."""
    for status in statuses:
        for pod in status.pods:
            if pod.name in victims and pod.phase in TERMINAL_PHASES and (pod.ready or pod.phase == "Running"):
                outcome.wrong(f"eviction {i}: evicted pod {pod.name} shown ready/running: {pod}")
        if status.ready > len(_replicas(status)):
            outcome.wrong(f"eviction {i}: {status.ready} ready but only {len(_replicas(status))} replicas")
    if not pressure:
        return
    final = statuses[-1] if statuses else None
    rows = {p.name: p for p in (final.pods if final else ())}
    for pod in victims:
        row = rows.get(pod)
        if row is None or (row.phase, row.reason) != ("Failed", "Evicted") or not (
            row.message or ""
        ).startswith("The node was low on resource: memory."):
            outcome.wrong(f"eviction {i}: pod {pod} not shown as evicted for memory: {row}")
    words = "Evicted: The node was low on resource: memory"
    if not any(words in summary_line(s) for s in statuses):
        outcome.wrong(f"eviction {i}: no summary named the eviction; last: "
                      f"{summary_line(statuses[-1]) if statuses else None}")


def api_down_longer_than_stale_after(emulator: Emulator, namespace: str, *, seed: int, outages: int,
                                     stale_after: float = 3.0,
                                     progress: Callable[[str], None] | None = None) -> Outcome:
    """The API server down ``outages`` times for longer than the profile's ``stale_after``: the
    followed status must turn UNKNOWN (last seen READY, the reconnect attempt in words) rather
    than stay a confident READY, the registry must keep READY, and READY must come back."""
    outcome = Outcome("k8s: API down > stale_after")
    svc = FollowedService(emulator, namespace, "chaos-stale", replicas=1, stale_after=stale_after)
    try:
        if not svc.wait_ready(outcome):
            return outcome
        for i, fault in enumerate(schedules.k8s_outages(seed, outages)):
            old = emulator.server
            old.stop()
            outcome.faults += 1

            def unknown() -> ServiceStatus | None:
                last = svc.last
                return last if last and last.state is ServiceState.UNKNOWN else None

            shown = wait_until(unknown, GUARD, interval=0.1)
            outcome.checked += 1
            if shown is None:
                outcome.wrong(f"outage {i}: still {svc.last} after stale_after")
            elif not (shown.reason or "").startswith("last seen READY ") or "reconnecting (attempt " \
                    not in (shown.message or ""):
                outcome.wrong(f"outage {i}: UNKNOWN without the last seen state or the reconnect "
                              f"attempt: {shown.reason!r} / {shown.message!r}")
            recorded = svc.tier.registry.get(svc.record.key).state
            if recorded != "READY":
                outcome.wrong(f"outage {i}: the registry says {recorded}, not the last seen READY")
            time.sleep(fault.hold)
            up = restart_api_server(emulator, 0.0)
            back = wait_until(lambda: svc.last and svc.last.state is ServiceState.READY
                              and svc.last.api_reachable, GUARD, interval=0.1)
            if back is None:
                outcome.wrong(f"outage {i}: READY never came back: {svc.last}")
            else:
                outcome.recover_s.append(time.monotonic() - up)
            if progress:
                progress(f"  API outage {i + 1}/{outages}")
    finally:
        svc.close()
    return outcome


def run_on_fresh_emulator(workdir: Path, fn: Callable[[Emulator, str], Outcome]) -> Outcome:
    """``fn(emulator, namespace)`` on an emulator of its own (bench/chaos.py)."""
    emu = Emulator(workdir, **emulator_options())
    emu.start()
    try:
        emu.create_namespace("chaos")
        return fn(emu, "chaos")
    finally:
        emu.stop()
