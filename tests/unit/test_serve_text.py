"""ServiceTextView on a fake ServeTier: the header, state changes, pod problems, pod-prefixed log
lines and the summary once the service is settled.

``FakeServeTier`` (also used by test_serve_view.py) keeps everything in memory: ``push`` delivers
a status or a batch of lines to every subscriber, ``script`` is replayed to each new one."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.model import PodInfo, PodLogLine, ServeSpec, ServiceState, ServiceStatus
from jupyter_tiers.engine.handles import Service
from jupyter_tiers.engine.subscription import Subscription
from jupyter_tiers.engine.tier import ServeTier
from jupyter_tiers.faces.widgets.serve_text import ServiceTextView

Event = ServiceStatus | list[PodLogLine]


class FakeServeTier(ServeTier):
    backend = "kubernetes"

    def __init__(self, registry_path: Path, script: list[Event] | None = None) -> None:
        super().__init__(Profile("serving", "kubernetes", settings={"namespace": "team-llm"}),
                         Registry(registry_path))
        self.script = list(script or [])
        self.subs: dict[int, tuple[Subscription[ServiceStatus], Callable[[list[Any]], None] | None]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.fail: dict[str, Exception] = {}  # method name -> what it raises
        self.gate: threading.Event | None = None  # when set up, actions wait for it
        self._next = 0

    def _call(self, *call: Any) -> None:
        if self.gate is not None:
            assert self.gate.wait(30)
        self.calls.append(call)
        if call[0] in self.fail:
            raise self.fail[call[0]]

    def push(self, event: Event) -> None:
        for sub, on_lines in list(self.subs.values()):
            if isinstance(event, ServiceStatus):
                sub.deliver(event)
            elif on_lines:
                on_lines(event)

    # --- ServeTier ---------------------------------------------------------------------------
    def render(self, spec: ServeSpec) -> str:
        return f"kind: Deployment\nmetadata:\n  name: {spec.name}\n"

    def apply(self, spec: ServeSpec) -> Service:
        record = JobRecord(profile=self.name, tier=self.backend, job_id=spec.name, name=spec.name,
                           kind="service", script=self.render(spec),
                           spec={"image": spec.image, "replicas": spec.replicas})
        return Service(self, record)

    def service_status(self, record: JobRecord) -> ServiceStatus:
        return ServiceStatus(record.name, ServiceState.UNKNOWN)

    def service_logs(self, record: JobRecord, pod: str | None = None, tail: int | None = None) -> str:
        return ""

    def endpoint(self, record: JobRecord) -> str | None:
        return f"http://{record.name}.team-llm.svc:8000"

    def scale(self, record: JobRecord, replicas: int) -> None:
        self._call("scale", replicas)

    def restart(self, record: JobRecord) -> None:
        self._call("restart")

    def delete(self, record: JobRecord) -> None:
        self._call("delete")

    def port_forward(self, record: JobRecord, local_port: int = 0) -> str:
        self._call("port_forward")
        return "http://127.0.0.1:40123"

    def watch(self, record: JobRecord, *, on_status: Callable[[ServiceStatus], None] | None = None,
              on_lines: Callable[[list[Any]], None] | None = None) -> Subscription[ServiceStatus]:
        self._next += 1
        token = self._next
        sub = FakeSubscription(record, on_status, lambda: self.subs.pop(token, None))
        self.subs[token] = (sub, on_lines)
        for event in self.script:
            if isinstance(event, ServiceStatus):
                sub.deliver(event)
            elif on_lines:
                on_lines(event)
        return sub


class FakeSubscription(Subscription[ServiceStatus]):
    def __init__(self, record: JobRecord, on_status: Callable[[ServiceStatus], None] | None,
                 detach: Callable[[], object]) -> None:
        super().__init__(record, on_status)
        self.detach = detach

    def _detach(self) -> None:
        self.detach()


def make_service(tmp_path: Path, script: list[Event] | None = None) -> tuple[FakeServeTier, Service]:
    tier = FakeServeTier(tmp_path / "r.sqlite", script)
    service = tier.apply(ServeSpec("", name="llama-svc", image="vllm/vllm-openai:v0.6", replicas=2))
    return tier, service


def status(state: ServiceState, ready: int = 0, **kw: Any) -> ServiceStatus:
    return ServiceStatus("llama-svc", state, desired=2, updated=ready, ready=ready, available=ready,
                         revision="1", endpoint="http://llama-svc.team-llm.svc:8000", **kw)


CRASH = PodInfo("llama-svc-7c9f-x2", phase="Running", reason="CrashLoopBackOff", exit_code=1,
                restarts=2, message="back-off 20s restarting failed container")


def test_header(tmp_path: Path) -> None:
    _tier, service = make_service(tmp_path)
    assert ServiceTextView(service).header() == (
        "service llama-svc applied to serving (namespace team-llm): 2 replicas, image vllm/vllm-openai:v0.6")


def test_run_prints_states_pod_problems_lines_and_the_summary(tmp_path: Path) -> None:
    script: list[Event] = [
        status(ServiceState.DEPLOYING),
        [PodLogLine("loading weights", "llama-svc-7c9f-x2"),
         PodLogLine("loading weights", "llama-svc-7c9f-y7")],
        status(ServiceState.DEPLOYING),  # unchanged: not printed again
        status(ServiceState.DEPLOYING, pods=(CRASH,)),
        status(ServiceState.DEPLOYING, pods=(CRASH,)),  # the same problem: printed once
        status(ServiceState.DEPLOYING, ready=1),
        status(ServiceState.READY, ready=2),
        [PodLogLine("after the end", "llama-svc-7c9f-x2")],
    ]
    tier, service = make_service(tmp_path, script)
    out = io.StringIO()
    final = ServiceTextView(service, out).run(timeout=10)
    assert final is not None and final.state is ServiceState.READY
    assert out.getvalue().splitlines() == [
        ServiceTextView(service).header(),
        "[DEPLOYING 0/2]",
        "llama-svc-7c9f-x2: loading weights",
        "llama-svc-7c9f-y7: loading weights",
        "  pod llama-svc-7c9f-x2: CrashLoopBackOff (exit 1, 2 restarts): "
        "back-off 20s restarting failed container",
        "[DEPLOYING 1/2]",
        "[READY 2/2]",
        out.getvalue().splitlines()[-1],
    ]
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("service llama-svc READY 2/2 in 00:00:0")
    assert last.endswith("— http://llama-svc.team-llm.svc:8000 (revision 1)")
    assert tier.subs == {}  # unwatched


def test_a_failed_rollout_ends_with_the_reason_and_the_last_line(tmp_path: Path) -> None:
    script: list[Event] = [
        status(ServiceState.DEPLOYING),
        [PodLogLine("ModuleNotFoundError: No module named 'vllm'", "llama-svc-7c9f-x2")],
        status(ServiceState.FAILED, pods=(CRASH,), reason="pod llama-svc-7c9f-x2 CrashLoopBackOff (exit 1)"),
    ]
    _tier, service = make_service(tmp_path, script)
    out = io.StringIO()
    final = ServiceTextView(service, out).run(timeout=10)
    assert final is not None and final.state is ServiceState.FAILED
    lines = out.getvalue().splitlines()
    assert "[FAILED 0/2]" in lines
    assert lines[-1].startswith("service llama-svc FAILED")
    assert "CrashLoopBackOff (exit 1)" in lines[-1]
    assert "No module named 'vllm'" in lines[-1]


def test_already_ready_is_not_timed(tmp_path: Path) -> None:
    _tier, service = make_service(tmp_path, [status(ServiceState.READY, ready=2)])
    out = io.StringIO()
    ServiceTextView(service, out).run(timeout=10)
    assert out.getvalue().splitlines()[-1] == \
        "service llama-svc READY 2/2 — http://llama-svc.team-llm.svc:8000 (revision 1)"


def test_just_applied_is_timed_even_when_the_first_status_is_ready(tmp_path: Path) -> None:
    """`%%k8s_serve --wait` on a busy kernel may subscribe after the pods are up: the apply was a
    rollout all the same, and its summary says how long it took (CI once saw it without)."""
    _tier, service = make_service(tmp_path, [status(ServiceState.READY, ready=2)])
    out = io.StringIO()
    ServiceTextView(service, out, applied=True).run(timeout=10)
    assert out.getvalue().splitlines()[-1].startswith("service llama-svc READY 2/2 in 00:00:0")


def test_api_trouble_is_printed_once_per_change(tmp_path: Path) -> None:
    script: list[Event] = [
        status(ServiceState.DEPLOYING),
        status(ServiceState.DEPLOYING, api_reachable=False, message="connection refused"),
        status(ServiceState.DEPLOYING, api_reachable=False, message="connection refused"),
        status(ServiceState.SCALED_DOWN),
    ]
    _tier, service = make_service(tmp_path, script)
    out = io.StringIO()
    ServiceTextView(service, out).run(timeout=10)
    assert out.getvalue().count("! connection refused") == 1
    assert "[SCALED_DOWN 0/2]" in out.getvalue()


def test_timeout_returns_none_and_says_where_it_stood(tmp_path: Path) -> None:
    tier, service = make_service(tmp_path, [status(ServiceState.DEPLOYING)])
    out = io.StringIO()
    assert ServiceTextView(service, out).run(timeout=0.05) is None
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("[still not settled after 00:00:00: service llama-svc DEPLOYING 0/2")
    assert tier.subs == {}


def test_a_status_pushed_later_from_another_thread_ends_the_run(tmp_path: Path) -> None:
    tier, service = make_service(tmp_path, [status(ServiceState.DEPLOYING)])
    out = io.StringIO()
    result: list[ServiceStatus | None] = []
    runner = threading.Thread(target=lambda: result.append(ServiceTextView(service, out).run(timeout=30)))
    runner.start()
    deadline = time.monotonic() + 30
    while not tier.subs and time.monotonic() < deadline:
        time.sleep(0.01)
    tier.push(status(ServiceState.READY, ready=2))
    runner.join(30)
    assert result and result[0] is not None and result[0].state is ServiceState.READY
