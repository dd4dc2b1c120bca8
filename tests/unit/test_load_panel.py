"""ServeView's Load panel, Python side, on a fake ServeTier: refusals land in the panel's message
(the browser shows them as text), a run's updates stream as ``load`` messages, Stop and the
view's close stop the run, and a reloaded page gets the series again. The load generator itself
is replaced here (it is tested against a real local service in tests/local_serve)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from jupyter_tiers.faces.widgets.load_panel import LoadPanel, request_of
from jupyter_tiers.serving.loadplan import check_plan

from .test_serve_text import make_service
from .test_serve_view import RecordingView, until, views  # noqa: F401 - a fixture


class FakeRun:
    def __init__(self, plan: Any, on_update: Any) -> None:
        self.plan = plan
        self.on_update = on_update
        self.stops = 0
        self.done = False

    def stop(self, timeout: float | None = 5.0) -> None:
        self.stops += 1
        if not self.done:
            self.done = True
            self.on_update({"rows": [], "summary": {"sent": 3, "stopped": True}, "done": True})


def load_msgs(view: RecordingView) -> list[dict[str, Any]]:
    with view.sent_lock:
        return [m for m in view.sent if m.get("kind") == "load"]


def open_view(tmp_path: Path, views: list[RecordingView]) -> RecordingView:  # noqa: F811
    _tier, service = make_service(tmp_path)
    view = RecordingView(service)
    views.append(view)
    return view


def test_refusals_are_said_in_the_panel(tmp_path: Path, views: list[RecordingView]) -> None:  # noqa: F811
    view = open_view(tmp_path, views)
    view.front({"kind": "load_start", "rps": 500, "seconds": 10, "concurrency": 16, "method": "GET",
                "path": "/"})
    assert until(lambda: load_msgs(view) and load_msgs(view)[-1]["state"] == "error")
    last = load_msgs(view)[-1]
    assert last["message"] == ("load test not started: rps: 500 is over the load_limit_rps of profile "
                               "'serving' (200); ask for less, or raise load_limit_rps in tiers.yaml")
    assert last["limit"] == 200
    view.front({"kind": "load_start", "rps": 5, "seconds": 1, "concurrency": 1, "path": "http://evil/"})
    assert until(lambda: "request.path" in load_msgs(view)[-1]["message"])
    view.front({"kind": "load_start", "rps": "x", "seconds": None, "concurrency": 1})
    assert until(lambda: load_msgs(view)[-1]["message"] == "load test not started: rps: requests per second "
                                                             "above 0, got 'x'")


def test_a_run_streams_rows_stops_and_is_resent(tmp_path: Path, views: list[RecordingView],  # noqa: F811
                                                monkeypatch: Any) -> None:
    view = open_view(tmp_path, views)
    runs: list[FakeRun] = []
    started = threading.Event()

    def fake_start(rps: Any, seconds: Any, concurrency: Any, request: Any = None, **kw: Any) -> FakeRun:
        plan = check_plan(rps, seconds, concurrency, request, limit_rps=200)
        runs.append(FakeRun(plan, kw["on_update"]))
        started.set()
        return runs[-1]

    monkeypatch.setattr(view.service, "start_load_test", fake_start)
    view.front({"kind": "load_start", "rps": 20, "seconds": 60, "concurrency": 4, "method": "POST",
                "path": "/v1/x", "body": '{"a": 1}'})
    assert started.wait(30)
    assert until(lambda: load_msgs(view)[-1]["state"] == "running")
    run = runs[0]
    assert run.plan.request.method == "POST" and run.plan.request.body == b'{"a": 1}'
    assert ("Content-Type", "application/json") in run.plan.request.headers
    assert load_msgs(view)[-1]["message"] == "sending 20 requests/s for 60 s to POST /v1/x"
    row = {"t": 0.0, "sent": 20, "p50_ms": 1.0, "ready": 1}
    run.on_update({"rows": [row], "summary": {"sent": 20}, "done": False})
    assert load_msgs(view)[-1]["rows"] == [row]
    # A second Start while one runs is refused.
    view.front({"kind": "load_start", "rps": 20, "seconds": 60, "concurrency": 4})
    assert load_msgs(view)[-1]["message"] == "a load test is already running; Stop it first"
    assert len(runs) == 1
    view.front({"kind": "load_stop"})
    assert until(lambda: load_msgs(view)[-1]["state"] == "stopped")
    assert load_msgs(view)[-1]["message"].startswith("stopped: 3 of 3 sent")
    # A reloaded page: the rows so far, from the start.
    view.front({"kind": "hello"})
    assert until(lambda: load_msgs(view)[-1]["reset"] is True)
    assert load_msgs(view)[-1]["rows"] == [row] and load_msgs(view)[-1]["state"] == "stopped"


def test_closing_the_view_stops_the_run(tmp_path: Path, views: list[RecordingView],  # noqa: F811
                                        monkeypatch: Any) -> None:
    view = open_view(tmp_path, views)
    runs: list[FakeRun] = []

    def fake_start(rps: Any, seconds: Any, concurrency: Any, request: Any = None, **kw: Any) -> FakeRun:
        runs.append(FakeRun(check_plan(rps, seconds, concurrency, request, limit_rps=200), kw["on_update"]))
        return runs[-1]

    monkeypatch.setattr(view.service, "start_load_test", fake_start)
    view.front({"kind": "load_start", "rps": 1, "seconds": 60, "concurrency": 1})
    assert until(lambda: load_msgs(view) and load_msgs(view)[-1]["state"] == "running")
    view.close()
    assert runs[0].stops == 1 and runs[0].done


def test_a_run_that_ended_before_its_start_returned_keeps_its_end(tmp_path: Path, monkeypatch: Any) -> None:
    """A short run whose start thread was held up (a busy kernel) ends before that thread says
    "sending …": the panel keeps saying how it ended, not that it is sending."""
    _tier, service = make_service(tmp_path)
    sent: list[dict[str, Any]] = []
    panel = LoadPanel(service, sent.append)

    def fake_start(rps: Any, seconds: Any, concurrency: Any, request: Any = None, **kw: Any) -> FakeRun:
        run = FakeRun(check_plan(rps, seconds, concurrency, request, limit_rps=200), kw["on_update"])
        run.done = True
        run.on_update({"rows": [], "summary": {"sent": 60, "sent_rps": 20, "asked_rps": 20}, "done": True})
        return run

    monkeypatch.setattr(service, "start_load_test", fake_start)
    panel.state = "starting"  # as start() leaves it for its thread, which runs here
    panel._start({"rps": 20, "seconds": 3, "concurrency": 4})
    assert sent[-1]["state"] == "done", sent
    assert sent[-1]["message"].startswith("done: 60 of 60 sent at 20/s of 20 asked"), sent


def test_messages_leave_in_the_order_of_their_states(tmp_path: Path, monkeypatch: Any) -> None:
    """The start thread's "running" held up in its sending while the run ends: the end still goes
    out last, so the page does not stay on "running" after the run is over."""
    _tier, service = make_service(tmp_path)
    sent: list[dict[str, Any]] = []
    in_send, go_on = threading.Event(), threading.Event()

    def send(msg: dict[str, Any]) -> None:
        if msg["message"].startswith("sending"):
            in_send.set()
            go_on.wait(30)
        sent.append(msg)

    panel = LoadPanel(service, send)
    runs: list[FakeRun] = []

    def fake_start(rps: Any, seconds: Any, concurrency: Any, request: Any = None, **kw: Any) -> FakeRun:
        runs.append(FakeRun(check_plan(rps, seconds, concurrency, request, limit_rps=200), kw["on_update"]))
        return runs[-1]

    monkeypatch.setattr(service, "start_load_test", fake_start)
    panel.start({"rps": 20, "seconds": 3, "concurrency": 4})
    assert in_send.wait(30)
    end = threading.Thread(target=runs[0].on_update,
                           args=({"rows": [], "summary": {"sent": 60}, "done": True},))
    end.start()
    end.join(0.5)  # time for an end that does not wait for the held message to overtake it
    go_on.set()
    end.join(30)
    assert until(lambda: len(sent) >= 3), sent  # the start's reset, "sending …", the end
    assert [m["state"] for m in sent] == ["starting", "running", "done"], sent
    assert sent[-1]["message"].startswith("done: 60 of 60 sent"), sent


def test_request_of_the_panel_fields() -> None:
    assert request_of({}) == {"method": "GET", "path": "/"}
    assert request_of({"method": "PUT", "path": "/x", "body": "plain"}) == {
        "method": "PUT", "path": "/x", "body": "plain"}
    assert request_of({"body": "[1, 2]"})["headers"] == {"Content-Type": "application/json"}
    assert "headers" not in request_of({"body": "{not json"})


def test_fuzz_panel_messages_give_a_run_or_a_message(tmp_path: Path, views: list[RecordingView],  # noqa: F811
                                                     monkeypatch: Any) -> None:
    import random

    view = open_view(tmp_path, views)
    runs: list[FakeRun] = []

    def fake_start(rps: Any, seconds: Any, concurrency: Any, request: Any = None, **kw: Any) -> FakeRun:
        runs.append(FakeRun(check_plan(rps, seconds, concurrency, request, limit_rps=200), kw["on_update"]))
        return runs[-1]

    monkeypatch.setattr(view.service, "start_load_test", fake_start)
    rng = random.Random(20261205)
    values = [None, True, 0, 1, 16, 50, 199.9, 201, -3, 1e308, "50", "", "/", "/x?y=1", "POST", "get",
              "PATCH", "http://evil/", "<b>x</b>", "{\"a\": 1}", "[", [1], {"a": 1}, "\x00", "é"]
    good = {"rps": 20, "seconds": 5, "concurrency": 4, "method": "GET", "path": "/", "body": ""}
    for _ in range(300):
        msg: dict[str, Any] = {k: rng.choice(values) if rng.random() < 0.15 else v for k, v in good.items()
                               if rng.random() < 0.9}
        msg["kind"] = rng.choice(["load_start", "load_stop", "load_start", "bogus"])
        before = len(load_msgs(view))
        view.front(msg)
        if msg["kind"] == "load_start":
            def answered(before: int = before) -> bool:
                msgs = load_msgs(view)
                return len(msgs) > before and (msgs[-1]["state"] in ("error", "running")
                                               or "already running" in msgs[-1]["message"])

            assert until(answered)
            last = load_msgs(view)[-1]
            assert isinstance(last["message"], str) and "\n" not in last["message"]
            if last["state"] == "error":
                assert last["message"].startswith("load test not started: ")
        if runs and not runs[-1].done and rng.random() < 0.7:
            view.front({"kind": "load_stop"})
            assert until(lambda: runs[-1].done)
            assert until(lambda: load_msgs(view)[-1]["state"] == "stopped")
    assert len(runs) > 10 and view.message == ""


def test_drops_and_late_starts_are_results_beside_errors() -> None:
    """Issue 29 §2: a chat load test dropped 136 of 200 requests while the panel read "done ...
    errors 0 (0.0 %)". Drops and late starts are the test's failures, said as such with what to
    change; errors are the service's."""
    from jupyter_tiers.faces.widgets.load_panel import done_message
    from jupyter_tiers.serving.loadplan import findings

    s = {"scheduled": 200, "sent": 64, "answered": 64, "errors": 0, "dropped": 136, "late": 3,
         "sent_rps": 6.4, "asked_rps": 20, "p95_ms": 2400.0, "error_rate": 0.0,
         "measured": "ONE POD measured: chat-0 (the forward goes to one pod, not the Service)"}
    said = findings(s, concurrency=16)
    assert said[0] == ("TEST LIMIT: 136 of 200 requests (68.0 %) were dropped, never sent: all 16 requests "
                       "in flight were still waiting for answers. A failure of the test, not of the service: "
                       "raise concurrency to about 72 (rps x p95 latency, with room) or lower rps")
    assert said[1].startswith("TEST LIMIT: 3 of 64 sent requests (4.7 %) started late")
    assert len(said) == 2  # no service failure
    message = done_message(s)
    assert message.startswith("done: 64 of 200 sent at 6.4/s of 20 asked; dropped 136 (68.0 %), "
                              "late 3 (4.7 %), errors 0 (0.0 %) — the TEST fell short")
    assert "ONE POD measured: chat-0" in message
    failing = {**s, "dropped": 0, "late": 0, "errors": 5}
    assert findings(failing)[0].startswith("SERVICE: 5 of 64 sent requests (7.8 %) failed")
    assert "the SERVICE failed requests" in done_message(failing)
    assert findings({**s, "dropped": 0, "late": 0}) == []


def test_the_summary_text_puts_drops_first_and_says_what_was_measured() -> None:
    from tests.unit.widget_js import run_module

    out = run_module('import { jtLoadSummaryText } from "./load_panel.js";\n'
                     "console.log(JSON.stringify(jtLoadSummaryText({scheduled: 200, sent: 64, answered: 64, "
                     "errors: 0, error_rate: 0, dropped: 136, late: 0, sent_rps: 6.4, asked_rps: 20, "
                     "p50_ms: 900, p95_ms: 2400, p99_ms: 2600, findings: ['TEST LIMIT: 136 of 200', "
                     "'SERVICE: 1 of 64'], measured: 'every ready pod measured (2: a, b)'})));",
                     "load panel JS tests")
    assert out["line"].startswith("64 sent of 200 scheduled (6.4/s of 20 asked) · dropped 136 (68.0 %) · "
                                  "late 0 (0.0 %) · errors 0 (0.0 %)")
    assert out["findings"] == [{"text": "TEST LIMIT: 136 of 200", "kind": "test"},
                               {"text": "SERVICE: 1 of 64", "kind": "service"}]
    assert out["measured"] == "measured: every ready pod measured (2: a, b)"
