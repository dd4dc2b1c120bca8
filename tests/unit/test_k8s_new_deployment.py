"""A blue-green switch waits for the new colour's Deployment through the namespace watch, whose
cache may lag behind the create. CI once saw the switch dropped because the first status it got
said DELETED (no Deployment in the cache yet): the old colour then stayed live for good."""

from __future__ import annotations

from jupyter_tiers.k8s.tier import NewDeploymentSight
from jupyter_tiers.model import ServiceState, ServiceStatus


def status(state: ServiceState) -> ServiceStatus:
    return ServiceStatus(name="bg", state=state)


def test_deleted_before_the_watch_showed_the_deployment_is_the_cache_lagging() -> None:
    sight = NewDeploymentSight()
    assert sight.offer(status(ServiceState.DELETED)) is False
    assert sight.last is None and not sight.seen
    assert sight.offer(status(ServiceState.DEPLOYING)) is False
    assert sight.seen
    assert sight.offer(status(ServiceState.READY)) is True
    assert sight.last is not None and sight.last.state is ServiceState.READY


def test_deleted_after_it_was_shown_ends_the_wait() -> None:
    sight = NewDeploymentSight()
    assert sight.offer(status(ServiceState.DEPLOYING)) is False
    assert sight.offer(status(ServiceState.DELETED)) is True
    assert sight.last is not None and sight.last.state is ServiceState.DELETED


def test_failed_ends_the_wait_at_once() -> None:
    sight = NewDeploymentSight()
    assert sight.offer(status(ServiceState.FAILED)) is True
    assert sight.seen and sight.last is not None and sight.last.state is ServiceState.FAILED
