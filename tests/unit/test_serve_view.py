"""ServeView's Python side on a fake ServeTier: traits follow the status, lines arrive batched and
bounded, a reloaded page gets the buffer again, actions run on threads and every failure lands in
``message``, and the view unwatches when closed or when the service is deleted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.app.viewstate.serve import status_traits
from jupyter_tiers.core.model import EventInfo, PodInfo, PodLogLine, ServiceState, ServiceStatus
from jupyter_tiers.faces.widgets.serve_view import MAX_SCALE, ServeView
from tests.helpers import SentRecorder

from .test_serve_text import CRASH, Event, FakeServeTier, make_service, status


class RecordingView(SentRecorder, ServeView):
    """A ServeView that keeps the custom messages it would send to the browser."""

    def line_msgs(self) -> list[dict[str, Any]]:
        with self.sent_lock:
            return [m for m in self.sent if m.get("kind") == "lines"]

    def rows(self) -> list[list[Any]]:
        return [row for msg in self.line_msgs() for row in msg["lines"]]

    def front(self, content: Any) -> None:
        """A message from the browser."""
        self._on_front_end_msg(self, content, [])


def until(pred: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@pytest.fixture
def views() -> Iterator[list[RecordingView]]:
    made: list[RecordingView] = []
    yield made
    for view in made:
        view.close()


def open_view(tmp_path: Path, views: list[RecordingView],
              script: list[Event] | None = None) -> tuple[FakeServeTier, RecordingView]:
    tier, service = make_service(tmp_path, script)
    view = RecordingView(service)
    views.append(view)
    return tier, view


def test_every_status_trait_is_a_synced_trait() -> None:
    synced = set(ServeView.class_trait_names(sync=True))
    assert set(status_traits(ServiceStatus("x", ServiceState.READY), 0.0)) <= synced


def test_traits_follow_the_status(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.DEPLOYING)])
    assert (view.service_name, view.profile, view.namespace) == ("llama-svc", "serving", "team-llm")
    assert view.image == "vllm/vllm-openai:v0.6" and "kind: Deployment" in view.yaml
    assert view.state == "DEPLOYING" and not view.settled and view.summary == ""
    warning = EventInfo("Warning", "BackOff", "Back-off restarting failed container", "Pod/llama-svc-7c9f-x2",
                        count=4)
    tier.push(status(ServiceState.FAILED, pods=(CRASH,), events=(warning,), created_at=time.time() - 90,
                     reason="pod llama-svc-7c9f-x2 CrashLoopBackOff (exit 1)"))
    assert view.state == "FAILED" and view.settled and not view.terminal
    assert view.pods[0][0] == "llama-svc-7c9f-x2"
    assert view.pods[0][6] == (
        "CrashLoopBackOff (exit 1, 2 restarts): back-off 20s restarting failed container")
    assert view.events == [
        ["BackOff", "Pod/llama-svc-7c9f-x2", "Back-off restarting failed container", 4, -1, False]]
    assert 89 <= view.age_s <= 120
    assert view.reason == "pod llama-svc-7c9f-x2 CrashLoopBackOff (exit 1)"
    assert view.summary.startswith("service llama-svc FAILED after 00:00:0")
    assert view.endpoint == "http://llama-svc.team-llm.svc:8000" and view.revision == "1"
    assert repr(view) == "ServeView(service 'llama-svc')"  # no state: a saved notebook keeps it


def test_api_trouble_is_a_banner_until_it_clears(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    tier.push(status(ServiceState.READY, ready=2, api_reachable=False, message="connection refused"))
    assert view.banner == "Kubernetes API unreachable: connection refused"
    assert view.state == "READY"
    tier.push(status(ServiceState.READY, ready=2))
    assert view.banner == ""


def test_wait_ready(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.DEPLOYING)])
    assert view.wait_ready(timeout=0.05) is None
    threading.Timer(0.1, tier.push, [status(ServiceState.READY, ready=2)]).start()
    final = view.wait_ready(timeout=30)
    assert final is not None and final.state is ServiceState.READY
    assert view.summary.startswith("service llama-svc READY 2/2 in 00:00:0")
    assert view.summary.endswith("(revision 1)")
    # a scale starts a new rollout: not settled again until it is done, timed afresh
    tier.push(status(ServiceState.DEPLOYING, ready=2))
    assert view.wait_ready(timeout=0.05) is None and view.summary == ""
    tier.push(status(ServiceState.READY, ready=2))
    assert view.wait_ready(timeout=0) is not None


def test_already_ready_is_settled_and_not_timed(tmp_path: Path, views: list[RecordingView]) -> None:
    _tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    assert view.wait_ready(timeout=0) is not None
    assert view.summary == "service llama-svc READY 2/2 — http://llama-svc.team-llm.svc:8000 (revision 1)"


def test_just_applied_is_timed_even_when_the_first_status_is_ready(tmp_path: Path,
                                                                   views: list[RecordingView]) -> None:
    _tier, service = make_service(tmp_path, [status(ServiceState.READY, ready=2)])
    view = RecordingView(service, applied=True)
    views.append(view)
    assert view.wait_ready(timeout=0) is not None
    assert view.summary.startswith("service llama-svc READY 2/2 in 00:00:0"), view.summary


def test_lines_arrive_batched_with_their_pod(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.DEPLOYING)])
    for i in range(50):
        tier.push([PodLogLine(f"line {i * 10 + j}", f"llama-svc-7c9f-{'x2' if j % 2 else 'y7'}")
                   for j in range(10)])
    tier.push([PodLogLine("Traceback (most recent call last):", "llama-svc-7c9f-x2")])
    assert until(lambda: view.lines_received == 501)
    rows = view.rows()
    assert rows[0] == ["llama-svc-7c9f-y7", "line 0", False]
    assert rows[-1] == ["llama-svc-7c9f-x2", "Traceback (most recent call last):", True]
    assert len(view.line_msgs()) < 51  # batched, not one message per push


def test_a_failed_rollout_summary_quotes_the_last_line(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.DEPLOYING)])
    tier.push([PodLogLine("RuntimeError: CUDA out of memory", "llama-svc-7c9f-x2")])
    tier.push(status(ServiceState.FAILED, pods=(CRASH,), reason="pod llama-svc-7c9f-x2 OOMKilled"))
    assert "CUDA out of memory" in view.summary


def test_the_buffer_is_bounded_and_a_reloaded_page_gets_it_again(
        tmp_path: Path, views: list[RecordingView]) -> None:
    tier, service = make_service(tmp_path, [status(ServiceState.DEPLOYING)])
    view = RecordingView(service, log_limit=100)
    views.append(view)
    tier.push([PodLogLine(f"line {i}", "llama-svc-7c9f-x2") for i in range(250)])
    assert until(lambda: view.lines_received == 250)
    view.front({"kind": "hello"})
    reset = view.line_msgs()[-1]
    assert reset["reset"] is True and reset["skipped"] == 0
    assert [r[1] for r in reset["lines"]] == [f"line {i}" for i in range(150, 250)]


def test_a_page_asking_again_gets_each_line_once(tmp_path: Path, views: list[RecordingView]) -> None:
    """The page's hello while a batch is on its way out (a busy kernel; the page renders the
    widget as the pods' first lines arrive): the batch is neither shown twice (in the reset and
    again) nor lost under the reset."""
    _tier, view = open_view(tmp_path, views, [status(ServiceState.DEPLOYING)])
    in_send, go_on = threading.Event(), threading.Event()
    record = view.send

    def send(content: Any, buffers: Any = None) -> None:
        if content.get("kind") == "lines" and not content.get("reset") and not in_send.is_set():
            in_send.set()
            go_on.wait(30)
        record(content, buffers)

    view.send = send  # hold the batch up on its way out
    line = PodLogLine("serving on 0.0.0.0:8000", "llama-svc-7c9f-x2")
    batch = threading.Thread(target=view._send_lines, args=([line], 0))
    batch.start()
    assert in_send.wait(30)
    hello = threading.Thread(target=view.front, args=({"kind": "hello"},))
    hello.start()
    hello.join(0.5)  # time for a hello that does not wait for the batch to overtake it
    go_on.set()
    batch.join(30)
    hello.join(30)
    shown: list[list[Any]] = []
    for msg in view.line_msgs():  # as the page applies them: a reset replaces, a batch adds
        shown = list(msg["lines"]) if msg.get("reset") else shown + list(msg["lines"])
    assert [row[1] for row in shown] == ["serving on 0.0.0.0:8000"], view.line_msgs()


def test_scale_runs_on_a_thread_and_coalesces(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    tier.gate = threading.Event()
    view.front({"kind": "scale", "replicas": 3})
    assert view.scale_target == 3
    view.front({"kind": "scale", "replicas": 4})  # while the first is in flight
    view.front({"kind": "scale", "replicas": 5})
    assert view.scale_target == 5
    tier.gate.set()
    assert until(lambda: view._scale_wanted is None)
    assert tier.calls == [("scale", 3), ("scale", 5)]
    assert view.message == "scaling llama-svc to 5 replicas"
    tier.push(ServiceStatus("llama-svc", ServiceState.DEPLOYING, desired=5, ready=2))
    assert view.scale_target == -1  # the cluster has it now


@pytest.mark.parametrize("replicas", [-1, MAX_SCALE + 1, "3", 2.5, True, None])
def test_bad_scale_requests_are_refused(tmp_path: Path, views: list[RecordingView], replicas: Any) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    view.front({"kind": "scale", "replicas": replicas})
    assert view.message.startswith("scale: replicas must be a whole number")
    assert tier.calls == [] and view.scale_target == -1


def test_a_failed_scale_lands_in_message(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    tier.fail["scale"] = RuntimeError("403 Forbidden: cannot patch deployments/scale")
    view.front({"kind": "scale", "replicas": 0})
    assert until(lambda: view.message != "")
    assert view.message == "scale failed: 403 Forbidden: cannot patch deployments/scale"
    assert view.scale_target == -1


def test_restart_delete_and_port_forward(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    view.front({"kind": "restart"})
    assert until(lambda: view.busy == "" and view.message != "")
    assert view.message.startswith("restart requested")
    view.front({"kind": "port_forward"})
    assert until(lambda: view.forward_url != "")
    assert view.forward_url == "http://127.0.0.1:40123"
    assert view.message == "port-forward open: http://127.0.0.1:40123"
    view.front({"kind": "delete"})
    assert until(lambda: view.message == "service llama-svc deleted")
    assert [c[0] for c in tier.calls] == ["restart", "port_forward", "delete"]


def test_one_action_at_a_time(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    tier.gate = threading.Event()
    view.front({"kind": "restart"})
    assert view.busy == "restart"
    view.front({"kind": "delete"})
    assert view.message == "restart still in progress"
    tier.gate.set()
    assert until(lambda: view.busy == "")
    assert tier.calls == [("restart",)]


@pytest.mark.parametrize("action", ["restart", "delete", "port_forward"])
def test_action_failures_land_in_message(tmp_path: Path, views: list[RecordingView], action: str) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    tier.fail[action] = ConnectionError("API server unreachable")
    view.front({"kind": action})
    assert until(lambda: view.busy == "" and view.message != "")
    assert view.message == f"{action.replace('_', '-')} failed: API server unreachable"
    assert view.forward_url == ""


def test_odd_messages_are_ignored_and_nothing_escapes(tmp_path: Path, views: list[RecordingView],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    for content in (None, "scale", [1], {"kind": "rm -rf"}, {}):
        view.front(content)
    assert tier.calls == [] and view.message == ""

    def boom(_content: Any) -> None:
        raise ValueError("unexpected")

    monkeypatch.setattr(view, "_handle", boom)
    view.front({"kind": "hello"})
    assert view.message == "error: unexpected"


def test_close_unwatches(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    assert len(tier.subs) == 1
    view.close()
    assert tier.subs == {}
    view.close()  # twice is fine


def test_a_deleted_service_is_unwatched_and_refuses_actions(tmp_path: Path,
                                                            views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [status(ServiceState.READY, ready=2)])
    tier.push(ServiceStatus("llama-svc", ServiceState.DELETED, reason="no Deployment found"))
    assert view.terminal and view.state == "DELETED"
    assert until(lambda: tier.subs == {})
    view.front({"kind": "scale", "replicas": 1})
    assert view.message == "service llama-svc is deleted" and tier.calls == []
    final = view.wait_ready(timeout=0)
    assert final is not None and final.state is ServiceState.DELETED


def test_deleted_before_watch_returns(tmp_path: Path, views: list[RecordingView]) -> None:
    tier, view = open_view(tmp_path, views, [ServiceStatus("llama-svc", ServiceState.DELETED)])
    assert view.terminal and tier.subs == {}


def test_unknown_pods_and_old_revisions(tmp_path: Path, views: list[RecordingView]) -> None:
    old = PodInfo("llama-svc-aaaa-1", phase="Running", ready=True, started_at=time.time() - 600, revision="a")
    new = PodInfo("llama-svc-bbbb-1", phase="Pending", started_at=time.time() - 5, revision="b",
                  reason="Unschedulable", message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    _tier, view = open_view(tmp_path, views, [status(ServiceState.DEPLOYING, pods=(old, new))])
    assert [(r[0], r[7]) for r in view.pods] == [("llama-svc-bbbb-1", True), ("llama-svc-aaaa-1", False)]
    assert view.pods[0][6] == "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_view_no_page_shows_goes_quiet_and_a_page_that_comes_back_gets_it_all(
        tmp_path: Path, views: list[RecordingView]) -> None:
    """A browser that closed must not keep the kernel talking (every message counts as the
    server's activity, so a hub's culler would never stop it): after UNSEEN_AFTER_S without a
    page's "seen", no lines and no traits go out; "hello" from a page brings everything."""
    from jupyter_tiers.faces.widgets.view_common import SeenGate

    tier, view = open_view(tmp_path, views, [status(ServiceState.DEPLOYING)])
    clock = Clock()
    view._gate = SeenGate(after=150, clock=clock)
    view.front({"kind": "hello"})  # a page rendered it
    tier.push([PodLogLine("seen line", "llama-svc-7c9f-x2")])
    assert until(lambda: view.lines_received == 1) and view.rows()[-1][1] == "seen line"
    clock.now += 100
    view.front({"kind": "seen"})  # still on a page: nothing to resend
    sent = len(view.line_msgs())
    clock.now += 151  # the browser closed: no "seen" since
    tier.push(status(ServiceState.DEPLOYING, ready=1))
    tier.push([PodLogLine("unseen line", "llama-svc-7c9f-x2")])
    assert until(lambda: view.lines_received == 2)
    assert len(view.line_msgs()) == sent and view.ready == 0  # nothing went out
    view.front({"kind": "hello"})  # the page is back
    assert view.state == "DEPLOYING" and view.ready == 1
    reset = view.line_msgs()[-1]
    assert reset["reset"] is True and [r[1] for r in reset["lines"]] == ["seen line", "unseen line"]
    clock.now += 151  # gone again: a settled state still lands (wait_ready's summary is set)
    tier.push(status(ServiceState.READY, ready=2))
    assert view.state == "READY" and view.summary.startswith("service llama-svc READY 2/2")


def test_a_view_no_page_ever_showed_never_goes_quiet(tmp_path: Path, views: list[RecordingView]) -> None:
    from jupyter_tiers.faces.widgets.view_common import SeenGate

    tier, view = open_view(tmp_path, views, [status(ServiceState.DEPLOYING)])
    clock = Clock()
    view._gate = SeenGate(after=150, clock=clock)
    clock.now += 10_000  # headless (nbclient, the Python API): nobody to be missed
    tier.push(status(ServiceState.READY, ready=2))
    assert view.state == "READY"


def test_seen_gate() -> None:
    from jupyter_tiers.faces.widgets.view_common import SeenGate

    clock = Clock()
    gate = SeenGate(after=10, clock=clock)
    clock.now += 100
    assert not gate.paused  # never seen: never paused
    assert gate.seen() is False
    clock.now += 10
    assert not gate.paused
    clock.now += 0.5
    assert gate.paused and gate.paused  # stays paused
    assert gate.seen() is True and not gate.paused


@pytest.mark.parametrize(("value", "after"), [("", 150.0), ("30", 30.0), ("3", 10.0), ("1.5", 150.0),
                                              ("-5", 150.0), ("ten", 150.0)])
def test_an_admin_may_set_how_long_an_unseen_view_keeps_talking(
        monkeypatch: pytest.MonkeyPatch, value: str, after: float) -> None:
    from jupyter_tiers.faces.widgets.view_common import UNSEEN_ENV, SeenGate

    monkeypatch.setenv(UNSEEN_ENV, value)
    assert SeenGate().after == after
