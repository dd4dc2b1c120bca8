"""``--canary`` on the local tier: the supervisor keeps two revisions' replica counts, the front
port sends each its share of the connections, promote rolls the rest to the canary, rollback
takes it away. Real supervisor, replicas and front port."""

from __future__ import annotations

import collections
import urllib.request

import pytest

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import SpecError, TiersError
from jupyter_tiers.core.model import ServiceState, ServiceStatus
from jupyter_tiers.engine.tier import Service
from jupyter_tiers.local.serve_tier import LocalServeTier

from .conftest import GUARD, HTTP_BODY, local_profile, wait_for

V2 = HTTP_BODY.replace("body = NAME.encode()", 'body = ("v2 " + NAME).encode()')


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return str(resp.read().decode())


def split(svc: Service, stable: int, canary: int | None) -> ServiceStatus | None:
    st = svc.status()
    assert isinstance(st, ServiceStatus)
    stable_ready = st.state is ServiceState.READY and (st.ready, st.desired) == (stable, stable)
    if canary is None:
        ok = st.canary is None and stable_ready
        return st if ok and len([p for p in st.pods if p.phase != "Terminating"]) == stable else None
    if st.canary is None or not stable_ready:
        return None
    c = st.canary
    return st if (c.state, c.ready, c.desired) == (ServiceState.READY, canary, canary) else None


def test_canary_share_then_promote(tier: LocalServeTier, workdir: object, registry: Registry) -> None:
    svc = tier.apply(tier.make_spec(HTTP_BODY, name="cw", replicas=4, readiness="/health"))
    assert svc.wait_ready(GUARD).state is ServiceState.READY
    canary = tier.apply(tier.make_spec(V2, name="cw", replicas=4, readiness="/health", canary=25))
    st = wait_for(lambda: split(canary, 3, 1), "3 live + 1 canary replicas ready")
    assert st is not None and st.canary is not None
    assert "; canary 25 %: READY 1/1, 0 restarts" in tier.summary(canary.record, st)
    assert tier.registry.get("cw").detail == "3/3 + canary 1/1"
    # The front port goes round the ready replicas: about one answer in four from the canary (a
    # replica whose probe fails under load leaves the round for a while: bounds, not a count).
    answers = collections.Counter(get(str(svc.url)).startswith("v2 ") for _ in range(40))
    assert 1 <= answers[True] <= 20 and answers[False] >= 20, answers
    # Promoted from a fresh tier, as a new kernel or the server would.
    other = LocalServeTier(local_profile(tier.profile.settings["workdir"]), Registry(registry.path))
    try:
        assert "canary promoted" in other.promote(other.registry.get("cw"))
    finally:
        other.close()
    wait_for(lambda: split(svc, 4, None), "4 replicas, all of the canary's revision")
    assert all(get(str(svc.url)).startswith("v2 ") for _ in range(8))
    record = tier.registry.get("cw")
    assert "live_canary" not in record.spec and record.detail == "4/4"
    with pytest.raises(TiersError, match="no canary to promote"):
        svc.promote()


def test_rollback_and_rerun_without_canary(tier: LocalServeTier) -> None:
    svc = tier.apply(tier.make_spec(HTTP_BODY, name="cr", replicas=2, readiness="/health"))
    assert svc.wait_ready(GUARD).state is ServiceState.READY
    tier.apply(tier.make_spec(V2, name="cr", replicas=2, readiness="/health", canary=50))
    wait_for(lambda: split(svc, 1, 1), "1 live + 1 canary")
    assert "canary removed" in svc.rollback()
    wait_for(lambda: split(svc, 2, None), "2 replicas of the live revision, no canary")
    assert not any(get(str(svc.url)).startswith("v2 ") for _ in range(6))
    with pytest.raises(TiersError, match="rollback needs a Kubernetes profile"):
        svc.rollback()  # no canary, and no revision history kept locally
    # A canary again, then the new cell run without --canary: the whole service, no canary left.
    tier.apply(tier.make_spec(V2, name="cr", replicas=2, readiness="/health", canary=50))
    wait_for(lambda: split(svc, 1, 1), "a canary again")
    tier.apply(tier.make_spec(V2, name="cr", replicas=2, readiness="/health"))
    wait_for(lambda: split(svc, 2, None), "the new revision on both replicas")
    assert all(get(str(svc.url)).startswith("v2 ") for _ in range(4))


NAMED = HTTP_BODY.replace("self.send_response(200 if self.path in (\"/\", \"/health\") else 404)",
                          "self.send_response(200 if self.path in (\"/\", \"/health\") else 404)\n"
                          "        self.send_header(\"X-Served-By\", NAME)")


def test_a_load_test_counts_what_the_canary_answered(tier: LocalServeTier) -> None:
    """The canary's error rate from traffic: answers that name their replica (X-Served-By) and
    come from the canary's pods; here the canary answers every request with a 500. The test
    server speaks HTTP/1.0 (a connection per request), so the front port's round goes through
    both replicas."""
    svc = tier.apply(tier.make_spec(NAMED, name="cl", replicas=2, readiness="/health"))
    assert svc.wait_ready(GUARD).state is ServiceState.READY
    broken = NAMED.replace('200 if self.path in ("/", "/health") else 404',
                           '200 if self.path == "/health" else 500')
    assert broken != NAMED
    tier.apply(tier.make_spec(broken, name="cl", replicas=2, readiness="/health", canary=50))
    wait_for(lambda: split(svc, 1, 1), "1 live + 1 canary")
    svc.load_test(rps=20, seconds=2, concurrency=2, request="/")
    summary = svc.last_load_test.summary()
    assert summary["answered"] >= 20 and summary["canary_answered"] >= 1, summary
    assert summary["canary_errors"] == summary["canary_answered"] == summary["errors"], summary
    assert summary["canary_error_rate"] == 1.0
    rows = svc.last_load_test.records()
    canary = svc.status().canary
    assert canary is not None
    assert {r["replica"] for r in rows if r["status"] == 500} <= set(canary.pods)


def test_a_canary_needs_a_running_service(tier: LocalServeTier) -> None:
    with pytest.raises(SpecError, match="run it without --canary first"):
        tier.apply(tier.make_spec(V2, name="none", replicas=4, canary=25))
