"""A deleted and re-created local service is a new service: the registry shows its own start
time, while re-running the cell of a live service keeps the first one."""

from __future__ import annotations

import time

from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.local.serve_tier import LocalServeTier

from .conftest import GUARD, HTTP_BODY


def test_recreated_service_has_its_own_start_time(tier: LocalServeTier) -> None:
    spec = tier.make_spec(HTTP_BODY, name="again", readiness="/")
    first = tier.apply(spec)
    assert first.wait_ready(GUARD).state is ServiceState.READY
    started = tier.registry.get("again").submitted_at
    assert tier.apply(spec).record.submitted_at == started  # the same live service
    first.delete()
    assert tier.registry.get("again").state == ServiceState.DELETED.value
    before = time.time()
    second = tier.apply(spec)
    assert second.wait_ready(GUARD).state is ServiceState.READY
    record = tier.registry.get("again")
    assert record.submitted_at >= before > started, (record.submitted_at, before, started)
    second.delete()
