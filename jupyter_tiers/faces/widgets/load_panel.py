"""The Load panel of ServeView (load_panel.js draws it): Start runs ``Service.start_load_test``
in the kernel, and the run's per-second series (p50/p95/p99 latency, throughput, errors, ready
replicas) and summary reach the browser as custom messages ``{"kind": "load", ...}``; Stop, the
view's close and the service's deletion end the run."""

from __future__ import annotations

import json
import threading
from typing import Any

from ...core.errors import TiersError
from ...engine.handles import Service
from ...serving.loadplan import DEFAULT_LIMIT_RPS, limit_of

#: Rows kept for a reloaded page (one a second: an hour's run).
MAX_ROWS = 3700


class LoadPanel:
    """One ServeView's load tests, one at a time. ``send`` sends a custom message to the view's
    front end; ``handle`` takes the front end's ``load_start`` / ``load_stop`` messages."""

    def __init__(self, service: Service, send: Any) -> None:
        self.service = service
        self._send = send
        self._lock = threading.Lock()
        # Held from reading the state to sending it: messages from the kernel's, the start's and the
        # run's threads leave in the order of the states they carry (the last one sent is the newest).
        self._send_lock = threading.RLock()
        self.run: Any = None
        self.state = "idle"  # idle, starting, running, done, stopped, error
        self.message = ""
        self.summary: dict[str, Any] = {}
        self._rows: dict[float, dict[str, Any]] = {}
        self._closed = False
        try:
            self.limit = limit_of(service.tier.profile.settings)
        except TiersError:
            self.limit = float(DEFAULT_LIMIT_RPS)

    def handle(self, content: dict[str, Any]) -> bool:
        """Act on a front-end message if it is the panel's; True when it was."""
        kind = content.get("kind")
        if kind == "load_start":
            self.start(content)
        elif kind == "load_stop":
            self.stop()
        elif kind == "hello":
            self.resend()
            return False  # the view answers hello too
        else:
            return False
        return True

    # --- start and stop ---------------------------------------------------------------------
    def start(self, content: dict[str, Any]) -> None:
        with self._lock:
            busy = self.state in ("starting", "running")
            closed = self._closed
            if not busy and not closed:
                self.state = "starting"
                self._rows.clear()
                self.summary = {}
        if closed:
            return
        if busy:
            self._set(message="a load test is already running; Stop it first")
            return
        self._set(message="", reset=True)
        threading.Thread(target=self._start, args=(content,), name="jt-load-start", daemon=True).start()

    def _start(self, content: dict[str, Any]) -> None:
        try:
            run = self.service.start_load_test(
                content.get("rps", 0), content.get("seconds", 0), content.get("concurrency", 0),
                request_of(content), on_update=self._on_update)
        except Exception as exc:  # a bad value or no ready replica: said in the panel
            with self._lock:
                self.state = "error"
            self._set(message=f"load test not started: {exc}")
            return
        with self._lock:
            self.run = run
            stop_now = self._closed
            if self.state == "starting":
                self.state = "running"
        # Not if the run ended already (a short one, this thread held up): its end said it all.
        self._set(message=f"sending {run.plan.rps:g} requests/s for {run.plan.seconds:g} s to "
                          f"{run.plan.request.method} {run.plan.request.path}", only_while="running")
        if stop_now:
            run.stop()

    def stop(self) -> None:
        with self._lock:
            run = self.run
        if run is None or run.done:
            return
        self._set(message="stopping…", only_while="running")
        threading.Thread(target=run.stop, name="jt-load-stop", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            run = self.run
        if run is not None:
            run.stop(timeout=None)

    # --- to the front end -----------------------------------------------------------------
    def _on_update(self, update: dict[str, Any]) -> None:
        rows = update.get("rows") or []
        with self._lock:
            for row in rows:
                self._rows[row["t"]] = row
            while len(self._rows) > MAX_ROWS:
                self._rows.pop(min(self._rows))
            self.summary = update.get("summary") or {}
            if update.get("done"):
                stopped = bool(self.summary.get("stopped"))
                self.state = "error" if self.summary.get("error") else "stopped" if stopped else "done"
        message = None
        if update.get("done"):
            s = self.summary
            message = done_message(s)
        self._set(rows=rows, message=message)

    def _set(self, *, rows: list[dict[str, Any]] | None = None, message: str | None = None,
             reset: bool = False, only_while: str | None = None) -> None:
        """Send the panel's state (and ``message``, the new one); with ``only_while``, nothing
        unless the state is still that one."""
        with self._send_lock:
            with self._lock:
                if only_while is not None and self.state != only_while:
                    return
                if message is not None:
                    self.message = message
                msg = {"kind": "load", "state": self.state, "message": self.message, "summary": self.summary,
                       "rows": rows or [], "reset": reset, "limit": self.limit}
            self._send(msg)

    def resend(self) -> None:
        """Everything so far, for a (re)loaded page (no update of the run's slips in between
        the rows read and their sending, to be wiped by the reset)."""
        with self._send_lock:
            with self._lock:
                rows = [self._rows[t] for t in sorted(self._rows)]
            self._set(rows=rows, reset=True)


def request_of(content: dict[str, Any]) -> dict[str, Any]:
    """The panel's method, path and body as a ``load_test`` request (a body that is JSON goes
    with ``Content-Type: application/json``)."""
    request: dict[str, Any] = {"method": content.get("method") or "GET", "path": content.get("path") or "/"}
    body = content.get("body")
    if body:
        request["body"] = body
        if isinstance(body, str) and body.lstrip()[:1] in ("{", "["):
            try:
                json.loads(body)
                request["headers"] = {"Content-Type": "application/json"}
            except ValueError:
                pass
    return request


def done_message(s: dict[str, Any]) -> str:
    """The panel's line at a run's end: dropped and late (the test's failures) beside errors
    (the service's), a verdict on which, and what was measured."""
    sent = s.get("sent", 0) or 0
    scheduled = s.get("scheduled", sent) or 0
    dropped, late, errors = s.get("dropped", 0) or 0, s.get("late", 0) or 0, s.get("errors", 0) or 0

    def pct(n: int, of: int) -> str:
        return f"{100 * n / of:.1f} %" if of else "0.0 %"

    message = (f"{'stopped' if s.get('stopped') else 'done'}: {sent} of {scheduled} sent at "
               f"{s.get('sent_rps', 0):g}/s of {s.get('asked_rps', 0):g} asked; dropped {dropped} "
               f"({pct(dropped, scheduled)}), late {late} ({pct(late, sent)}), errors {errors} "
               f"({pct(errors, sent)})")
    if dropped or late:
        message += " — the TEST fell short (see below)" + ("; the service also failed" if errors else "")
    elif errors:
        message += " — the SERVICE failed requests"
    if s.get("measured"):
        message += f" — {s['measured']}"
    if s.get("error"):
        message += f" — {s['error']}"
    return message
