"""The one watch protocol of jobs and services: a :class:`Subscription` and :func:`wait_for`.

Every way of following a job or a service hands out a ``Subscription``: ``Job.watch`` and
``Service.watch`` (``BatchTier.watch`` / ``ServeTier.watch`` underneath). A backend follows the
work its own way (the batch tier's Watcher polls in batches, the Kubernetes tier shares a
namespace's watches, the local serving tier reads the service's files) and calls
:meth:`Subscription.deliver` with each new status and :meth:`Subscription.end` when nothing more
will come. A listener gets each status in its ``on_status`` callback, can read the ``latest`` one
at any time, and ``close()`` s the subscription (or leaves a ``with`` block) when done.
:func:`wait_for` blocks on a subscription (or a handle) until a status satisfies a predicate:
``Job.wait``, ``Service.wait`` and ``Service.wait_ready`` are written with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from ..core.model import JobStatus, ServiceStatus

if TYPE_CHECKING:
    from types import TracebackType

    from ..config.registry import JobRecord

__all__ = ["StatusT", "Subscription", "Watchable", "wait_for"]

#: The status a subscription delivers: a job's (JobStatus) or a service's (ServiceStatus).
StatusT = TypeVar("StatusT", bound="JobStatus | ServiceStatus")


class Subscription(Generic[StatusT]):
    """One listener's subscription to one job's or service's status.

    Thread-safe. Statuses come on the backend's threads, in order; a callback must not block
    for long (the widgets hand work to their own threads). After :meth:`close` no new
    callback starts (one already running on another thread may still finish).
    """

    def __init__(self, record: JobRecord, on_status: Callable[[StatusT], None] | None = None) -> None:
        self.record = record
        self.on_status = on_status
        self._cond = threading.Condition()
        self._latest: StatusT | None = None
        self._delivered = 0
        self._ended = False
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "ended" if self._ended else "open"
        return f"<{type(self).__name__} {self.record.key} {state}, {self._delivered} statuses>"

    # --- what a listener reads ------------------------------------------------------------
    @property
    def latest(self) -> StatusT | None:
        """The last status delivered (None before the first)."""
        with self._cond:
            return self._latest

    @property
    def delivered(self) -> int:
        """How many statuses have been delivered so far."""
        with self._cond:
            return self._delivered

    @property
    def ended(self) -> bool:
        """The backend will deliver nothing more (a job ended, its log and upload done; a
        local service deleted)."""
        with self._cond:
            return self._ended

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def close(self) -> None:
        """Stop delivering to this listener and let the backend forget it (idempotent)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._detach()

    def __enter__(self) -> Subscription[StatusT]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- what a backend calls -------------------------------------------------------------
    def deliver(self, status: StatusT) -> None:
        """A new status: kept as :attr:`latest`, then handed to ``on_status`` (not once closed).
        The callback's exceptions reach the caller (each backend logs and carries on)."""
        with self._cond:
            if self._closed:
                return
            self._latest = status
            self._delivered += 1
            self._cond.notify_all()
        if self.on_status is not None:
            self.on_status(status)

    def end(self, status: StatusT | None = None) -> None:
        """Nothing more will be delivered; ``status``, when given, is the final one (already
        delivered: it only becomes :attr:`latest`, no callback is called)."""
        with self._cond:
            if status is not None and not self._closed:
                self._latest = status
            self._ended = True
            self._cond.notify_all()

    def _detach(self) -> None:
        """The backend's half of :meth:`close`: stop following for this listener."""

    # --- waiting ----------------------------------------------------------------------------
    def _wait(self, predicate: Callable[[StatusT], bool], timeout: float | None,
              after: int) -> StatusT | None:
        deadline = None if timeout is None else time.monotonic() + timeout

        def done() -> bool:
            if self._closed or self._ended:
                return True
            return (self._latest is not None and self._delivered > after
                    and predicate(self._latest))

        with self._cond:
            while not done():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(left)
            return self._latest


class Watchable(Protocol[StatusT]):
    """Anything :func:`wait_for` can watch: a job or service handle, an array, a test's stand-in."""

    def watch(self) -> Subscription[StatusT]:
        """A new subscription to the thing's status (closed by whoever opened it)."""
        ...


def wait_for(source: Subscription[StatusT] | Watchable[StatusT], predicate: Callable[[StatusT], bool],
             timeout: float | None = None, *, after: int = 0) -> StatusT | None:
    """Block until a status delivered after the first ``after`` ones satisfies ``predicate``,
    the subscription ends or is closed, or ``timeout`` seconds pass; returns the latest status
    (None when none came). The caller checks the status it gets: a timeout returns whatever was
    delivered last. ``source`` anything watchable (a handle): it is watched (no log) for the time
    of the wait."""
    if isinstance(source, Subscription):
        return source._wait(predicate, timeout, after)
    with source.watch() as sub:
        return sub._wait(predicate, timeout, after)
