"""``Service.load_test`` on the Kubernetes tier (the emulator): the load goes through the
service's port-forward to a pod whose server counts requests (tests/local_serve/count_server.py),
and the rows carry the ready replicas from the tier's status watch. Short runs; no timed assertion."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.k8s.tier import K8sTier
from tests.helpers import wait_for
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


def test_load_is_spread_over_every_ready_pod(tier: K8sTier) -> None:
    """Issue 29 §2: with two replicas, all GETs went to one pod (the one port-forward) and nothing
    said so. Now one forward per ready pod: each pod counts its half, and the summary says which
    pods were measured."""
    svc = tier.apply(tier.make_spec(COUNT_BODY, name="load2", port=8000, replicas=2,
                                    env=(("COUNT_HOST", "0.0.0.0"),)))
    status = svc.wait_ready(GUARD)
    assert status.state is ServiceState.READY and status.ready == 2, (status, svc.logs())
    svc.load_test(rps=20, seconds=2, concurrency=40, request="/hello")
    summary = svc.last_load_test.summary()
    counts = (summary["scheduled"], summary["sent"], summary["ok"], summary["dropped"])
    assert counts == (40, 40, 40, 0), summary
    pods = sorted(p.name for p in status.pods if p.ready)
    assert summary["measured"].startswith(f"every ready pod measured (2: {', '.join(pods)})"), summary
    assert summary["answered_by"] == {pods[0]: 20, pods[1]: 20}
    run_urls = svc.last_load_test.urls
    wait_for(lambda: not [f for f in tier._forwards if f.url in run_urls], "the run's forwards to close")
    # Each pod's own count, through a forward of its own.
    urls, forwarded, _ = tier.load_targets(svc.record)
    try:
        counts = {}
        for url, pod in zip(urls, forwarded, strict=True):
            with urllib.request.urlopen(url + "/__stats", timeout=30) as resp:
                counts[pod] = json.loads(resp.read())["count"]
    finally:
        tier.close_load_targets(urls)
    assert counts == {pods[0]: 20, pods[1]: 20}
