"""Parsing of Kubernetes objects into the serving model, driven by the golden transcripts recorded
from a real kube-apiserver 1.28 (tests/unit/snapshots/k8s/golden, copied verbatim from
shared/facts/k8s-golden), and the one-line API error messages."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.app.viewstate.serve import pod_problem
from jupyter_tiers.core.model import PodInfo, ServiceState, ServiceStatus
from jupyter_tiers.k8s.errors import api_error_message
from jupyter_tiers.k8s.parse import (
    MAX_EVENTS,
    current_template_hash,
    describe_pod_problem,
    parse_time,
    pod_info,
    service_status,
)
from jupyter_tiers.serving.status import summary_line

GOLDEN = Path(__file__).parent / "snapshots" / "k8s" / "golden"
REVISION = "deployment.kubernetes.io/revision"


@cache
def golden(name: str) -> dict[str, Any]:
    (path,) = GOLDEN.glob(f"{name}*.json")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def step(name: str, index: int) -> dict[str, Any]:
    result: dict[str, Any] = golden(name)["steps"][index]
    return result


# --- compact watch events -> API objects -----------------------------------------------------


def deployment_from_event(event: dict[str, Any], name: str = "web") -> dict[str, Any]:
    """A Deployment as the API sends it, from a compact watch event of 03, 05f or 09b."""
    meta: dict[str, Any] = {
        "name": event.get("name", name),
        "generation": event["generation"],
        "creationTimestamp": "2026-12-02T17:15:27Z",
    }
    if event.get("revision"):
        meta["annotations"] = {REVISION: event["revision"]}
    if event.get("deletionTimestamp"):
        meta["deletionTimestamp"] = event["deletionTimestamp"]
    if "status" in event:
        status = dict(event["status"])
    else:  # 09b: counters at the top, conditions as [type, status, reason]
        status = {
            k: event[k]
            for k in (
                "observedGeneration",
                "replicas",
                "updatedReplicas",
                "readyReplicas",
                "availableReplicas",
                "unavailableReplicas",
            )
            if k in event
        }
        status["conditions"] = [{"type": t, "status": s, "reason": r} for t, s, r in event["conditions"]]
    return {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {"replicas": event["spec.replicas"]},
        "status": status,
    }


def pod_from_event(event: dict[str, Any]) -> dict[str, Any]:
    """A Pod as the API sends it, from a compact watch event of 04, 05* or 09b."""
    meta: dict[str, Any] = {"name": event["name"]}
    if "pod-template-hash" in event:
        meta["labels"] = {"pod-template-hash": event["pod-template-hash"]}
    if event.get("deletionTimestamp"):
        meta["deletionTimestamp"] = event["deletionTimestamp"]
    status: dict[str, Any] = {"phase": event["phase"]}
    if "conditions" in event:
        status["conditions"] = event["conditions"]
    else:  # 09b: only the Ready condition's status
        status["conditions"] = [{"type": "Ready", "status": s} for s in event.get("ready", [])]
    if event.get("containerStatuses"):
        status["containerStatuses"] = event["containerStatuses"]
    spec = {"nodeName": event["nodeName"]} if event.get("nodeName") else {}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


def pods_at(events: list[dict[str, Any]], t: float) -> list[dict[str, Any]]:
    """Replay a pod watch up to time t."""
    pods: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["t"] > t:
            break
        if event["type"] == "DELETED":
            pods.pop(event["name"], None)
        else:
            pods[event["name"]] = pod_from_event(event)
    return list(pods.values())


def kubectl_words(text: str) -> str:
    """``Waiting for deployment "web" rollout to finish: 1 of 2 updated replicas are available...``
    -> ``1 of 2 updated replicas are available``."""
    return text.split("rollout to finish: ", 1)[-1].removesuffix("...")


def a_deployment(replicas: int = 1, **status: Any) -> dict[str, Any]:
    """A Deployment whose spec is observed, for bare pods of the 05 scenarios."""
    return {
        "metadata": {"name": "svc", "generation": 1, "annotations": {REVISION: "1"}},
        "spec": {"replicas": replicas},
        "status": {
            "observedGeneration": 1,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "unavailableReplicas": replicas,
            **status,
        },
    }


# --- 03 + 04: a fresh rollout and an image change --------------------------------------------


def test_rollout_states_follow_kubectls_rule_through_both_rollouts() -> None:
    deployments = step("03", 3)["events"]
    pod_events = step("04", 0)["events"]
    seen = []
    for event in deployments:
        status = service_status("web", deployment_from_event(event), pods_at(pod_events, event["t"]), [])
        kubectl = event["kubectl_rollout_status_would_print"]
        if "successfully rolled out" in kubectl:
            assert status.state is ServiceState.READY, (event["t"], status)
            assert status.reason is None
        else:
            assert status.state is ServiceState.DEPLOYING, (event["t"], status)
            if "rollout to finish" in kubectl:
                assert status.reason == kubectl_words(kubectl)
            else:
                assert status.reason == "waiting for the new spec to be observed"
        seen.append(status.state)
    assert seen.count(ServiceState.READY) == 2  # once per rollout
    intermediate = service_status("web", deployment_from_event(deployments[4]), [], [])
    assert (intermediate.state, intermediate.reason) == (
        ServiceState.DEPLOYING,
        "1 of 2 updated replicas are available",
    )
    assert (intermediate.ready, intermediate.available, intermediate.desired) == (1, 1, 2)
    final = service_status("web", deployment_from_event(deployments[-1]), pods_at(pod_events, 99), [])
    assert (final.state, final.ready, final.available, final.desired, final.updated) == (
        ServiceState.READY,
        2,
        2,
        2,
        2,
    )
    assert final.revision == "2"
    assert {p.revision for p in final.pods} == {"bdb6dd87f"}
    assert summary_line(final, 72, None) == "service web READY 2/2 in 00:01:12 (revision 2)"


def test_current_revision_is_read_from_the_progressing_condition() -> None:
    deployments = step("03", 3)["events"]
    assert current_template_hash(deployment_from_event(deployments[1])) == "77bdb6c4fb"
    assert current_template_hash(deployment_from_event(deployments[-1])) == "bdb6dd87f"
    assert current_template_hash(deployment_from_event(deployments[0])) is None


def test_pod_phases_through_a_rollout() -> None:
    events = step("04", 0)["events"]
    infos = [pod_info(pod_from_event(e)) for e in events]
    first = infos[0]
    assert (first.phase, first.ready, first.revision, first.reason) == ("Pending", False, "77bdb6c4fb", None)
    creating = infos[4]
    assert (creating.phase, creating.reason, creating.node) == ("Pending", "ContainerCreating", "localhost")
    running_not_ready = infos[6]
    assert (running_not_ready.phase, running_not_ready.ready, running_not_ready.reason) == (
        "Running",
        False,
        None,
    )
    ready = infos[7]
    assert (ready.phase, ready.ready, ready.reason, ready.restarts) == ("Running", True, None, 0)
    deleting = [i for e, i in zip(events, infos, strict=True) if e.get("deletionTimestamp")]
    assert deleting and all(i.phase == "Terminating" and i.reason is None for i in deleting)
    # the killed old pod's exit (137, SIGKILL after the grace period) is kept but is not a failure
    assert any(i.exit_code == 137 for i in deleting)
    full = pod_info(step("04", 0)["full_objects_first_of_each_type"]["MODIFIED"])
    assert full.started_at == parse_time("2026-12-02T17:15:27Z") and full.node == "localhost"


# --- 09b: scale, restart, delete -------------------------------------------------------------


def test_scale_restart_and_delete() -> None:
    deployments, pod_events = (s["events"] for s in golden("09b")["steps"])
    for event in deployments:
        dep = None if event["type"] == "DELETED" else deployment_from_event(event)
        status = service_status("web", dep, pods_at(pod_events, event["t"]), [])
        kubectl = event["kubectl_rollout_status_would_print"]
        if dep is None or event.get("deletionTimestamp"):
            assert status.state is ServiceState.DELETED
        elif "successfully rolled out" in kubectl:
            assert status.state is ServiceState.READY, (event["t"], status)
        else:
            # scaling 2 -> 3 included: a new pod on its way is progress, not degradation
            assert status.state is ServiceState.DEPLOYING, (event["t"], status)


def test_degraded_after_a_completed_rollout_and_scaled_down() -> None:
    conditions = [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]
    dep = a_deployment(2, availableReplicas=1, readyReplicas=1, conditions=conditions)
    running = {
        "metadata": {"name": "svc-6d9f7b8c5c-abcde", "labels": {"pod-template-hash": "6d9f7b8c5c"}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
    }
    status = service_status("svc", dep, [running], [])
    assert status.state is ServiceState.DEGRADED
    assert status.reason == "1 of 2 replicas are available"
    pending = {**running, "status": {"phase": "Pending"}}
    assert service_status("svc", dep, [pending], []).state is ServiceState.DEPLOYING
    zero = a_deployment(0)
    zero["status"] = {"observedGeneration": 1}
    assert service_status("svc", zero, [], []).state is ServiceState.SCALED_DOWN
    assert service_status("svc", None, [], []).state is ServiceState.DELETED


def test_missing_counters_count_as_zero() -> None:
    dep = {
        "metadata": {"name": "web", "generation": 1},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1},
    }
    status = service_status("web", dep, [], [])
    assert (status.state, status.reason) == (
        ServiceState.DEPLOYING,
        "0 out of 2 new replicas have been updated",
    )
    assert (status.updated, status.ready, status.available) == (0, 0, 0)


# --- 05: failure reasons ---------------------------------------------------------------------


def _final(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return step(name, 2)["response"], step(name, 3)["response"]["items"]


def test_err_image_never_pull() -> None:
    pod, events = _final("05a")
    info = pod_info(pod, events)
    assert (info.phase, info.ready, info.reason) == ("Pending", False, "ErrImageNeverPull")
    assert (
        info.message
        == 'Container image "k8sreal.local/does-not-exist:1.0" is not present with pull policy of Never'
    )
    status = service_status("svc", a_deployment(), [pod], events)
    assert status.state is ServiceState.FAILED
    assert status.reason == (
        'pod fail-noimage ErrImageNeverPull: Container image "k8sreal.local/does-not-exist:1.0" '
        "is not present with pull policy of Never"
    )
    watch = [pod_info(pod_from_event(e)).reason for e in step("05a", 1)["events"]]
    assert watch == [None, "ContainerCreating", "ContainerCreating", "ErrImageNeverPull"]


def test_crashloopbackoff_with_restarts() -> None:
    pod, events = _final("05b")
    info = pod_info(pod, events)
    assert (info.phase, info.reason, info.restarts, info.exit_code) == ("Running", "CrashLoopBackOff", 2, 1)
    assert info.message is None  # the kubelet's "back-off 20s ... pod=NAME(UID)" changes every back-off
    status = service_status("svc", a_deployment(), [pod], events)
    assert (status.state, status.reason) == (
        ServiceState.FAILED, "pod fail-crash CrashLoopBackOff (exit 1, 2 restarts)")
    line = summary_line(status, 30, "fatal: something went wrong")
    assert line == (
        "service svc FAILED after 00:00:30: pod fail-crash CrashLoopBackOff (exit 1, 2 restarts)"
        " — last line: fatal: something went wrong"
    )


def test_crash_loop_reads_the_same_in_every_phase_of_the_back_off() -> None:
    """A real kubelet shows ``terminated: Error`` for most of each back-off and
    ``waiting: CrashLoopBackOff`` only at the sync before the restart (05b): both are a crash loop
    once the container has restarted, in the summary, the pod row and the widget."""
    rows, reasons, states = [], [], []
    for event in step("05b", 1)["events"]:
        status = service_status("svc", a_deployment(), [pod_from_event(event)], [])
        states.append(status.state)
        reasons.append(status.reason)
        rows.append(pod_problem(status.pods[0]) if status.pods else "")
    assert states[3] is ServiceState.DEPLOYING  # exited once, restartCount 0: not a loop yet
    assert rows[3] == "Error (exit 1): exit code 1"
    assert states[4:] == [ServiceState.FAILED] * len(states[4:])
    # events 4 and 5: restartCount 1, terminated then waiting; 6 and 7: restartCount 2
    assert rows[4:] == (["CrashLoopBackOff (exit 1, 1 restart)"] * 2
                        + ["CrashLoopBackOff (exit 1, 2 restarts)"] * 2)
    assert reasons[4:] == [f"pod fail-crash {row}" for row in rows[4:]]


def test_crash_loop_cases_without_golden_data() -> None:
    def pod(**cstatus: Any) -> dict[str, Any]:
        return {"metadata": {"name": "p"}, "status": {"phase": "Running", "containerStatuses": [
            {"name": "c", "ready": False, **cstatus}]}}

    term = {"terminated": {"exitCode": 3, "reason": "Error"}}
    # restarted, terminated, exit 0: still a crash loop, and says why a clean exit is one
    clean = pod_info(pod(restartCount=4, state={"terminated": {"exitCode": 0, "reason": "Completed"}}))
    assert (clean.reason, clean.exit_code) == ("CrashLoopBackOff", 0)
    assert clean.message is not None and "a service must keep running" in clean.message
    # restarted and running again: not crash looping (it may have recovered)
    running = pod_info(pod(restartCount=1, state={"running": {}}, lastState=term))
    assert running.reason != "CrashLoopBackOff"
    # OOM kills keep their own name, with the restarts
    oom = pod_info(pod(restartCount=2, state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}}))
    assert oom.reason == "OOMKilled" and describe_pod_problem(oom) == "pod p OOMKilled (exit 137, 2 restarts)"
    # a waiting CrashLoopBackOff with no lastState (trimmed status) has no exit code
    bare = pod_info(pod(restartCount=1, state={"waiting": {"reason": "CrashLoopBackOff"}}))
    assert describe_pod_problem(bare) == "pod p CrashLoopBackOff (1 restart)"


def test_unschedulable_node_selector() -> None:
    pod, events = _final("05c")
    info = pod_info(pod, events)
    assert (info.phase, info.reason) == ("Pending", "Unschedulable")
    assert info.message is not None and info.message.endswith("Preemption is not helpful for scheduling..")
    status = service_status("svc", a_deployment(), [pod], events)
    assert status.state is ServiceState.FAILED
    assert status.reason == (
        "pod fail-nodesel Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node "
        "affinity/selector."
    )


def test_insufficient_gpu() -> None:
    pod, events = _final("05d")
    status = service_status("svc", a_deployment(), [pod], events)
    assert status.state is ServiceState.FAILED
    assert status.reason is not None and "Insufficient nvidia.com/gpu" in status.reason
    assert (
        status.reason == "pod fail-gpu Unschedulable: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )
    # The pod-scoped FailedScheduling Warning is only kept when it is about one of this service's
    # pods; "fail-gpu" is here because it is in `pods`.
    assert [(e.reason, e.object) for e in status.events] == [("FailedScheduling", "Pod/fail-gpu")]


def test_oomkilled() -> None:
    pod, events = _final("05e")
    info = pod_info(pod, events)
    assert (info.reason, info.exit_code, info.restarts) == ("OOMKilled", 137, 2)
    assert info.message is not None and "memory" in info.message
    status = service_status("svc", a_deployment(), [pod], events)
    assert (status.state, status.reason) == (
        ServiceState.FAILED, "pod fail-oom OOMKilled (exit 137, 2 restarts)")
    watch = step("05e", 1)["events"]
    first_kill = pod_info(pod_from_event(watch[3]))
    assert (first_kill.reason, first_kill.exit_code, first_kill.restarts) == ("OOMKilled", 137, 0)
    assert (
        service_status("svc", a_deployment(), [pod_from_event(watch[3])], []).state is ServiceState.DEPLOYING
    )
    assert service_status("svc", a_deployment(), [pod_from_event(watch[4])], []).state is ServiceState.FAILED


def test_readiness_never_ready_then_progress_deadline() -> None:
    pod = step("05f", 4)["response"]
    pod_events = step("05f", 5)["response"]["items"]
    info = pod_info(pod, pod_events)
    assert (info.phase, info.ready, info.reason) == ("Running", False, "Unhealthy")
    assert info.message == (
        'readiness probe failing: Get "http://10.88.0.143:9999/healthz": '
        "dial tcp 10.88.0.143:9999: connect: connection refused"
    )
    assert info.revision == "ff7859b59"
    all_events = pod_events + step("05f", 6)["response"]["items"] + step("05f", 7)["response"]["items"]

    final = service_status("fail-probe", step("05f", 3)["response"], [pod], all_events)
    assert final.state is ServiceState.FAILED
    assert final.reason == (
        'the rollout exceeded its progress deadline (ReplicaSet "fail-probe-ff7859b59" has timed out '
        "progressing); pod fail-probe-ff7859b59-r4m4z Unhealthy: readiness probe failing: Get "
        '"http://10.88.0.143:9999/healthz": dial tcp 10.88.0.143:9999: connect: connection refused'
    )
    unhealthy = [e for e in final.events if e.reason == "Unhealthy"]
    assert len(unhealthy) == 1 and unhealthy[0].count == 18
    assert unhealthy[0].object == "Pod/fail-probe-ff7859b59-r4m4z"
    assert all(e.type == "Warning" for e in final.events)

    before = [e for e in step("05f", 2)["events"] if e["t"] < 15][-1]
    status = service_status("fail-probe", deployment_from_event(before, "fail-probe"), [pod], pod_events)
    assert status.state is ServiceState.DEPLOYING
    assert status.reason is not None
    assert status.reason.startswith(
        "0 of 1 updated replicas are available; pod fail-probe-ff7859b59-r4m4z Unhealthy"
    )


def test_container_creating_names_the_mount_problem_and_exit_zero_is_explained() -> None:
    stuck = {"metadata": {"name": "stuck-creating"}, "status": step("06", 22)["response"]["status"]}
    info = pod_info(stuck, step("06", 21)["response"]["items"])
    assert info.reason == "ContainerCreating"
    assert info.message == 'MountVolume.SetUp failed for volume "cfg" : configmap "does-not-exist" not found'
    trimmed = step("06", 15)["response"]
    logger = {
        "metadata": {"name": "logger"},
        "status": {
            "phase": trimmed["status.phase"],
            "containerStatuses": trimmed["status.containerStatuses"],
        },
    }
    info = pod_info(logger)
    assert (info.reason, info.exit_code) == ("CrashLoopBackOff", 0)
    assert info.message is not None and "a service must keep running" in info.message


# --- 10: events of the HPA -------------------------------------------------------------------


def test_hpa_warnings_are_the_services_events() -> None:
    dep = step("10", 0)["response"]
    events = step("10", 7)["response"]["items"] + step("10", 8)["response"]["items"]
    status = service_status("web", dep, [], events)
    assert status.state is ServiceState.DEPLOYING  # status {}: the spec is not observed yet
    assert {(e.reason, e.object) for e in status.events} == {
        ("FailedGetResourceMetric", "HorizontalPodAutoscaler/web"),
        ("FailedComputeMetricsReplicas", "HorizontalPodAutoscaler/web"),
    }  # not the "ghost" HPA's FailedGetScale
    assert all(e.count == 3 for e in status.events)


# --- events ----------------------------------------------------------------------------------


def _event(
    uid: str,
    name: str,
    reason: str,
    count: int,
    stamp: str,
    kind: str = "Pod",
    message: str = "m",
    type_: str = "Warning",
) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid},
        "involvedObject": {"kind": kind, "name": name},
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": stamp,
        "type": type_,
    }


def test_events_are_deduplicated_filtered_and_capped() -> None:
    dep = {
        "metadata": {"name": "web", "generation": 1, "creationTimestamp": "2026-12-02T17:00:00Z"},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1},
    }
    events = [
        _event("a", "web-77bdb6c4fb-jrbts", "BackOff", 1, "2026-12-02T17:01:00Z", message="old"),
        _event("a", "web-77bdb6c4fb-jrbts", "BackOff", 2, "2026-12-02T17:02:00Z", message="new"),  # MODIFIED
        _event("b", "web-77bdb6c4fb-jrbts", "BackOff", 4, "2026-12-02T17:03:00Z", message="newest"),
        _event("c", "web-api-77bdb6c4fb-jrbts", "BackOff", 1, "2026-12-02T17:04:00Z"),  # another service
        _event("d", "web-77bdb6c4fb", "FailedCreate", 1, "2026-12-02T17:05:00Z", kind="ReplicaSet"),
        _event("e", "web", "Scaled", 1, "2026-12-02T17:05:00Z", kind="Deployment", type_="Normal"),
        _event("f", "web", "FailedGetScale", 1, "2026-12-02T16:00:00Z", kind="HorizontalPodAutoscaler"),
    ]
    status = service_status("web", dep, [], events)
    assert [(e.reason, e.object, e.count, e.message) for e in status.events] == [
        ("BackOff", "Pod/web-77bdb6c4fb-jrbts", 6, "newest"),
        ("FailedCreate", "ReplicaSet/web-77bdb6c4fb", 1, "m"),
    ]  # "f" predates the Deployment: an earlier namesake's
    assert status.events[0].at == parse_time("2026-12-02T17:03:00Z")
    now = parse_time("2026-12-02T17:19:30Z")
    assert now is not None
    recent = service_status("web", dep, [], events, now=now)
    assert [e.reason for e in recent.events] == ["FailedCreate"]
    many = [
        _event(str(i), f"web-77bdb6c4fb-x{i:04d}"[:20], f"R{i}", 1, f"2026-12-02T17:{i % 60:02d}:00Z")
        for i in range(60)
    ]
    pods = [{"metadata": {"name": e["involvedObject"]["name"]}} for e in many]
    capped = service_status("web", dep, pods, many).events
    assert len(capped) == MAX_EVENTS
    assert [e.at for e in capped] == sorted(e.at or 0 for e in capped)


def test_parse_time() -> None:
    assert parse_time("1970-01-01T00:00:10Z") == 10.0
    assert parse_time("2026-12-02T17:06:12.452000816Z") == pytest.approx(
        parse_time("2026-12-02T17:06:12Z") + 0.452
    )
    assert parse_time("1970-01-01T01:00:00+01:00") == 0.0
    assert parse_time("") is None and parse_time(None) is None and parse_time("yesterday") is None


# --- summary line ----------------------------------------------------------------------------


def test_summary_lines() -> None:
    ready = ServiceStatus(
        name="llama-svc",
        state=ServiceState.READY,
        desired=2,
        updated=2,
        ready=2,
        available=2,
        revision="3",
        endpoint="http://llama-svc.team-llm.svc:8000",
    )
    assert summary_line(ready, 72) == (
        "service llama-svc READY 2/2 in 00:01:12 — http://llama-svc.team-llm.svc:8000 (revision 3)"
    )
    failed = ServiceStatus(
        name="llama-svc",
        state=ServiceState.FAILED,
        revision="3",
        reason="pod llama-svc-7c9f-x2 CrashLoopBackOff (exit 1)",
        pods=(PodInfo(name="llama-svc-7c9f-x2"),),
    )
    assert summary_line(failed, None, "ModuleNotFoundError: No module named 'vllm'\n") == (
        "service llama-svc FAILED: pod llama-svc-7c9f-x2 CrashLoopBackOff (exit 1)"
        " — last line: ModuleNotFoundError: No module named 'vllm'"
    )
    deploying = ServiceStatus(
        name="web",
        state=ServiceState.DEPLOYING,
        desired=2,
        available=1,
        reason="1 of 2 updated replicas are available",
        revision="1",
    )
    assert summary_line(deploying, 5) == (
        "service web DEPLOYING 1/2 after 00:00:05: 1 of 2 updated replicas are available (revision 1)"
    )
    assert summary_line(ServiceStatus(name="web", state=ServiceState.DELETED), 5) == "service web DELETED"


# --- API errors ------------------------------------------------------------------------------


def _status_body(name: str, index: int) -> tuple[int, str]:
    s = step(name, index)
    return s["status"], json.dumps(s["response"])


ERRORS: list[tuple[str, int, str]] = [
    (
        "07",
        0,
        '404: namespace "does-not-exist" does not exist — create it (kubectl create namespace) '
        "or set the profile's namespace",
    ),
    ("07", 2, '404 Not Found: deployments.apps "nope" not found'),
    ("07", 8, '409 Conflict: deployments.apps "web" already exists'),
    (
        "07",
        12,
        '422 Invalid: Deployment "neg" rejected: spec.replicas: must be greater than or equal to 0 (got -1)',
    ),
    (
        "07",
        15,
        '422 Invalid: Deployment "badport" rejected: spec.template.spec.containers[0].ports[0].containerPort:'
        " must be between 1 and 65535, inclusive (got 70000)",
    ),
    ("07", 17, "400 Bad Request: invalid object type: /, Kind="),
    ("07", 18, "400 Bad Request: the name of the object (other) does not match the name on the URL (web)"),
    (
        "07",
        24,
        '403 Forbidden: deployments.apps "sa-web" is forbidden: User "system:serviceaccount:golden:viewer" '
        'cannot patch resource "deployments" in API group "apps" in the namespace "golden" — the profile\'s '
        "credentials lack this permission; ask a cluster admin for a Role that grants it, or use a profile "
        "with another namespace or account",
    ),
    (
        "07",
        30,
        "401 Unauthorized: the cluster rejected the credentials — the token or certificate in the "
        "profile's kubeconfig is invalid or expired; log in again or refresh it",
    ),
    (
        "02",
        15,
        '409 apply conflict: .spec.replicas owned by "other-tool" — another tool changed these fields; '
        "re-apply with force to take them back, or leave them out of the manifest",
    ),
    ("02", 17, "422 Invalid: PatchOptions rejected: fieldManager: is required for apply patch"),
    (
        "10",
        3,
        '422 Invalid: HorizontalPodAutoscaler "inverted" rejected: spec.maxReplicas: must be greater than '
        "or equal to `minReplicas` (got 3)",
    ),
]


@pytest.mark.parametrize(("name", "index", "expected"), ERRORS, ids=[f"{e[0]}-{e[1]}" for e in ERRORS])
def test_api_error_messages(name: str, index: int, expected: str) -> None:
    status, body = _status_body(name, index)
    assert api_error_message(status, body) == expected
    assert api_error_message(status, json.loads(body)) == expected  # parsed bodies too


def test_every_golden_status_body_gives_one_line() -> None:
    for name in ("02", "07", "10"):
        for s in golden(name)["steps"]:
            if (
                isinstance(s.get("response"), dict)
                and s["response"].get("kind") == "Status"
                and s["status"] >= 400
            ):
                text = api_error_message(s["status"], json.dumps(s["response"]))
                assert "\n" not in text and text.startswith(str(s["status"])), text
                causes = s["response"].get("details", {}).get("causes", [])
                fields = [c["field"] for c in causes]
                named = s["response"].get("details", {}).get("name", "")
                kept = s["response"]["message"][:20] in text or f'"{named}"' in text
                assert all(f in text for f in fields) if fields else kept, text


def test_403_keeps_the_verb_and_resource_and_anonymous_is_told_apart() -> None:
    for index, words in (
        (23, 'cannot create resource "deployments"'),
        (26, 'cannot patch resource "deployments/scale"'),
        (27, 'cannot list resource "secrets"'),
        (29, "at the cluster scope"),
    ):
        assert words in api_error_message(*_status_body("07", index))
    anonymous = api_error_message(*_status_body("07", 32))
    assert '"system:anonymous"' in anonymous and "no credentials were sent" in anonymous


def test_conflict_through_the_scale_subresource_and_server_errors() -> None:
    body = {
        "kind": "Status",
        "status": "Failure",
        "reason": "Conflict",
        "code": 409,
        "message": 'Apply failed with 1 conflict: conflict with "OpenAPI-Generator" with subresource "scale" '
        "using apps/v1: .spec.replicas",
        "details": {
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "field": ".spec.replicas",
                    "message": 'conflict with "OpenAPI-Generator" with subresource "scale" using apps/v1',
                }
            ]
        },
    }
    assert api_error_message(409, body).startswith(
        '409 apply conflict: .spec.replicas owned by "OpenAPI-Generator" (through the scale subresource)'
    )
    assert "unknown field .spec.replicaz" in api_error_message(*_status_body("02", 19))
    assert "a resource quantity is malformed" in api_error_message(*_status_body("07", 16))


def test_unreachable_and_bodies_that_are_not_status() -> None:
    assert api_error_message(0, None, verb="patch", resource="deployments", namespace="team") == (
        "cannot reach the Kubernetes API server while trying to patch deployments"
        ' in namespace "team": no answer'
    )
    handshake = (
        "Handshake status 404 Not Found -+-+- {'audit-id': 'x'} -+-+- "
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        '"message":"pods \\"does-not-exist\\" not found","reason":"NotFound",'
        '"details":{"name":"does-not-exist","kind":"pods"},"code":404}'
    )
    assert api_error_message(0, handshake) == '404 Not Found: pods "does-not-exist" not found'
    assert api_error_message(503, "<html>\nBad gateway\n</html>") == (
        "503: the API server is unavailable: <html> Bad gateway </html> — try again shortly"
    )
    assert api_error_message(404, None, resource="services", namespace="x") == (
        '404 Not Found: services in namespace "x"'
    )
