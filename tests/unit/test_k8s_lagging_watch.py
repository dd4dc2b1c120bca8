"""LaggingWatchGuard: a status view or a blue-green switch opened right after a create reads the
namespace's shared watch, whose cache may lag behind that create. CI once saw a blue-green
switch dropped because the first status it got said DELETED (no Deployment in the cache yet):
the old colour then stayed live for good. The direct read runs inline here (``start``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jupyter_tiers.core.errors import ApiUnreachable
from jupyter_tiers.core.model import ServiceState, ServiceStatus
from jupyter_tiers.k8s.service_watch import LaggingWatchGuard


def status(state: ServiceState) -> ServiceStatus:
    return ServiceStatus(name="bg", state=state)


def guard_of(delivered: list[ServiceState], answers: list[ServiceStatus | Exception | None]
             ) -> tuple[LaggingWatchGuard, list[int]]:
    """A guard whose direct reads give ``answers`` in turn (an exception is raised), inline."""
    asked = [0]

    def confirm_gone() -> ServiceStatus | None:
        answer = answers[asked[0]]
        asked[0] += 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    def inline(fn: Callable[[], None]) -> None:
        fn()

    guard = LaggingWatchGuard(lambda s: delivered.append(s.state), confirm_gone, retry_s=0.0,
                              start=inline)
    return guard, asked


def test_deleted_before_the_watch_showed_it_is_the_cache_lagging_when_a_read_finds_it() -> None:
    delivered: list[ServiceState] = []
    guard, asked = guard_of(delivered, [None])
    guard(status(ServiceState.DELETED))
    assert delivered == [] and asked == [1] and not guard.shown
    guard(status(ServiceState.DEPLOYING))
    guard(status(ServiceState.READY))
    assert delivered == [ServiceState.DEPLOYING, ServiceState.READY] and guard.shown


def test_deleted_before_it_was_shown_goes_on_when_the_read_agrees() -> None:
    delivered: list[ServiceState] = []
    guard, asked = guard_of(delivered, [status(ServiceState.DELETED)])
    guard(status(ServiceState.DELETED))
    assert delivered == [ServiceState.DELETED] and asked == [1]


def test_deleted_after_it_was_shown_goes_on_without_a_read() -> None:
    delivered: list[ServiceState] = []
    guard, asked = guard_of(delivered, [])
    guard(status(ServiceState.DEPLOYING))
    guard(status(ServiceState.DELETED))
    assert delivered == [ServiceState.DEPLOYING, ServiceState.DELETED] and asked == [0]


def test_failed_goes_on_at_once() -> None:
    delivered: list[ServiceState] = []
    guard, asked = guard_of(delivered, [])
    guard(status(ServiceState.FAILED))
    assert delivered == [ServiceState.FAILED] and guard.shown and asked == [0]


def test_a_read_that_cannot_tell_is_asked_again() -> None:
    delivered: list[ServiceState] = []
    guard, asked = guard_of(delivered, [ApiUnreachable("refused"), status(ServiceState.DELETED)])
    guard(status(ServiceState.DELETED))
    assert asked == [2] and delivered == [ServiceState.DELETED]


@pytest.mark.parametrize("then", ["cancelled", "shown"])
def test_a_cancelled_or_shown_guard_delivers_no_late_deleted(then: str) -> None:
    delivered: list[ServiceState] = []
    held: list[Callable[[], None]] = []
    guard = LaggingWatchGuard(lambda s: delivered.append(s.state), lambda: status(ServiceState.DELETED),
                              start=held.append)
    guard(status(ServiceState.DELETED))
    if then == "cancelled":
        guard.cancel()
    else:
        guard(status(ServiceState.DEPLOYING))
    held[0]()  # the read's thread answers only now
    assert delivered == ([] if then == "cancelled" else [ServiceState.DEPLOYING])
