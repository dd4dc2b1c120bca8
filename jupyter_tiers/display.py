"""Choose how a job or service is shown: the live widget in a Jupyter front end, plain text
elsewhere."""

from __future__ import annotations

import os
from typing import Any

from .handles import Handle, Job, Service
from .model import JobStatus, ServiceStatus
from .status import summary_line

DISPLAY_ENV = "JUPYTER_TIERS_DISPLAY"  # "text" forces the text fallback


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


def show_job(job: Job, *, wait: bool = False, text: bool = False, attach: bool = False,
             timeout: float | None = None) -> JobStatus | None:
    """Display a live view of ``job``. With ``wait``, block until it ends and print the summary.

    ``attach`` (reattaching to a job that may have run for a while): the widget shows only the
    end of the log so far, then follows it.
    """
    from .array_job import ArrayJob

    if isinstance(job, ArrayJob):
        return show_array(job, wait=wait, text=text, attach=attach, timeout=timeout)
    if text or not widgets_available():
        from .widgets.text import TextView

        view = TextView(job, attach=attach)
        if wait:
            return view.run(timeout)
        print(view.header() + f" — follow it with %tiers attach {job.id}")
        return None
    from IPython.display import display

    from .widgets.job_view import JobView

    widget = JobView(job, log_offset=None if attach else 0)
    display(widget)
    if not wait:
        return None
    status = widget.wait(timeout)
    if status is not None:
        # The widget's summary carries the main metric and a failed job's first error line; it is
        # set just after final_status, so a wait that timed out in between falls back.
        print(widget.summary if widget.ended.is_set() and widget.summary else summary_line(status))
    return status


def show_array(job: Any, *, wait: bool = False, text: bool = False, attach: bool = False,
               timeout: float | None = None) -> JobStatus | None:
    """The view of a job array: one widget (a row per task), or the text view."""
    try:
        from .widgets.array_view import ArrayView
    except ImportError:  # anywidget missing: the text view
        text = True
    if text or not widgets_available():
        from .widgets.array_text import ArrayTextView

        view = ArrayTextView(job, attach=attach)
        if wait:
            return view.run(timeout)
        print(view.header() + f" — follow it with %tiers attach {job.id}")
        return None
    from IPython.display import display

    widget = ArrayView(job)
    display(widget)
    if not wait:
        return None
    status = widget.wait(timeout)
    if status is not None:
        print(widget.summary or job.summary())
    return status


def show_service(service: Service, *, wait: bool = False, text: bool = False,
                 timeout: float | None = None) -> ServiceStatus | None:
    """Display a live view of ``service``. With ``wait``, block until it is ready or has failed
    and print the summary line."""
    if text or not widgets_available():
        from .widgets.serve_text import ServiceTextView

        view = ServiceTextView(service)
        if wait:
            return view.run(timeout)
        print(view.header() + f" — follow it with %tiers attach {service.id}")
        return None
    from IPython.display import display

    from .widgets.serve_view import ServeView

    widget = ServeView(service)
    display(widget)
    if not wait:
        return None
    status = widget.wait_ready(timeout)
    if status is not None:
        print(widget.summary)
    return status


def show_handle(handle: Handle, **options: Any) -> Any:
    """The live view of a job or a service."""
    if isinstance(handle, Service):
        options.pop("attach", None)
        return show_service(handle, **options)
    assert isinstance(handle, Job)
    return show_job(handle, **options)
