"""Plain-text service view for terminal IPython, nbconvert/nbclient and ``--text``."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from ...app.viewstate.serve import (
    PodTails,
    format_line,
    model_note,
    order_batch,
    pod_problem,
    state_label,
    summary_for,
)
from ...core.model import PodLogLine, ServiceStatus
from ...core.plaintext import printable
from ...core.timefmt import format_elapsed
from ...engine.handles import Service


class ServiceTextView:
    """Prints a service's state changes, pod problems and log lines until it is settled, then
    the one-line summary."""

    def __init__(self, service: Service, out: TextIO | None = None, *, applied: bool = False) -> None:
        """``applied``: the service was applied just now; the summary then times the rollout even
        when the first status seen is already settled (see ServeView)."""
        self.service = service
        self.applied = applied
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        self.final_status: ServiceStatus | None = None

    def _print(self, text: str) -> None:
        """One status line (states, reasons, pod events, the summary): cluster text as text."""
        with self._lock:
            self.out.write(printable(text) + "\n")
            self.out.flush()

    def header(self) -> str:
        rec = self.service.record
        spec = rec.spec or {}
        namespace = spec.get("namespace") or self.service.tier.profile.get("namespace")
        text = f"service {rec.name} applied to {rec.profile}"
        if namespace:
            text += f" (namespace {namespace})"
        details = []
        replicas = spec.get("replicas")
        if isinstance(replicas, int) and not isinstance(replicas, bool):
            details.append(f"{replicas} replica{'s' if replicas != 1 else ''}")
        if spec.get("image"):
            details.append(f"image {spec['image']}")
        if model_note(spec):
            details.append(model_note(spec))
        return text + (": " + ", ".join(details) if details else "")

    def run(self, timeout: float | None = None) -> ServiceStatus | None:
        """Follow the service until it is READY, FAILED, SCALED_DOWN or DELETED (or ``timeout``
        seconds pass); print and return that status (None on timeout)."""
        self._print(self.header())
        settled = threading.Event()
        started = time.monotonic()
        seen: dict[str, str] = {}  # what was printed last: state label, banner, each pod's problem
        tails = PodTails()
        last_status: list[ServiceStatus] = []
        # An unsettled state was seen (or the service was just applied): the summary says how long
        # it took.
        rolling: list[bool] = [True] if self.applied else []

        def on_status(status: ServiceStatus) -> None:
            if settled.is_set():
                return
            last_status[:] = [status]
            if not status.state.settled:
                rolling[:] = [True]
            label = state_label(status)
            if seen.get("") != label:
                seen[""] = label
                self._print(f"[{label}]")
            problem = status.message or ("" if status.api_reachable else "Kubernetes API unreachable")
            if problem and seen.get("!") != problem:
                self._print(f"! {problem}")
            seen["!"] = problem
            for pod in status.pods:
                why = pod_problem(pod)
                if why and seen.get(pod.name) != why:
                    self._print(f"  pod {pod.name}: {why}")
                seen[pod.name] = why
            if status.state.settled:
                self.final_status = status
                settled.set()

        def on_lines(lines: list[PodLogLine]) -> None:
            if settled.is_set() or not lines:
                return
            tails.feed(lines)
            with self._lock:
                self.out.write("".join(format_line(ln) + "\n" for ln in order_batch(lines)))
                self.out.flush()

        with self.service.watch(on_status, on_lines=on_lines):
            settled.wait(timeout)
        elapsed = time.monotonic() - started
        final = self.final_status
        if final is not None:
            note = model_note(self.service.record.spec)
            self._print(summary_for(final, elapsed_s=elapsed if rolling else None, tails=tails)
                        + (f" — {note}" if note else ""))
            return final
        where = f": {summary_for(last_status[0])}" if last_status else ""
        self._print(f"[still not settled after {format_elapsed(elapsed)}{where}]")
        return None
