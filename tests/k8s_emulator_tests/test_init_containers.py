"""Init containers in the emulator's kubelet, as a real kubelet 1.28 runs them
(/work/shared/facts/k8s-golden/13a-init-container-emptydir.json, 13b-init-container-fails.json):
each runs to completion before the main containers start, writing into an emptyDir they share;
a failing one restarts with back-off (Error, then CrashLoopBackOff) while the pod stays Pending."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.kubelet import Kubelet
from tests.k8s_emulator.store import Store
from tests.k8s_emulator_tests.test_kubelet import NS, make_pod, read, wait_for

FETCH = """\
import os, time, pathlib
print('fetching', flush=True)
while not os.path.exists(GATE):
    time.sleep(0.05)
pathlib.Path('/models/model.json').write_text('{"w": 3}')
print('done')
"""
SERVER = ("import json, time; print('loaded', json.load(open('/models/model.json')), flush=True); "
          "time.sleep(3600)")


def status(store: Store, name: str) -> dict[str, Any]:
    return (store.get("pods", NS, name) or {}).get("status") or {}


def condition(st: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in st.get("conditions", []) if c["type"] == kind), {})


def test_an_init_container_fills_an_emptydir_before_the_server_starts(store: Store, kubelet: Kubelet,
                                                                     tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # the init container waits for it: its running state is observed
    init = {"name": "fetch", "image": "python:3.11-slim", "imagePullPolicy": "IfNotPresent",
            "command": [sys.executable, "-c", FETCH.replace("GATE", repr(str(gate)))],
            "volumeMounts": [{"name": "models", "mountPath": "/models"}]}
    make_pod(store, "init-ok",
             [sys.executable, "-u", "-c", SERVER],
             container={"volumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}]},
             initContainers=[init], volumes=[{"name": "models", "emptyDir": {}}])
    wait_for(lambda: "running" in ((status(store, "init-ok").get("initContainerStatuses") or [{}])[0]
                                   .get("state") or {}))
    st = status(store, "init-ok")
    assert st["phase"] == "Pending"
    assert condition(st, "Initialized") == {**condition(st, "Initialized"), "status": "False",
                                            "reason": "ContainersNotInitialized",
                                            "message": "containers with incomplete status: [fetch]"}
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    first = st["initContainerStatuses"][0]
    assert first["ready"] is False and "started" not in first
    gate.write_text("go")
    wait_for(lambda: status(store, "init-ok").get("phase") == "Running"
             and condition(status(store, "init-ok"), "Ready").get("status") == "True")
    st = status(store, "init-ok")
    (init_status,) = st["initContainerStatuses"]
    assert init_status["ready"] is True and init_status["restartCount"] == 0
    assert init_status["state"]["terminated"]["reason"] == "Completed"
    assert init_status["state"]["terminated"]["exitCode"] == 0
    assert condition(st, "Initialized")["status"] == "True"
    wait_for(lambda: b"loaded {'w': 3}" in read(kubelet, "init-ok"))
    assert read(kubelet, "init-ok", container="fetch") == b"fetching\ndone\n"


def test_a_failing_init_container_backs_off_and_the_pod_stays_pending(store: Store, kubelet: Kubelet) -> None:
    init = {"name": "fetch", "image": "python:3.11-slim", "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", "echo 'fetching s3://ckpt/jt/m.json'; echo 'An error occurred (403) when "
                        "calling the GetObject operation: Forbidden' >&2; exit 1"]}
    make_pod(store, "init-bad", ["sleep", "3600"], initContainers=[init])
    wait_for(lambda: ((status(store, "init-bad").get("initContainerStatuses") or [{}])[0]
                      .get("state", {}).get("waiting", {}).get("reason")) == "CrashLoopBackOff")
    st = status(store, "init-bad")
    (init_status,) = st["initContainerStatuses"]
    assert init_status["restartCount"] >= 1 and init_status["ready"] is False
    assert init_status["lastState"]["terminated"]["reason"] == "Error"
    assert init_status["lastState"]["terminated"]["exitCode"] == 1
    assert "back-off" in init_status["state"]["waiting"]["message"]
    assert st["phase"] == "Pending"
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert condition(st, "Initialized")["reason"] == "ContainersNotInitialized"
    assert b"Forbidden" in read(kubelet, "init-bad", container="fetch")
    with pytest.raises(ApiError):  # the server container never started
        read(kubelet, "init-bad", container="c")
