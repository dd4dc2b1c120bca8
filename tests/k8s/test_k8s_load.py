"""``Service.load_test`` on the Kubernetes tier (the emulator): the load goes through the
service's port-forward to a pod whose server counts requests (tests/local_serve/count_server.py),
and the rows carry the ready replicas from the tier's status watch. Short runs; no timed assertion."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from jupyter_tiers.k8s.tier import K8sTier
from jupyter_tiers.model import ServiceState
from tests.k8s.conftest import GUARD

COUNT_BODY = (Path(__file__).resolve().parents[1] / "local_serve" / "count_server.py").read_text()


def test_load_test_through_the_port_forward(tier: K8sTier) -> None:
    svc = tier.apply(tier.make_spec(COUNT_BODY, name="load", port=8000, env=(("COUNT_HOST", "0.0.0.0"),)))
    status = svc.wait_ready(GUARD)
    assert status.state is ServiceState.READY, (status, svc.logs())
    # A slot for every request: however slow a loaded machine makes the forward, none can find
    # every slot busy and go unsent (a drop), so all 40 must be sent and answered.
    svc.load_test(rps=20, seconds=2, concurrency=40, request="/hello")
    run = svc.last_load_test
    summary = run.summary()
    counts = (summary["scheduled"], summary["sent"], summary["ok"], summary["errors"])
    assert counts == (40, 40, 40, 0), summary
    assert {r["ready"] for r in run.records()} == {1}
    # The pod counted every request (asked through a port-forward of its own).
    with urllib.request.urlopen(svc.port_forward() + "/__stats", timeout=30) as resp:
        assert json.loads(resp.read())["count"] == 40
