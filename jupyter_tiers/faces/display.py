"""Choose how a job or service is shown: the live widget in a Jupyter front end, plain text
elsewhere."""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..batch.status import summary_line
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


def _show_widget(widget: Any, wait: Callable[[float | None], S | None] | None, timeout: float | None,
                 summary: Callable[[S], str]) -> S | None:
    """Display ``widget``; with ``wait``, block on it and show ``summary`` of what it returns where
    the widget cannot (:func:`plain_only`: JupyterLab shows it once, in the widget)."""
    from IPython.display import display

    display(widget)
    if wait is None:
        return None
    status = wait(timeout)
    if status is not None:
        display(plain_only(printable(summary(status))), raw=True)
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
    # The widget's summary carries the main metric and a failed job's first error line; it is
    # set just after final_status, so a wait that timed out in between falls back.
    return _show_widget(widget, widget.wait if wait else None, timeout, lambda status: (
        widget.summary if widget.ended.is_set() and widget.summary else summary_line(status)))


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
    return _show_widget(widget, widget.wait if wait else None, timeout,
                        lambda status: widget.summary or job.summary())


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
    return _show_widget(widget, widget.wait_ready if wait else None, timeout,
                        lambda status: widget.summary)


def show_handle(handle: Handle, **options: Any) -> Any:
    """The live view of a job or a service."""
    if isinstance(handle, Service):
        options.pop("attach", None)
        return show_service(handle, **options)
    assert isinstance(handle, Job)
    return show_job(handle, **options)
