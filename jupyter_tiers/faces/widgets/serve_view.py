"""ServeView: the live widget of one service (header, rollout bar, pods, Warning events, merged
pod log, controls). The front end (serve_view.js) sets everything from the cluster with
textContent, never as HTML."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

from ...app.viewstate.serve import PodTails, line_rows, model_note, order_batch, status_traits, summary_for
from ...core.model import PodLogLine, ServiceStatus
from ...engine.handles import Service
from ...engine.subscription import Subscription
from .batcher import LineBatcher
from .load_panel import LoadPanel
from .try_panel import TryPanel
from .view_common import SeenGate, view_css, view_module

_HERE = Path(__file__).parent

#: The most replicas the Scale buttons ask for (a typo guard, not a cluster limit).
MAX_SCALE = 100


class ServeView(anywidget.AnyWidget):
    """Live view of a Service, following its tier's watch until closed (or the service is
    deleted).

    Pod log lines travel as custom messages in batches (at most 8 a second); the front end keeps
    at most ``log_limit`` lines, and the kernel keeps the same number for a reloaded page.
    Actions (scale, restart, delete, port-forward) run on threads; their outcome, good or bad,
    lands in ``message``. The Try it panel's requests and chats run in the kernel too
    (try_panel.py), through the service's forward.
    """

    # serve_view.js with the modules it imports (Try it, Load panel), linked in one.
    _esm = view_module("serve_view.js")
    # The shared look (.jt-job, header, controls, log) is JobView's; serve_view.css adds the rest.
    _css = view_css("job_view.css", "serve_view.css", "try_panel.css", "load_panel.css", "vendor/uplot.css")

    # who
    service_name = t.Unicode("").tag(sync=True)
    profile = t.Unicode("").tag(sync=True)
    namespace = t.Unicode("").tag(sync=True)
    tier_kind = t.Unicode("").tag(sync=True)
    image = t.Unicode("").tag(sync=True)
    model_source = t.Unicode("").tag(sync=True)  # "model from profile/id (name)" with --model-from
    yaml = t.Unicode("").tag(sync=True)
    # from the cluster (viewstate.serve.status_traits)
    state = t.Unicode("UNKNOWN").tag(sync=True)
    reason = t.Unicode("").tag(sync=True)
    revision = t.Unicode("").tag(sync=True)
    endpoint = t.Unicode("").tag(sync=True)
    age_s = t.Int(-1).tag(sync=True)
    desired = t.Int(0).tag(sync=True)
    updated = t.Int(0).tag(sync=True)
    ready = t.Int(0).tag(sync=True)
    available = t.Int(0).tag(sync=True)
    pods: t.List[list[Any]] = t.List().tag(sync=True)
    events: t.List[list[Any]] = t.List().tag(sync=True)
    banner = t.Unicode("").tag(sync=True)
    settled = t.Bool(False).tag(sync=True)
    terminal = t.Bool(False).tag(sync=True)
    summary = t.Unicode("").tag(sync=True)
    canary = t.Unicode("").tag(sync=True)  # "canary 10 %: READY 1/1, 0 restarts" while one runs
    canary_counts: t.List[int] = t.List().tag(sync=True)  # [ready, desired] of the canary while one runs
    # actions
    message = t.Unicode("").tag(sync=True)
    busy = t.Unicode("").tag(sync=True)  # the action in progress: scale, restart, delete, port_forward
    scale_target = t.Int(-1).tag(sync=True)  # replicas asked for and not yet seen as desired
    forward_url = t.Unicode("").tag(sync=True)
    # Try it (try_panel.py): is the server OpenAI-compatible ("yes", "no", "" not asked), its models
    try_openai = t.Unicode("").tag(sync=True)
    try_models: t.List[str] = t.List().tag(sync=True)
    try_note = t.Unicode("").tag(sync=True)
    # log
    log_limit = t.Int(5000).tag(sync=True)
    lines_received = t.Int(0).tag(sync=True)

    def __init__(self, service: Service, *, applied: bool = False, **kwargs: Any) -> None:
        """``applied``: the service was applied just now, so its first settled state ends a
        rollout and the summary says how long it took, even when the watch's first status is
        already READY (a fast rollout, or a busy kernel that subscribed late)."""
        record = service.record
        spec = record.spec or {}
        super().__init__(
            service_name=service.name,
            profile=record.profile,
            namespace=str(spec.get("namespace") or service.tier.profile.get("namespace") or ""),
            tier_kind=record.tier,
            image=str(spec.get("image") or ""),
            model_source=model_note(spec),
            yaml=service.yaml,
            **kwargs,
        )
        self.service = service
        self.final_status: ServiceStatus | None = None
        self.last_status: ServiceStatus | None = None
        self._cond = threading.Condition()
        self._lock = threading.Lock()
        self._rollout_since: float | None = time.monotonic()  # when the rollout being timed began
        self._unsettled_seen = applied
        self._tails = PodTails()  # each pod's last lines: why a failed one failed
        self._scale_wanted: int | None = None
        self._buffer: collections.deque[list[Any]] = collections.deque(maxlen=self.log_limit)
        self._send_lock = threading.Lock()  # a reset (hello) and the batches in order
        self._batcher: LineBatcher[PodLogLine] = LineBatcher(self._send_lines)
        self._sub: Subscription[ServiceStatus] | None = None
        self._closed = False
        self.load_panel = LoadPanel(service, self.send)
        self.try_panel = TryPanel(self)
        self._gate = SeenGate()  # quiet while no page shows the view (view_common.py)
        self._held: dict[str, Any] | None = None  # traits not sent while unseen
        self.on_msg(self._on_front_end_msg)
        self._sub = service.watch(self._on_status, on_lines=self._on_lines)
        if self.terminal:  # deleted already, seen before ``watch`` returned
            self._unsubscribe()

    # --- from the tier's watch (background threads) ----------------------------------------
    def _on_status(self, status: ServiceStatus) -> None:
        now = time.monotonic()
        # All under the condition, so wait_ready() returns with the traits (summary) already set.
        with self._cond:
            elapsed: float | None = None
            if not status.state.settled:
                if self._rollout_since is None:
                    self._rollout_since = now  # a new rollout after a settled state: time it afresh
                self._unsettled_seen = True
            else:
                if self._unsettled_seen and self._rollout_since is not None:  # else: settled from
                    elapsed = now - self._rollout_since                     # the start, not timed
                self._rollout_since = None
                self._unsettled_seen = False
            traits = status_traits(status, time.time())
            traits["summary"] = (summary_for(status, elapsed, tails=self._tails)
                                 + (f" — {self.model_source}" if self.model_source else "")
                                 if status.state.settled else "")
            if self.scale_target >= 0 and status.desired == self.scale_target and self._scale_wanted is None:
                traits["scale_target"] = -1
            if self._gate.paused and not status.state.settled:  # unseen: kept for a page
                self._held = {**(self._held or {}), **traits}
            else:
                self._show(traits)
            if status.state.settled:
                self.final_status = status
            self.last_status = status
            self._cond.notify_all()
        if status.state.terminal:
            self.load_panel.stop()  # a deleted service: its load test has nothing left to load
            threading.Thread(target=self._unsubscribe, name="jt-serve-unwatch", daemon=True).start()

    def _show(self, traits: dict[str, Any]) -> None:
        with self.hold_sync():
            for key, value in traits.items():
                setattr(self, key, value)
        self._held = None

    def _on_lines(self, lines: list[PodLogLine]) -> None:
        with self._cond:
            self._tails.feed(lines)
        self._batcher.add(lines)

    def _send_lines(self, lines: list[PodLogLine], skipped: int) -> None:
        rows = line_rows(order_batch(lines))
        # Kept and sent in one go: a reloaded page's reset cannot come between (a batch in the
        # reset and then again, or sent before the reset and wiped by it).
        with self._send_lock:
            self._buffer.extend(rows)
            self.lines_received += len(lines) + skipped
            if not self._gate.paused:
                self.send({"kind": "lines", "lines": rows, "skipped": skipped})

    # --- from the front end ------------------------------------------------------------------
    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        try:
            self._handle(content)
        except Exception as exc:  # nothing may escape into the comm machinery
            self.message = f"error: {exc}"

    def _handle(self, content: Any) -> None:
        if not isinstance(content, dict):
            return
        if self.load_panel.handle(content):
            return
        kind = content.get("kind")
        if kind in ("hello", "seen"):  # a (re)loaded page asks for what it missed; or still shows it
            if self._gate.seen() or kind == "hello":
                with self._cond:
                    if self._held is not None:
                        self._show(self._held)
                with self._send_lock:
                    self.send({"kind": "lines", "lines": list(self._buffer), "skipped": 0, "reset": True})
            return
        if self.try_panel.on_message(content):
            return
        if kind not in ("scale", "restart", "delete", "port_forward", "promote", "rollback"):
            return
        if self.terminal:
            self.message = f"service {self.service_name} is deleted"
            return
        if kind == "scale":
            self._request_scale(content.get("replicas"))
        elif kind == "restart":
            self._act("restart", self.service.restart,
                      lambda _: f"restart requested: the pods of {self.service_name} are being replaced")
        elif kind == "delete":
            self._act("delete", self.service.delete, lambda _: f"service {self.service_name} deleted")
        elif kind == "promote":
            self._act("promote", self.service.promote, str)
        elif kind == "rollback":  # the canary's: the buttons show only while one runs
            self._act("rollback", self.service.rollback, str)
        elif kind == "port_forward":
            self._act("port_forward", self.service.port_forward, self._forwarded)

    def _forwarded(self, url: Any) -> str:
        self.forward_url = str(url)
        return f"port-forward open: {url}"

    def _act(self, name: str, call: Callable[[], Any], done: Callable[[Any], str]) -> None:
        """Run ``call`` on a thread, one action at a time; its outcome goes to ``message``."""
        with self._lock:
            if self.busy:
                self.message = f"{self.busy.replace('_', '-')} still in progress"
                return
            self.busy = name
        self.message = ""

        def run() -> None:
            try:
                result = call()
                text = done(result)
            except Exception as exc:
                text = f"{name.replace('_', '-')} failed: {exc}"
            with self._lock:
                self.busy = ""
            self.message = text

        threading.Thread(target=run, name=f"jt-serve-{name}", daemon=True).start()

    def _request_scale(self, replicas: Any) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= MAX_SCALE:
            self.message = f"scale: replicas must be a whole number from 0 to {MAX_SCALE}, not {replicas!r}"
            return
        with self._lock:
            self.scale_target = replicas
            running = self._scale_wanted is not None
            self._scale_wanted = replicas
        if running:  # the scale thread in flight picks up the newest target when it is done
            return
        self.message = ""
        threading.Thread(target=self._scale_loop, name="jt-serve-scale", daemon=True).start()

    def _scale_loop(self) -> None:
        done: int | None = None
        while True:
            with self._lock:
                wanted = self._scale_wanted
                if wanted is None or wanted == done:
                    self._scale_wanted = None
                    return
            try:
                self.service.scale(wanted)
                done = wanted
                last = self.last_status
                if last is not None and last.desired == wanted and self._scale_wanted == wanted:
                    self.scale_target = -1
                self.message = f"scaling {self.service_name} to {wanted} replica{'s' if wanted != 1 else ''}"
            except Exception as exc:
                with self._lock:
                    self._scale_wanted = None
                    self.scale_target = -1
                self.message = f"scale failed: {exc}"
                return

    # --- Python API ------------------------------------------------------------------------------
    def wait_ready(self, timeout: float | None = None) -> ServiceStatus | None:
        """Block until the service is settled (READY, FAILED, SCALED_DOWN or DELETED); returns
        that status, or None if ``timeout`` seconds pass first."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: self.last_status is not None and self.last_status.state.settled, timeout)
            return self.last_status if ok else None

    def _unsubscribe(self) -> None:
        with self._lock:
            sub, self._sub = self._sub, None
        if sub is not None:
            try:
                sub.close()
            except Exception as exc:
                self.message = f"error while unwatching: {exc}"
        self._batcher.close()

    def close(self) -> None:
        if getattr(self, "_closed", True):  # twice, or a half-built widget (from __del__)
            super().close()
            return
        self._closed = True
        self.load_panel.close()
        self._unsubscribe()
        super().close()

    def __repr__(self) -> str:
        # No state here: a saved notebook keeps this text as first shown (display.LiveLine is current).
        return f"ServeView(service {self.service_name!r})"

