"""A deleted and re-created Kubernetes service is a new service: the registry shows its own start
time, while re-applying a live one keeps the first."""

from __future__ import annotations

import time

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.k8s.tier import K8sTier
from tests.k8s.conftest import StatusLog
from tests.k8s.test_k8s_tier import apply_server
from tests.k8s_emulator.emulator import Emulator


def test_recreated_service_has_its_own_start_time(tier: K8sTier, emulator: Emulator,
                                                  k8s_namespace: str) -> None:
    service = apply_server(tier)
    started = Registry().get("web", profile="serving").submitted_at
    assert apply_server(tier).record.submitted_at == started  # the same live service
    log = StatusLog()
    sub = tier.watch(service.record, on_status=log)
    try:
        service.delete()
        log.wait(lambda s: s.state is ServiceState.DELETED, what="DELETED")
    finally:
        tier.unwatch(sub)
    assert Registry().get("web", profile="serving").state == ServiceState.DELETED.value
    before = time.time()
    again = apply_server(tier)
    record = Registry().get("web", profile="serving")
    assert record.submitted_at == again.record.submitted_at
    assert record.submitted_at >= before > started, (record.submitted_at, before, started)
    again.delete()
