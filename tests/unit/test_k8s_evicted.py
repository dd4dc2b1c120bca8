"""An evicted pod (node-pressure eviction by the kubelet, 1.28): the object stays with ``phase:
Failed``, ``reason: Evicted`` and the eviction manager's message, its container terminated by the
kubelet (exit 143 or 137). The pod row and the summary must name the eviction, not the exit code,
and the pod is not a replica (the ReplicaSet has made a replacement)."""

from __future__ import annotations

import random
from typing import Any

from jupyter_tiers.app.viewstate.serve import pod_problem, pod_rows
from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.k8s.parse import pod_info, service_status
from jupyter_tiers.serving.status import canary_status, describe_pod_problem, summary_line, terminal_words

MESSAGE = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "
           "Container server was using 20980Ki, request is 0, has larger consumption of memory. ")
HASH = "5c88689f44"
T0 = 1_796_000_000.0  # 2026-11-30


def _stamp(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, *, evicted: bool = False, ready: bool = True, at: float = T0,
         phase: str = "Running") -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "web", "pod-template-hash": HASH}
    meta = {"name": name, "namespace": "ns", "uid": name + "-uid", "labels": labels,
            "creationTimestamp": _stamp(at - 60)}
    if evicted:
        conditions = [
            {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
             "message": MESSAGE, "lastTransitionTime": _stamp(at)},
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "PodFailed", "lastTransitionTime": _stamp(at)},
            {"type": "ContainersReady", "status": "False", "reason": "PodFailed"},
            {"type": "PodScheduled", "status": "True"},
        ]
        state = {"terminated": {"exitCode": 143, "reason": "Error", "startedAt": _stamp(at - 50),
                                "finishedAt": _stamp(at)}}
        status = {"phase": "Failed", "reason": "Evicted", "message": MESSAGE, "conditions": conditions,
                  "containerStatuses": [{"name": "server", "state": state, "lastState": {},
                                         "ready": False, "restartCount": 0}]}
    else:
        status = {"phase": phase, "conditions": [
            {"type": "Ready", "status": "True" if ready else "False",
             **({} if ready else {"reason": "ContainersNotReady"})},
            {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "server", "ready": ready, "restartCount": 0,
                                   "state": {"running": {"startedAt": _stamp(at)}} if phase == "Running"
                                   else {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}}]}
    return {"metadata": meta, "spec": {"nodeName": "n1"}, "status": status}


def _deployment(*, ready: int, available: int, replicas: int = 2, rolled_out: bool = True) -> dict[str, Any]:
    reason = "NewReplicaSetAvailable" if rolled_out else "ReplicaSetUpdated"
    return {"metadata": {"name": "web", "generation": 1, "creationTimestamp": _stamp(T0 - 600),
                         "annotations": {"deployment.kubernetes.io/revision": "1"}},
            "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                       "readyReplicas": ready, "availableReplicas": available,
                       "conditions": [{"type": "Progressing", "status": "True", "reason": reason,
                                       "message": f'ReplicaSet "web-{HASH}" has successfully progressed.'}]}}


def test_an_evicted_pod_is_named_evicted_not_by_its_exit_code() -> None:
    info = pod_info(_pod("web-5c88689f44-aaaaa", evicted=True))
    assert (info.phase, info.ready, info.reason) == ("Failed", False, "Evicted")
    assert info.message == MESSAGE.strip()
    assert pod_problem(info) == "Evicted: " + MESSAGE.strip()
    assert describe_pod_problem(info) == (
        "pod web-5c88689f44-aaaaa Evicted: The node was low on resource: memory")


def test_while_replacements_start_the_summary_names_the_eviction() -> None:
    pods = [_pod("web-5c88689f44-aaaaa", evicted=True), _pod("web-5c88689f44-bbbbb", evicted=True),
            _pod("web-5c88689f44-ccccc", ready=False, phase="Pending", at=T0 + 1),
            _pod("web-5c88689f44-ddddd", ready=False, phase="Pending", at=T0 + 1)]
    status = service_status("web", _deployment(ready=0, available=0), pods, [], now=T0 + 5)
    assert status.state is ServiceState.DEPLOYING
    assert status.reason == ("0 of 2 updated replicas are available; pod web-5c88689f44-aaaaa Evicted: "
                             "The node was low on resource: memory (and 1 more)")
    assert "Evicted: The node was low on resource: memory" in summary_line(status)


def test_once_replaced_the_evicted_pods_are_not_replicas() -> None:
    pods = [_pod("web-5c88689f44-aaaaa", evicted=True),
            _pod("web-5c88689f44-ccccc", at=T0 + 1), _pod("web-5c88689f44-ddddd", at=T0 + 1)]
    status = service_status("web", _deployment(ready=2, available=2), pods, [], now=T0 + 30)
    assert (status.state, status.ready, status.desired, status.reason) == (ServiceState.READY, 2, 2, None)
    assert summary_line(status).startswith("service web READY 2/2")
    rows = {r[0]: r for r in pod_rows(status, T0 + 30)}
    assert rows["web-5c88689f44-aaaaa"][1:3] == ["Failed", False]  # shown, not as running
    assert rows["web-5c88689f44-aaaaa"][6].startswith("Evicted: The node was low on resource: memory.")
    assert canary_status(10, status).pods == ("web-5c88689f44-ccccc", "web-5c88689f44-ddddd")


def test_degraded_prefers_a_live_pods_problem_and_old_evictions_are_forgotten() -> None:
    stuck = _pod("web-5c88689f44-zzzzz", ready=False, at=T0 + 1)
    pods = [_pod("web-5c88689f44-aaaaa", evicted=True), _pod("web-5c88689f44-ccccc", at=T0 + 1), stuck]
    probe = {"type": "Warning", "reason": "Unhealthy", "count": 1, "lastTimestamp": _stamp(T0 + 20),
             "message": "Readiness probe failed: connection refused", "metadata": {"uid": "e1"},
             "involvedObject": {"kind": "Pod", "name": "web-5c88689f44-zzzzz",
                                "uid": "web-5c88689f44-zzzzz-uid"}}
    status = service_status("web", _deployment(ready=1, available=1), pods, [probe], now=T0 + 30)
    assert status.state is ServiceState.DEGRADED
    assert "web-5c88689f44-zzzzz" in (status.reason or "") and "Evicted" not in (status.reason or "")
    # an eviction from long ago (beyond the event window) is not why a later rollout waits
    later = [_pod("web-5c88689f44-aaaaa", evicted=True), _pod("web-5c88689f44-ccccc", at=T0 + 5000),
             _pod("web-5c88689f44-eeeee", ready=False, phase="Pending", at=T0 + 5000)]
    status = service_status("web", _deployment(ready=1, available=1), later, [], now=T0 + 5000)
    assert status.state is ServiceState.DEPLOYING and "Evicted" not in (status.reason or "")


def test_terminal_words() -> None:
    assert terminal_words(MESSAGE) == "The node was low on resource: memory"
    assert terminal_words("Pod was terminated in response to imminent node shutdown.") == (
        "Pod was terminated in response to imminent node shutdown")
    assert terminal_words("  ") == ""


def test_terminal_words_fuzz() -> None:
    rng = random.Random(18)
    alphabet = "ab .:\n\t\u00e9"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        words = terminal_words(text)
        assert isinstance(words, str) and "\n" not in words and len(words) <= len(text)
        info = pod_info({"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "Evicted",
                                                               "message": text}})
        assert "\n" not in describe_pod_problem(info)


def test_a_pod_just_evicted_is_not_ready_while_the_deployment_lags() -> None:
    """Found by the chaos run: the pod watch saw the eviction before the ReplicaSet updated the
    Deployment's status (still readyReplicas 2): the status said READY 2/2 beside a Failed pod."""
    pods = [_pod("web-5c88689f44-aaaaa", evicted=True), _pod("web-5c88689f44-ccccc")]
    status = service_status("web", _deployment(ready=2, available=2), pods, [], now=T0 + 1)
    assert (status.ready, status.available) == (1, 1)
    assert status.state is ServiceState.DEGRADED
    assert status.reason == ("1 of 2 replicas are available; pod web-5c88689f44-aaaaa Evicted: "
                             "The node was low on resource: memory")
