"""Choose how a job or service is shown: the live widget in a Jupyter front end, plain text
elsewhere."""

from __future__ import annotations

import html
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from ..core.model import JobStatus, ServiceStatus
from ..core.plaintext import printable
from ..engine.array_job import ArrayJob
from ..engine.handles import Handle, Job, Service
from .widgets.array_text import ArrayTextView
from .widgets.serve_text import ServiceTextView
from .widgets.text import TextView

DISPLAY_ENV = "JUPYTER_TIERS_DISPLAY"  # "text" forces the text fallback

S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)


class _TextView(Protocol[S_co]):
    def header(self) -> str: ...
    def run(self, timeout: float | None = None) -> S_co | None: ...


def widgets_available() -> bool:
    """True inside a Jupyter kernel (where a front end may render widgets) unless disabled."""
    if os.environ.get(DISPLAY_ENV, "").lower() == "text":
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _show_text(view: _TextView[S], handle_id: str, wait: bool, timeout: float | None) -> S | None:
    """Run a text view until the end (``wait``), or print its header and how to follow it."""
    if wait:
        return view.run(timeout)
    print(printable(view.header() + f" — follow it with %tiers attach {handle_id}"))
    return None


def plain_only(line: str) -> dict[str, str]:
    """A display bundle that shows ``line`` only where no widget shows it: ``text/plain`` for a
    text-only front end (a terminal console), and ``text/html`` that the widgets' own CSS hides
    when it follows a rendered widget (job_view.css, ``.jt-plain-summary``): JupyterLab shows the
    line once, in the widget, while a notebook run headless (papermill, nbconvert) and opened or
    exported later, where no widget renders, still shows it."""
    return {"text/plain": line, "text/html": f'<pre class="jt-plain-summary">{html.escape(line)}</pre>'}


def live_line(summary: str, now: str, handle_id: str) -> str:
    """The plain lines beside a widget: how to get the live view back where the widget's model is
    gone (a saved notebook reopened with a new kernel), then its ``summary`` once there is one (the
    end, or a service that settled), else what it shows ``now`` (last, as --wait's summary was)."""
    return f"(live view: %tiers attach {printable(handle_id)})\n{printable(summary or now)}"


class LiveLine:
    """The plain line under a widget, kept current (a display id): what a saved notebook shows on
    GitHub or nbviewer, what a papermill or nbconvert output keeps, and what JupyterLab shows when
    the widget's model is gone. In JupyterLab, while the widget renders, its CSS hides the line
    (:func:`plain_only`). ``line`` computes it from the widget; :meth:`refresh` runs on a change
    of the widget's state (a background thread: JupyterLab takes a display update from any thread,
    also after the cell has finished, and saves it)."""

    def __init__(self, line: Callable[[], str]) -> None:
        from IPython.display import display

        self._line = line
        self._lock = threading.Lock()
        self._shown = line()
        self._handle = display(plain_only(self._shown), raw=True, display_id=True)

    def refresh(self, *_: Any) -> None:
        """Show the widget's line now, if it changed."""
        text = self._line()
        with self._lock:
            if text == self._shown or self._handle is None:
                return
            self._shown = text
            self._handle.update(plain_only(text), raw=True)


def _show_widget(widget: Any, wait: Callable[[float | None], S | None] | None, timeout: float | None,
                 line: Callable[[], str], watched: Any, names: Sequence[str]) -> S | None:
    """Display ``widget`` and under it its :class:`LiveLine` (``line``), refreshed when a trait of
    ``names`` of ``watched`` changes; with ``wait``, block on it (the line then holds the summary
    the wait ended on)."""
    from IPython.display import display

    display(widget)
    live = LiveLine(line)
    watched.observe(live.refresh, names=list(names))
    if wait is None:
        return None
    status = wait(timeout)
    live.refresh()
    return status


def show_job(job: Job, *, wait: bool = False, text: bool = False, attach: bool = False,
             timeout: float | None = None) -> JobStatus | None:
    """Display a live view of ``job``. With ``wait``, block until it ends and print the summary.

    ``attach`` (reattaching to a job that may have run for a while): the widget shows only the
    end of the log so far, then follows it.
    """
    if isinstance(job, ArrayJob):
        return show_array(job, wait=wait, text=text, attach=attach, timeout=timeout)
    if text or not widgets_available():
        return _show_text(TextView(job, attach=attach), job.id, wait, timeout)
    # lazy: heavy: anywidget/ipywidgets, loaded when a view is first shown
    from .widgets.job_view import JobView

    widget = JobView(job, log_offset=None if attach else 0)
    # The widget's summary carries the main metric and a failed job's first error line.
    return _show_widget(widget, widget.wait if wait else None, timeout, lambda: live_line(
        widget.summary, f"job {job.id} {job.name!r}: {widget.state}"
        + (f" ({widget.reason})" if widget.reason else ""), job.id), widget,
        ("state", "reason", "summary"))


def show_array(job: ArrayJob, *, wait: bool = False, text: bool = False, attach: bool = False,
               timeout: float | None = None) -> JobStatus | None:
    """The view of a job array: one widget (a row per task), or the text view."""
    try:
        # lazy: heavy: anywidget/ipywidgets, loaded when a view is first shown
        from .widgets.array_view import ArrayView
    except ImportError:  # anywidget missing: the text view
        text = True
    if text or not widgets_available():
        return _show_text(ArrayTextView(job, attach=attach), job.id, wait, timeout)
    widget = ArrayView(job)
    return _show_widget(widget, widget.wait if wait else None, timeout, lambda: live_line(
        widget.summary, f"array {job.id} {job.name!r}: {widget.table.state} {widget.table.counts}".rstrip(),
        job.id), widget.table, ("state", "counts", "summary"))


def show_service(service: Service, *, wait: bool = False, text: bool = False,
                 timeout: float | None = None, applied: bool = False) -> ServiceStatus | None:
    """Display a live view of ``service``. With ``wait``, block until it is ready or has failed
    and print the summary line. ``applied``: it was applied just now (the summary times the
    rollout from here)."""
    if text or not widgets_available():
        return _show_text(ServiceTextView(service, applied=applied), service.id, wait, timeout)
    # lazy: heavy: anywidget/ipywidgets, loaded when a view is first shown
    from .widgets.serve_view import ServeView

    widget = ServeView(service, applied=applied)
    return _show_widget(widget, widget.wait_ready if wait else None, timeout, lambda: live_line(
        widget.summary, f"service {service.name!r}: {widget.state} {widget.ready}/{widget.desired}",
        service.id), widget, ("state", "ready", "desired", "summary"))


def show_handle(handle: Handle, **options: Any) -> Any:
    """The live view of a job or a service."""
    if isinstance(handle, Service):
        options.pop("attach", None)
        return show_service(handle, **options)
    assert isinstance(handle, Job)
    return show_job(handle, **options)
