"""Rolling a rolling service back (``svc.rollback(revision=N)``, ``%tiers rollback NAME --to N``)
against the Kubernetes emulator: the Deployment's template goes back to that revision's
ReplicaSet, which becomes the newest revision, and its pods run that revision's cell body again
(the code ConfigMap is restored too); running the cell again rolls forward. Refusals are one line."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers.core.errors import TiersError, Unsupported
from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.engine.handles import Service
from jupyter_tiers.k8s.tier import K8sTier
from tests.k8s.conftest import SERVER, wait_for
from tests.k8s.test_k8s_magic import ip, serve, tiers, usage_error  # noqa: F401
from tests.k8s_emulator.emulator import Emulator

REVISION = "deployment.kubernetes.io/revision"


def body(version: str) -> str:
    return SERVER.replace('print("serving on"', f'print("version {version}, serving on"')


def revision_of(emulator: Emulator, ns: str) -> str:
    dep = emulator.store.get("deployments", ns, "web") or {}
    return (dep.get("metadata", {}).get("annotations") or {}).get("deployment.kubernetes.io/revision", "")


def live_pods(emulator: Emulator, ns: str) -> list[dict[str, Any]]:
    return [p for p in emulator.store.list("pods", ns, label_selector={"app.kubernetes.io/name": "web"})
            if not p["metadata"].get("deletionTimestamp")]


def settled(emulator: Emulator, ns: str, revision: str) -> bool:
    """The rollout to ``revision`` is done: observed, one available pod, and that pod is of the
    ReplicaSet carrying that revision (the status alone may still describe the previous one)."""
    dep = emulator.store.get("deployments", ns, "web") or {}
    st = dep.get("status") or {}
    pods = live_pods(emulator, ns)
    replicasets = emulator.store.list("replicasets", ns, label_selector={"app.kubernetes.io/name": "web"})
    current = [rs for rs in replicasets
               if (rs["metadata"].get("annotations") or {}).get(REVISION) == revision]
    hashes = {(p["metadata"].get("labels") or {}).get("pod-template-hash") for p in pods}
    counts = (st.get("updatedReplicas"), st.get("availableReplicas"), st.get("replicas"))
    return (revision_of(emulator, ns) == revision and len(current) == 1 and counts == (1, 1, 1)
            and st.get("observedGeneration", 0) >= dep["metadata"].get("generation", 1)
            and len(pods) == 1 and hashes == {current[0]["metadata"]["labels"].get("pod-template-hash")})


def apply(tier: K8sTier, version: str, **options: Any) -> Service:
    service = tier.apply(tier.make_spec(body(version), name="web", port=8000, **options))
    status = service.wait_ready(120)
    assert status.state is ServiceState.READY, (status, service.logs())
    return service


def test_rollback_runs_the_earlier_cell_again_then_the_cell_rolls_forward(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    apply(tier, "A")
    wait_for(lambda: settled(emulator, ns, "1"), what="revision 1 settled")
    service = apply(tier, "B")
    wait_for(lambda: settled(emulator, ns, "2"), what="revision 2 settled")
    assert "version B" in emulator.store.get("configmaps", ns, "web-code")["data"]["main.py"]

    message = service.rollback()
    assert message.startswith("service web rolling back to revision 1 (it becomes revision 3)"), message
    wait_for(lambda: settled(emulator, ns, "3"), what="revision 3 settled")
    assert "version A" in emulator.store.get("configmaps", ns, "web-code")["data"]["main.py"]
    # The one pod that stays (an old one may still be terminating): it runs body A.
    pod = live_pods(emulator, ns)[0]["metadata"]["name"]
    wait_for(lambda: "version A, serving on" in service.logs(pod=pod),
             what="the pod of revision 3 runs body A", show=lambda: service.logs(pod=pod))
    assert "version B" not in service.logs(pod=pod)
    # Revision 1's ReplicaSet became revision 3 (no new ReplicaSet), as a real controller does.
    replicasets = emulator.store.list("replicasets", ns, label_selector={"app.kubernetes.io/name": "web"})
    assert sorted(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                  for rs in replicasets) == ["2", "3"]
    assert service.rollback(3).endswith("nothing changed")

    # Running cell B again rolls forward (revision 2's ReplicaSet becomes revision 4).
    apply(tier, "B")
    wait_for(lambda: settled(emulator, ns, "4"), what="revision 4 settled")
    assert "version B" in emulator.store.get("configmaps", ns, "web-code")["data"]["main.py"]

    with pytest.raises(TiersError, match=r"no revision 1 \(revisions kept: 3, 4"):
        service.rollback(1)


def test_rollback_refuses_other_env_values_and_blue_green(tier: K8sTier, emulator: Emulator,
                                                          k8s_namespace: str) -> None:
    apply(tier, "A", env=(("MODE", "one"),))
    wait_for(lambda: settled(emulator, k8s_namespace, "1"), what="revision 1 settled")
    service = apply(tier, "A", env=(("MODE", "two"),))
    with pytest.raises(TiersError, match="revision 1 ran with other --env values than now"):
        service.rollback()
    assert revision_of(emulator, k8s_namespace) == "2"
    green = tier.apply(tier.make_spec(body("A"), name="bg", port=8000, strategy="bluegreen"))
    with pytest.raises(Unsupported, match="blue-green"):
        green.rollback()


def test_tiers_rollback_verb(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],  # noqa: F811
                             emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    serve(ip, capsys, "--name web --wait --text", body("A"))
    wait_for(lambda: settled(emulator, ns, "1"), what="revision 1 settled")
    serve(ip, capsys, "--name web --wait --text", body("B"))
    wait_for(lambda: settled(emulator, ns, "2"), what="revision 2 settled")
    out = tiers(ip, capsys, "rollback web --to 1")
    assert out.startswith("service web rolling back to revision 1 (it becomes revision 3)"), out
    wait_for(lambda: settled(emulator, ns, "3"), what="revision 3 settled")
    message = usage_error(ip, capsys, "%tiers rollback web --to 7")
    assert "no revision 7 (revisions kept: 2, 3" in message, message
    # An argparse refusal is %tiers' usual error plus its usage line (as for every verb).
    result = ip.run_cell("%tiers rollback web --to x")
    assert isinstance(result.error_in_exec, UsageError)
    assert str(result.error_in_exec).startswith("%tiers: argument --to: 'x' is not a whole number")
