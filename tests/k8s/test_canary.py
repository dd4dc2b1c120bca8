"""``--canary PERCENT`` on the emulator: a second Deployment beside the live one, the replica
split, promote and rollback (also from a fresh tier, as the sidebar or a new kernel would)."""

from __future__ import annotations

import base64
import urllib.request
from typing import Any

import pytest

from jupyter_tiers.app.viewstate import serve as serve_state
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import SpecError, TiersError
from jupyter_tiers.core.model import ServiceState, ServiceStatus
from jupyter_tiers.k8s.canary import TRACK_LABEL
from jupyter_tiers.k8s.tier import K8sTier
from tests.k8s.conftest import GUARD, SERVER, wait_for
from tests.k8s.test_k8s_tier import apply_server, get, live_pods, wait_ready
from tests.k8s_emulator.emulator import Emulator

V2 = SERVER.replace('"hello from "', '"v2 from "')


def pods_by_track(emulator: Emulator, ns: str, name: str) -> tuple[list[str], list[str]]:
    stable, canary = [], []
    for p in live_pods(emulator, ns, name):
        labels = p["metadata"].get("labels") or {}
        (canary if labels.get(TRACK_LABEL) == "canary" else stable).append(p["metadata"]["name"])
    return stable, canary


def split_ready(tier: K8sTier, svc: Any, stable: int, canary: int) -> ServiceStatus | None:
    st: ServiceStatus = tier.service_status(svc.record)
    if st.canary is None:
        return None
    ok = (st.available == stable and st.desired == stable and st.canary.ready == canary
          and st.canary.desired == canary and st.canary.state is ServiceState.READY)
    return st if ok else None


def answer(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.read().decode()
    except OSError:
        return None


def code_of(emulator: Emulator, ns: str, name: str) -> str:
    cm = get(emulator, "configmaps", ns, name)
    assert cm is not None, name
    return str(cm["data"]["main.py"])


def test_canary_splits_replicas_then_promote_rolls_everything_to_it(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str, profile: Any, tmp_path: Any) -> None:
    ns = k8s_namespace
    wait_ready(apply_server(tier, name="cn", replicas=4, env=["A=1"]))
    svc = tier.apply(tier.make_spec(V2, name="cn", replicas=4, port=8000, env=["A=2"], canary=25))
    assert svc.record.spec["live_canary"]["replicas"] == 1 and svc.record.spec["live_canary"]["total"] == 4
    st = wait_for(lambda: split_ready(tier, svc, 3, 1), what="3 stable + 1 canary ready")
    assert st is not None and st.canary is not None
    assert "; canary 25 %: READY 1/1, 0 restarts" in tier.summary(svc.record, st)
    listed = tier.registry.find_by_name(tier.name, "cn")
    assert listed is not None and listed.detail == "3/3 + canary 1/1"  # what %tiers jobs shows
    stable, canary = pods_by_track(emulator, ns, "cn")
    assert len(stable) == 3 and len(canary) == 1 and canary[0].startswith("cn-canary-")
    # Both revisions' pods are listed, each marked with its track (issue 29 §3); the counts stay
    # the stable one's.
    assert {p.name for p in st.pods if p.track == "stable"} == set(stable)
    assert {p.name for p in st.pods if p.track == "canary"} == set(canary)
    assert svc.port_forward(track="canary") != svc.port_forward(track="stable")
    assert serve_state.state_label(st) == "READY 4/4 (stable 3/3, canary 1/1)"
    rows = serve_state.pod_rows(st, 0.0)
    assert [r[8] for r in rows] == ["stable"] * 3 + ["canary"] and all(r[7] for r in rows)
    # One Service for both revisions; the canary has its own code and env.
    svc_obj = get(emulator, "services", ns, "cn")
    assert svc_obj is not None and svc_obj["spec"]["selector"] == {"app.kubernetes.io/name": "cn"}
    assert "v2 from" in code_of(emulator, ns, "cn-canary-code")
    assert "hello from" in code_of(emulator, ns, "cn-code")
    secret = get(emulator, "secrets", ns, "cn-canary-env")
    assert secret is not None and base64.b64decode(secret["data"]["A"]) == b"2"

    # Promoted from a fresh tier (a new kernel, the sidebar): nothing of the cell is needed.
    other = K8sTier(profile, Registry(tier.registry.path))
    try:
        line = other.promote(other.registry.find_by_name(other.name, "cn"))
    finally:
        other.close()
    assert "canary promoted" in line
    wait_for(lambda: (get(emulator, "deployments", ns, "cn-canary") is None
                      and pods_by_track(emulator, ns, "cn") == (pods_by_track(emulator, ns, "cn")[0], [])
                      and len(pods_by_track(emulator, ns, "cn")[0]) == 4
                      and tier.service_status(svc.record).state is ServiceState.READY) or None,
             what="4 promoted pods, canary gone")
    assert "v2 from" in code_of(emulator, ns, "cn-code")
    assert base64.b64decode(get(emulator, "secrets", ns, "cn-env")["data"]["A"]) == b"2"  # type: ignore[index]  # checked just above by the rollout
    for kind in ("configmaps", "secrets"):
        assert get(emulator, kind, ns, f"cn-canary-{'code' if kind == 'configmaps' else 'env'}") is None
    dep = get(emulator, "deployments", ns, "cn")
    assert dep is not None and TRACK_LABEL not in dep["spec"]["template"]["metadata"]["labels"]
    record = tier.registry.find_by_name(tier.name, "cn")
    assert record is not None and "live_canary" not in record.spec and "v2 from" in record.script
    url = svc.port_forward()
    assert wait_for(lambda: (answer(url) or "").startswith("v2 from cn-") or None, what="v2 answering")
    # An unchanged re-run of the promoted cell (without --canary) changes nothing.
    before = dep["metadata"].get("generation")
    tier.apply(tier.make_spec(V2, name="cn", replicas=4, port=8000, env=["A=2"]))
    after = get(emulator, "deployments", ns, "cn")
    assert after is not None and after["metadata"].get("generation") == before
    tier.delete(svc.record)


def test_rollback_removes_the_canary_and_gives_the_replicas_back(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    wait_ready(apply_server(tier, name="rb", replicas=3))
    svc = tier.apply(tier.make_spec(V2, name="rb", replicas=3, port=8000, canary=34))
    wait_for(lambda: split_ready(tier, svc, 2, 1), what="2 stable + 1 canary ready")
    with pytest.raises(TiersError, match="runs a canary: roll the canary back first"):
        svc.rollback(revision=1)  # a revision rollback waits until the canary is settled
    assert "canary removed" in svc.rollback()
    wait_for(lambda: (get(emulator, "deployments", ns, "rb-canary") is None
                      and pods_by_track(emulator, ns, "rb")[1] == []
                      and len(pods_by_track(emulator, ns, "rb")[0]) == 3) or None,
             what="3 stable pods, no canary")
    assert get(emulator, "configmaps", ns, "rb-canary-code") is None
    assert "hello from" in code_of(emulator, ns, "rb-code")
    status = wait_ready(svc)
    assert status.canary is None and status.desired == 3
    with pytest.raises(TiersError, match="has no canary to promote"):
        svc.promote()
    tier.delete(svc.record)


def test_rerunning_without_canary_replaces_the_canary_and_delete_removes_it(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    wait_ready(apply_server(tier, name="rr", replicas=2))
    svc = tier.apply(tier.make_spec(V2, name="rr", replicas=2, port=8000, canary=50))
    wait_for(lambda: get(emulator, "deployments", ns, "rr-canary"), what="the canary Deployment")
    tier.apply(tier.make_spec(V2, name="rr", replicas=2, port=8000))  # the new cell as the service
    assert get(emulator, "deployments", ns, "rr-canary") is None
    record = tier.registry.find_by_name(tier.name, "rr")
    assert record is not None and "live_canary" not in record.spec
    tier.apply(tier.make_spec(V2, name="rr", replicas=2, port=8000, canary=50))
    wait_for(lambda: get(emulator, "deployments", ns, "rr-canary"), what="a canary again")
    tier.delete(svc.record)
    wait_for(lambda: not live_pods(emulator, ns, "rr") or None, what="every pod gone")
    assert get(emulator, "deployments", ns, "rr-canary") is None
    assert get(emulator, "configmaps", ns, "rr-canary-code") is None


def test_a_canary_needs_a_live_rolling_service(tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    with pytest.raises(SpecError, match="deploy it without --canary first"):
        tier.apply(tier.make_spec(V2, name="nothere", replicas=4, port=8000, canary=25))
    assert get(emulator, "deployments", k8s_namespace, "nothere-canary") is None
    wait_ready(apply_server(tier, name="bgc", strategy="bluegreen"), GUARD)
    with pytest.raises(SpecError, match="blue-green"):
        tier.apply(tier.make_spec(V2, name="bgc", replicas=4, port=8000, canary=25))
    text = tier.render(tier.make_spec(V2, name="web", replicas=10, port=8000, canary=10))
    assert "name: web-canary\n" in text and "kind: Service\n" not in text and "replicas: 1\n" in text


class PodStream:
    """Every pod change of one service in the emulator's store, in order (the store calls its
    subscribers as each change is written, so nothing is missed between two polls)."""

    def __init__(self, emulator: Emulator, ns: str, name: str) -> None:
        self.emulator, self.ns, self.name = emulator, ns, name
        self.events: list[tuple[str, dict[str, Any]]] = []
        with emulator.store.lock:  # the pods as they are, then every change from there on
            self.before = {p["metadata"]["name"]: p for p in live_pods(emulator, ns, name)}
            emulator.store.subscribe(self._on_change)

    def _on_change(self, etype: str, resource: str, obj: dict[str, Any]) -> None:
        md = obj.get("metadata") or {}
        if (resource == "pods" and md.get("namespace") == self.ns
                and (md.get("labels") or {}).get("app.kubernetes.io/name") == self.name):
            self.events.append((etype, obj))

    def close(self) -> None:
        self.emulator.store.unsubscribe(self._on_change)

    def ready_counts(self) -> list[int]:
        """How many pods were ready (and not terminating) after each change."""
        pods = dict(self.before)
        counts = [sum(1 for p in pods.values() if _ready(p))]
        for etype, obj in list(self.events):
            name = obj["metadata"]["name"]
            if etype == "DELETED":
                pods.pop(name, None)
            else:
                pods[name] = obj
            counts.append(sum(1 for p in pods.values() if _ready(p)))
        return counts

    def added(self) -> list[dict[str, Any]]:
        return [obj for etype, obj in list(self.events) if etype == "ADDED"]


def _ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _hash(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get("pod-template-hash"))


def test_promote_keeps_every_replica_ready_and_starts_no_pod_of_the_old_revision(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    """Issue 29 §4: promoting took ready from 2 to 1 (the canary removed at once) and, as
    a real Deployment controller scales the old ReplicaSet first when replicas and template change
    in one write, started a pod of the OLD code beside the new one. Surge first, then remove the
    canary: ready never below the total, and every pod started is of the canary's revision."""
    ns = k8s_namespace
    wait_ready(apply_server(tier, name="pm", replicas=2))
    svc = tier.apply(tier.make_spec(V2, name="pm", replicas=2, port=8000, canary=50))
    wait_for(lambda: split_ready(tier, svc, 1, 1), what="1 stable + 1 canary ready")
    old_hashes = {_hash(p) for p in pods_by_track_objects(emulator, ns, "pm")[0]}
    stream = PodStream(emulator, ns, "pm")
    try:
        line = svc.promote()
        assert "promoted" in line
        wait_for(lambda: (get(emulator, "deployments", ns, "pm-canary") is None
                          and not pods_by_track(emulator, ns, "pm")[1]
                          and len(pods_by_track(emulator, ns, "pm")[0]) == 2
                          and tier.service_status(svc.record).state is ServiceState.READY) or None,
                 what="2 promoted pods, canary gone")
    finally:
        stream.close()
    counts = stream.ready_counts()
    assert counts and min(counts) >= 2, f"ready dipped below 2 during the promote: {counts}"
    started_old = [p["metadata"]["name"] for p in stream.added() if _hash(p) in old_hashes]
    assert not started_old, f"pods of the old revision started during the promote: {started_old}"
    tier.delete(svc.record)


def pods_by_track_objects(emulator: Emulator, ns: str, name: str
                          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    stable: list[dict[str, Any]] = []
    canary: list[dict[str, Any]] = []
    for p in live_pods(emulator, ns, name):
        labels = p["metadata"].get("labels") or {}
        (canary if labels.get(TRACK_LABEL) == "canary" else stable).append(p)
    return stable, canary
