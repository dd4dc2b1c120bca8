"""``Service.wait_ready`` against a tier whose watch cache lags behind a change just made."""

from __future__ import annotations

import threading
from typing import Any

from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.model import ServiceState, ServiceStatus
from jupyter_tiers.engine.handles import Service
from jupyter_tiers.engine.subscription import Subscription


def status(state: ServiceState, ready: int, desired: int) -> ServiceStatus:
    return ServiceStatus(name="echo", state=state, ready=ready, desired=desired)


class LaggingTier:
    """Right after ``scale(3)``: the watch first delivers the cached, stale READY 2/2; a read
    says DEPLOYING 2/3 until the watch catches up with DEPLOYING and then READY 3/3."""

    def __init__(self) -> None:
        self.reads: list[ServiceStatus] = [status(ServiceState.DEPLOYING, 2, 3)]
        self.unwatched = threading.Event()

    def subscription(self, record: JobRecord, on_status: Any) -> Subscription[ServiceStatus]:
        tier = self

        class Sub(Subscription[ServiceStatus]):
            def _detach(self) -> None:
                tier.unwatched.set()

        return Sub(record, on_status)

    def watch(self, record: JobRecord, *, on_status: Any = None,
              on_lines: Any = None) -> Subscription[ServiceStatus]:
        sub = self.subscription(record, on_status)
        sub.deliver(status(ServiceState.READY, 2, 2))  # from the cache, before the change

        def catch_up() -> None:
            sub.deliver(status(ServiceState.DEPLOYING, 2, 3))
            self.reads.append(status(ServiceState.READY, 3, 3))
            sub.deliver(status(ServiceState.READY, 3, 3))

        threading.Timer(0.2, catch_up).start()
        return sub

    def service_status(self, record: JobRecord) -> ServiceStatus:
        return self.reads[-1]


def test_wait_ready_does_not_return_a_stale_settled_status() -> None:
    tier = LaggingTier()
    record = JobRecord(profile="serving", tier="kubernetes", job_id="echo", name="echo", kind="service")
    final = Service(tier, record).wait_ready(timeout=10)  # type: ignore[arg-type]
    assert (final.state, final.ready, final.desired) == (ServiceState.READY, 3, 3)
    assert tier.unwatched.is_set()


def test_wait_ready_times_out_with_a_fresh_status() -> None:
    tier = LaggingTier()
    def stale_only(record: JobRecord, on_status: Any = None,
                   on_lines: Any = None) -> Subscription[ServiceStatus]:
        sub = tier.subscription(record, on_status)
        sub.deliver(status(ServiceState.READY, 2, 2))
        return sub

    tier.watch = stale_only  # type: ignore[method-assign]
    record = JobRecord(profile="serving", tier="kubernetes", job_id="echo", name="echo", kind="service")
    final = Service(tier, record).wait_ready(timeout=0.3)  # type: ignore[arg-type]
    assert (final.state, final.ready, final.desired) == (ServiceState.DEPLOYING, 2, 3)
