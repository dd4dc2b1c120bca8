"""Issue 42 on the emulator: the /dev/shm volume is rendered, applied, checked by the API server and
visible in the pod spec and to the kubelet; a bad mount or size is refused as a real API server
refuses it; and a crash-looping vLLM's summary names the /dev/shm cause and --shm-size.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.k8s.tier import K8sTier
from tests.k8s.conftest import GUARD, SERVER, wait_for
from tests.k8s.test_k8s_tier import live_pods, objects, settle, wait_ready
from tests.k8s_emulator.emulator import Emulator

CRASH_LOGS = Path(__file__).resolve().parents[1] / "unit" / "data" / "crash_logs"
VLLM_LOG = CRASH_LOGS / "vllm_0.32_shm_reconstructed.log"
DSHM = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}


def _pod_spec(emulator: Emulator, ns: str, name: str) -> dict:  # type: ignore[type-arg]
    pods = live_pods(emulator, ns, name)
    assert pods
    return pods[0]["spec"]  # type: ignore[no-any-return]


def test_every_pod_gets_its_dev_shm_volume(tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    service = tier.apply(tier.make_spec(SERVER, name="shm", port=8000))
    wait_ready(service)
    dep = objects(emulator, "deployments", k8s_namespace, "shm")[0]
    assert DSHM in dep["spec"]["template"]["spec"]["volumes"]
    spec = _pod_spec(emulator, k8s_namespace, "shm")
    assert DSHM in spec["volumes"]
    assert MOUNT in spec["containers"][0]["volumeMounts"]
    pod = live_pods(emulator, k8s_namespace, "shm")[0]["metadata"]["name"]
    worker = emulator.kubelet.worker(k8s_namespace, pod)
    assert worker is not None and worker.volumes["dshm"].is_dir()  # the kubelet made the volume

    # --shm-size 0: the runtime's own /dev/shm; the pods roll without the volume.
    tier.apply(tier.make_spec(SERVER, name="shm", port=8000, shm_size="0"))

    def rolled() -> bool:
        pods = live_pods(emulator, k8s_namespace, "shm")
        return bool(pods) and all(not any(v["name"] == "dshm" for v in p["spec"]["volumes"]) for p in pods)

    wait_for(rolled, GUARD, "pods without the dshm volume")
    wait_ready(service)


def test_the_api_server_refuses_a_mount_of_no_volume_and_a_bad_size(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    no_volume = {"Deployment": {"spec": {"template": {"spec": {"containers": [
        {"name": "server", "volumeMounts": [{"name": "code", "mountPath": "/jt/code"},
                                           {"name": "nope", "mountPath": "/dev/shm"}]}]}}}}}
    with pytest.raises(TiersError) as err:
        tier.apply(tier.make_spec(SERVER, name="bad", port=8000, patch=no_volume))
    assert "spec.template.spec.containers[0].volumeMounts[1].name" in str(err.value)
    assert 'Not found: "nope"' in str(err.value)
    twice = {"Deployment": {"spec": {"template": {"spec": {"containers": [
        {"name": "server", "volumeMounts": [{"name": "code", "mountPath": "/dev/shm"}, MOUNT]}]}}}}}
    with pytest.raises(TiersError) as err:
        tier.apply(tier.make_spec(SERVER, name="bad", port=8000, patch=twice))
    assert 'volumeMounts[1].mountPath: must be unique (got "/dev/shm")' in str(err.value)
    size = {"Deployment": {"spec": {"template": {"spec": {"volumes": [
        {"name": "code", "configMap": {"name": "bad-code"}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "lots"}}]}}}}}
    with pytest.raises(TiersError) as err:
        tier.apply(tier.make_spec(SERVER, name="bad", port=8000, patch=size))
    assert "quantities must match the regular expression" in str(err.value)
    typo = {"Deployment": {"spec": {"template": {"spec": {"volumes": [
        {"name": "code", "configMap": {"name": "bad-code"}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "size_limit": "1Gi"}}]}}}}}
    with pytest.raises(TiersError) as err:
        tier.apply(tier.make_spec(SERVER, name="bad", port=8000, patch=typo))
    assert "size_limit" in str(err.value)
    assert not objects(emulator, "deployments", k8s_namespace, "bad")


def test_a_crash_looping_vllms_summary_names_dev_shm_and_the_option(tier: K8sTier) -> None:
    """A pod that writes vLLM's start-up failure (reconstructed, see tests/unit/data/crash_logs)
    and exits 1, as the engine does with 64 MiB of /dev/shm: the summary quotes the cause and
    --shm-size, not the last line ("See root cause above")."""
    body = f"import sys\nsys.stdout.write({VLLM_LOG.read_text(encoding='utf-8')!r})\nsys.exit(1)\n"
    service = tier.apply(tier.make_spec(body, name="vllm", port=8000))
    status = settle(tier, service, lambda s: s.state is ServiceState.FAILED and
                    any(p.reason == "CrashLoopBackOff" for p in s.pods), "CrashLoopBackOff")
    line = tier.summary(service.record, status)
    assert "\n" not in line
    assert "CrashLoopBackOff (exit 1" in line, line
    assert "cause: RuntimeError: Insufficient space in /dev/shm for shared-memory allocation" in line, line
    assert "fix: give the pods a larger /dev/shm (160 MiB required, 64 MiB free): --shm-size 1Gi" in line
    assert "See root cause above" not in line
