"""The emulator's kubelet driven directly through a Store (no HTTP)."""

from __future__ import annotations

import base64
import contextlib
import functools
import re
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.kubelet import Kubelet, go_duration, parse_quantity
from tests.k8s_emulator.store import Store

NS = "default"


wait_for = functools.partial(helpers.wait_for, timeout=60.0)


def make_pod(store: Store, name: str, command: list[str] | None, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "python:3.11-slim", "imagePullPolicy": "IfNotPresent"}
    if command is not None:
        container["command"] = command
    container.update(extra.pop("container", {}))
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": extra.pop("restartPolicy", "Always"),
        "terminationGracePeriodSeconds": 1,
    }
    spec.update(extra)
    return store.create("pods", {"metadata": {"name": name, "namespace": NS}, "spec": spec})


def cstatus(store: Store, name: str) -> dict[str, Any]:
    pod = store.get("pods", NS, name) or {}
    return ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]


def events(store: Store, name: str) -> list[tuple[str, str, str]]:
    evs = sorted(store.list("events", NS), key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [(e["type"], e["reason"], e["message"]) for e in evs if e["involvedObject"]["name"] == name]


def read(kubelet: Kubelet, name: str, **kw: Any) -> bytes:
    it = kubelet.read_log(NS, name, **kw)
    return b"" if it is None else b"".join(it)


def read_soon(kubelet: Kubelet, name: str, **kw: Any) -> bytes:
    """``read`` for a ``wait_for`` loop: a container still waiting to start (400 "is waiting to
    start: ContainerCreating", also between restarts) has no log *yet*, so that reads as b"" and
    the loop keeps waiting up to its bound; any other error still fails the test."""
    try:
        return read(kubelet, name, **kw)
    except ApiError as exc:
        if exc.code == 400 and "is waiting to start" in exc.message:
            return b""
        raise


def test_helpers() -> None:
    assert go_duration(10) == "10s" and go_duration(80) == "1m20s" and go_duration(300) == "5m0s"
    assert go_duration(0.5) == "500ms"
    assert (
        parse_quantity("20Mi") == 20 * 2**20 and parse_quantity("1G") == 1e9 and parse_quantity("100m") == 0.1
    )


def test_running_pod_status_shape_and_logs(store: Store, kubelet: Kubelet) -> None:
    make_pod(
        store,
        "hello",
        [
            "python3",
            "-u",
            "-c",
            "import sys,time\nprint('one')\nprint('two', file=sys.stderr)\nprint('three')\ntime.sleep(600)",
        ],
    )
    pod = wait_for(
        lambda: (
            (p := store.get("pods", NS, "hello"))
            and p["status"].get("phase") == "Running"
            and p["status"]["containerStatuses"][0]["ready"]
            and p
        ),
        what="Running",
    )
    st = pod["status"]
    assert list(st) == [
        "phase",
        "conditions",
        "hostIP",
        "podIP",
        "podIPs",
        "startTime",
        "containerStatuses",
        "qosClass",
    ]
    assert [c["type"] for c in st["conditions"]] == [
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert all(c["status"] == "True" for c in st["conditions"])
    assert st["podIP"].startswith("10.88.")
    cs = st["containerStatuses"][0]
    assert list(cs) == [
        "name",
        "state",
        "lastState",
        "ready",
        "restartCount",
        "image",
        "imageID",
        "containerID",
        "started",
    ]
    assert (
        "running" in cs["state"] and cs["started"] is True and cs["containerID"].startswith("containerd://")
    )
    assert pod["spec"]["nodeName"] == "emulator-node"
    wait_for(lambda: read_soon(kubelet, "hello").count(b"\n") == 3, what="3 log lines")
    assert read(kubelet, "hello") == b"one\ntwo\nthree\n"
    assert read(kubelet, "hello", tail_lines=1) == b"three\n"
    assert read(kubelet, "hello", limit_bytes=6) == b"one\ntw"
    stamped = read(kubelet, "hello", timestamps=True).decode().splitlines()
    assert len(stamped) == 3
    ts, _, text = stamped[0].partition(" ")
    assert text == "one" and ts.endswith("Z") and len(ts.split(".")[1]) == 10  # 9 digits + Z
    assert read(kubelet, "hello", since_seconds=3600) == b"one\ntwo\nthree\n"
    assert read(kubelet, "hello", since_time="2999-01-01T00:00:00Z") == b""
    reasons = [r for _t, r, _m in events(store, "hello") if r != "Unhealthy"]
    assert reasons == ["Scheduled", "Pulled", "Created", "Started"]
    assert ("Normal", "Pulled", 'Container image "python:3.11-slim" already present on machine') in events(
        store, "hello"
    )
    with pytest.raises(ApiError) as e:
        kubelet.read_log(NS, "hello", container="nope")
    assert e.value.code == 400 and e.value.message == "container nope is not valid for pod hello"
    with pytest.raises(ApiError) as e:
        kubelet.read_log(NS, "hello", previous=True)
    assert e.value.message == 'previous terminated container "c" in pod "hello" not found'
    with pytest.raises(ApiError) as e:
        kubelet.read_log(NS, "missing")
    assert e.value.code == 404 and e.value.message == 'pods "missing" not found'


def test_two_pods_bind_the_same_port(store: Store, kubelet: Kubelet) -> None:
    if not kubelet.use_netns:
        pytest.skip("needs root for network namespaces")
    probe = {"readinessProbe": {"httpGet": {"path": "/", "port": 8000}, "periodSeconds": 1}}
    for n in ("a", "b"):
        make_pod(store, n, ["python3", "-m", "http.server", "8000"], container=probe)
    for n in ("a", "b"):
        wait_for(lambda n=n: cstatus(store, n).get("ready"), what=f"{n} ready")
    assert cstatus(store, "a")["restartCount"] == 0 and cstatus(store, "b")["restartCount"] == 0


def test_crashloop_backoff_and_previous_logs(store: Store, kubelet: Kubelet) -> None:
    make_pod(store, "crash", ["sh", "-c", "echo starting; echo 'fatal: something went wrong' >&2; exit 1"])
    # As on a real kubelet (05b): restarted and `terminated: Error` for most of the back-off ...
    term = wait_for(
        lambda: (
            (c := cstatus(store, "crash")) and c.get("restartCount", 0) >= 2
            and "terminated" in c["state"] and c
        ),
        what="terminated between restarts",
    )
    assert term["state"]["terminated"]["reason"] == "Error" and term["state"]["terminated"]["exitCode"] == 1
    assert term["lastState"]["terminated"]["reason"] == "Error"
    # ... and `waiting: CrashLoopBackOff` only shortly before the next restart.
    cs = wait_for(
        lambda: (
            (c := cstatus(store, "crash")) and c.get("restartCount", 0) >= 2 and "waiting" in c["state"] and c
        ),
        what="second back-off",
    )
    uid = store.get("pods", NS, "crash")["metadata"]["uid"]
    w = cs["state"]["waiting"]
    assert w["reason"] == "CrashLoopBackOff"
    # 1s at restartCount 2; a later back-off (2s, 4s...) if a busy machine delayed this poll
    assert re.fullmatch(rf"back-off \d+s restarting failed container=c pod=crash_{NS}\({uid}\)", w["message"])
    assert (
        cs["lastState"]["terminated"]["exitCode"] == 1 and cs["lastState"]["terminated"]["reason"] == "Error"
    )
    assert store.get("pods", NS, "crash")["status"]["phase"] == "Running"
    assert read(kubelet, "crash") == b"starting\nfatal: something went wrong\n"
    assert read(kubelet, "crash", previous=True) == b"starting\nfatal: something went wrong\n"
    # A follow opened during the back-off returns the last instance and ends.
    assert read(kubelet, "crash", follow=True) == b"starting\nfatal: something went wrong\n"
    evs = events(store, "crash")
    assert ("Warning", "BackOff", f"Back-off restarting failed container c in pod crash_{NS}({uid})") in evs


def test_err_image_never_pull(store: Store, kubelet: Kubelet) -> None:
    make_pod(
        store,
        "noimage",
        ["true"],
        container={"image": "k8sreal.local/does-not-exist:1.0", "imagePullPolicy": "Never"},
    )
    cs = wait_for(lambda: (c := cstatus(store, "noimage")) and "ErrImageNeverPull" in str(c) and c)
    assert cs["state"]["waiting"] == {
        "reason": "ErrImageNeverPull",
        "message": 'Container image "k8sreal.local/does-not-exist:1.0" is not present '
        "with pull policy of Never",
    }
    assert cs["imageID"] == "" and cs["started"] is False
    pod = store.get("pods", NS, "noimage")
    assert pod["status"]["phase"] == "Pending"
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert (
        ready["reason"] == "ContainersNotReady" and ready["message"] == "containers with unready status: [c]"
    )
    assert ("Warning", "Failed", "Error: ErrImageNeverPull") in events(store, "noimage")
    with pytest.raises(ApiError) as e:
        kubelet.read_log(NS, "noimage")
    assert e.value.message == 'container "c" in pod "noimage" is waiting to start: ErrImageNeverPull'


def test_err_image_pull_then_backoff(store: Store, kubelet: Kubelet) -> None:
    make_pod(store, "pull", ["true"], container={"image": "nope:1.0", "imagePullPolicy": "IfNotPresent"})
    wait_for(lambda: "ImagePullBackOff" in str(cstatus(store, "pull")), what="ImagePullBackOff")
    reasons = {r for _t, r, _m in events(store, "pull")}
    assert {"Pulling", "Failed", "BackOff"} <= reasons


def test_unschedulable_and_insufficient_gpu(store: Store, kubelet: Kubelet) -> None:
    make_pod(store, "nodesel", ["true"], nodeSelector={"disktype": "ssd"})
    make_pod(store, "gpu", ["true"], container={"resources": {"limits": {"nvidia.com/gpu": "1"}}})
    msg_sel = (
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: "
        "0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
    )
    msg_gpu = (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.."
    )
    for name, msg in (("nodesel", msg_sel), ("gpu", msg_gpu)):
        pod = wait_for(
            lambda name=name: (p := store.get("pods", NS, name)) and p["status"].get("conditions") and p
        )
        assert pod["status"]["phase"] == "Pending"
        (cond,) = pod["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
            "PodScheduled",
            "False",
            "Unschedulable",
            msg,
        )
        assert ("Warning", "FailedScheduling", msg) in events(store, name)
        assert kubelet.read_log(NS, name) is None
    store.delete("pods", NS, "gpu")
    wait_for(lambda: store.get("pods", NS, "gpu") is None, what="unscheduled pod removed")


def test_oom_killed(store: Store, kubelet: Kubelet) -> None:
    make_pod(
        store,
        "oom",
        [
            "python3",
            "-u",
            "-c",
            "print('allocating 200 MB', flush=True)\nb = bytearray(200*1024*1024)\n"
            "for i in range(0, len(b), 4096): b[i] = 1\nprint('survived?!')",
        ],
        container={"resources": {"limits": {"memory": "20Mi"}, "requests": {"memory": "20Mi"}}},
    )
    cs = wait_for(lambda: (c := cstatus(store, "oom")) and "OOMKilled" in str(c) and c, what="OOMKilled")
    term = cs["state"].get("terminated") or cs["lastState"]["terminated"]
    assert term["exitCode"] == 137 and term["reason"] == "OOMKilled"
    assert store.get("pods", NS, "oom")["status"]["qosClass"] == "Burstable"

    def logs() -> list[bytes]:
        out = [read_soon(kubelet, "oom")]
        with contextlib.suppress(ApiError):
            out.append(read(kubelet, "oom", previous=True))
        return out

    # The container restarts at once, so the OOM-killed output is the current or the previous log.
    wait_for(lambda: b"allocating 200 MB\n" in logs(), what="log of the OOM-killed instance")


def test_volumes_env_and_mount_path_rewriting(store: Store, kubelet: Kubelet) -> None:
    store.create("configmaps", {"metadata": {"name": "cfg", "namespace": NS}, "data": {"greeting": "hi"}})
    store.create(
        "secrets",
        {
            "metadata": {"name": "sec", "namespace": NS},
            "data": {"token": base64.b64encode(b"s3cret").decode()},
        },
    )
    script = (
        "import os\nprint(open('/etc/cfg/greeting').read(), os.environ['TOKEN'], os.environ['POD'],"
        " os.environ['FROM_greeting'], os.environ['DATA'], os.path.isdir(os.environ['DATA']),"
        " os.getcwd().endswith"
        "('/work'), open('/etc/sec/token').read())"
    )
    make_pod(
        store,
        "vol",
        ["python3", "-c", script],
        restartPolicy="Never",
        container={
            "workingDir": "/work",
            "env": [
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "token"}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "DATA", "value": "/data"},
            ],
            "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "FROM_"}],
            "volumeMounts": [
                {"name": "cfg", "mountPath": "/etc/cfg"},
                {"name": "sec", "mountPath": "/etc/sec"},
                {"name": "scratch", "mountPath": "/data"},
            ],
        },
        volumes=[
            {"name": "cfg", "configMap": {"name": "cfg"}},
            {"name": "sec", "secret": {"secretName": "sec"}},
            {"name": "scratch", "emptyDir": {}},
        ],
    )
    wait_for(lambda: store.get("pods", NS, "vol")["status"].get("phase") == "Succeeded", what="Succeeded")
    out = read(kubelet, "vol").decode().strip().split(" ")
    assert out[:3] == ["hi", "s3cret", "vol"] and out[3] == "hi" and out[5:] == ["True", "True", "s3cret"]
    assert out[4] != "/data"
    cs = cstatus(store, "vol")
    assert cs["state"]["terminated"]["reason"] == "Completed" and cs["state"]["terminated"]["exitCode"] == 0
    ready = next(c for c in store.get("pods", NS, "vol")["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "PodCompleted"


def test_missing_configmap_volume_stays_container_creating(store: Store, kubelet: Kubelet) -> None:
    make_pod(
        store,
        "stuck",
        ["sleep", "3600"],
        container={"volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]},
        volumes=[{"name": "cfg", "configMap": {"name": "does-not-exist"}}],
    )
    wait_for(
        lambda: (
            (
                "Warning",
                "FailedMount",
                'MountVolume.SetUp failed for volume "cfg" : configmap "does-not-exist" not found',
            )
            in events(store, "stuck")
        ),
        what="FailedMount",
    )
    assert cstatus(store, "stuck")["state"] == {"waiting": {"reason": "ContainerCreating"}}
    with pytest.raises(ApiError) as e:
        kubelet.read_log(NS, "stuck", follow=True)
    assert e.value.message == 'container "c" in pod "stuck" is waiting to start: ContainerCreating'


def test_graceful_deletion_sigterm_then_sigkill(store: Store, kubelet: Kubelet) -> None:
    make_pod(
        store,
        "stubborn",
        [
            "python3",
            "-c",
            "import signal,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('up', flush=True)\ntime.sleep(600)",
        ],
    )
    wait_for(lambda: read_soon(kubelet, "stubborn") == b"up\n", what="started")
    seen: list[dict[str, Any]] = []
    store.subscribe(lambda et, res, o: seen.append(o) if res == "pods" and et == "MODIFIED" else None)
    store.delete("pods", NS, "stubborn")
    wait_for(lambda: store.get("pods", NS, "stubborn") is None, what="pod removed")
    final = seen[-1]["status"]
    assert final["phase"] == "Failed"
    assert final["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    assert ("Normal", "Killing", "Stopping container c") in events(store, "stubborn")


def test_multi_container_log_requires_name(store: Store, kubelet: Kubelet) -> None:
    store.create(
        "pods",
        {
            "metadata": {"name": "two", "namespace": NS},
            "spec": {
                "containers": [
                    {
                        "name": "a",
                        "image": "python:3.11-slim",
                        "command": ["sh", "-c", "echo from-a; sleep 600"],
                    },
                    {
                        "name": "b",
                        "image": "python:3.11-slim",
                        "command": ["sh", "-c", "echo from-b; sleep 600"],
                    },
                ]
            },
        },
    )
    with pytest.raises(ApiError) as e:
        kubelet.read_log(NS, "two")
    assert e.value.message == "a container name must be specified for pod two, choose one of: [a b]"
    wait_for(lambda: read_soon(kubelet, "two", container="b") == b"from-b\n", what="b's log")


def test_liveness_failure_restarts(store: Store, kubelet: Kubelet) -> None:
    make_pod(
        store,
        "live",
        ["sleep", "600"],
        container={"livenessProbe": {"tcpSocket": {"port": 9}, "periodSeconds": 1, "failureThreshold": 1}},
    )
    wait_for(
        lambda: cstatus(store, "live").get("restartCount", 0) >= 1, what="restart after liveness failure"
    )
    msgs = [m for _t, r, m in events(store, "live") if r in ("Unhealthy", "Killing")]
    assert any(m.startswith("Liveness probe failed: dial tcp ") for m in msgs)
    assert "Container c failed liveness probe, will be restarted" in msgs


def test_host_path_directory_is_type_checked_and_seen_through_env(
        store: Store, kubelet: Kubelet, tmp_path: Path) -> None:
    """A hostPath of type Directory that is missing is a FailedMount (as a kubelet's type check);
    an existing one is the host directory itself, reached through the mountPath in env values."""
    missing = tmp_path / "nope"
    make_pod(
        store,
        "nodir",
        ["sleep", "3600"],
        container={"volumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}]},
        volumes=[{"name": "models", "hostPath": {"path": str(missing), "type": "Directory"}}],
    )
    wait_for(
        lambda: (
            "Warning",
            "FailedMount",
            f'MountVolume.SetUp failed for volume "models" : hostPath type check failed: {missing} is not a '
            "directory",
        ) in events(store, "nodir"),
        what="FailedMount",
    )
    assert cstatus(store, "nodir")["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert not missing.exists()

    models = tmp_path / "models"
    (models / "ft").mkdir(parents=True)
    (models / "ft" / "ckpt.pt").write_text("weights")
    make_pod(
        store,
        "reader",
        ["sh", "-c", 'cat "$JT_MODEL_PATH"'],
        container={"volumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}],
                   "env": [{"name": "JT_MODEL_PATH", "value": "/models/ft/ckpt.pt"}]},
        volumes=[{"name": "models", "hostPath": {"path": str(models), "type": "Directory"}}],
        restartPolicy="Never",
    )
    wait_for(lambda: store.get("pods", NS, "reader")["status"].get("phase") == "Succeeded", what="Succeeded")
    assert read(kubelet, "reader").decode().strip() == "weights"


def test_create_delay_keeps_new_containers_creating(store: Store, tmp_path: Path) -> None:
    """``create_delay``: a new pod's container waits in ContainerCreating (no containerID, its
    log refused with 400) before it starts, as on a real node (0.8 s in the golden record)."""
    k = Kubelet(store, tmp_path / "slow", backoff_base=0.5, create_delay=4.0,
                node_labels={"kubernetes.io/hostname": "n1"})
    k.start()
    try:
        make_pod(store, "slow", ["sh", "-c", "echo up; sleep 600"])
        cs = wait_for(lambda: cstatus(store, "slow").get("state") and cstatus(store, "slow"),
                      what="a container status")
        assert cs["state"] == {"waiting": {"reason": "ContainerCreating"}} and "containerID" not in cs
        with pytest.raises(ApiError) as err:
            read(k, "slow")
        assert err.value.code == 400 and "is waiting to start: ContainerCreating" in err.value.message
        wait_for(lambda: read_soon(k, "slow") == b"up\n", what="started after the delay")
        # The log is readable as soon as the process runs; the pod status names the container at
        # the kubelet's next status sync (on a real node too), so wait for that rather than race it.
        wait_for(lambda: cstatus(store, "slow").get("containerID"), what="a containerID in the status")
        assert cstatus(store, "slow")["state"].get("running"), cstatus(store, "slow")
    finally:
        k.stop()
