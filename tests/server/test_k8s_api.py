"""The API on a service against the Kubernetes API emulator: list, details with the ServeView
state, pod logs (a range and the stream), scale (seen on the events websocket), restart and
delete."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from jupyter_tiers import api
from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.k8s.tier import K8sTier
from tests.k8s.conftest import IMAGE, SERVER
from tests.k8s_emulator.emulator import Emulator
from tests.k8s_emulator.fixtures import emulator, k8s_namespace  # noqa: F401
from tests.server.util import GUARD, body, until

API = ("jupyter-tiers", "api")


@pytest.fixture
def serving(tiers_config: Any, emulator: Emulator, k8s_namespace: str) -> K8sTier:  # noqa: F811
    tiers_config({"default_profile": "serving", "profiles": {"serving": {
        "tier": "kubernetes", "kubeconfig": str(emulator.kubeconfig_path), "namespace": k8s_namespace,
        "request_timeout": 10, "defaults": {"image": IMAGE}}}})
    tier = api.connect("serving", kind="service")
    assert isinstance(tier, K8sTier)
    return tier


async def test_service_list_details_logs_scale_restart_delete(
        jp_fetch: Any, jp_ws_fetch: Any, serving: K8sTier, k8s_namespace: str) -> None:  # noqa: F811
    service = serving.apply(serving.make_spec(SERVER, name="web", port=8000, replicas=1))
    status = service.wait_ready(GUARD)
    assert status.state is ServiceState.READY, status

    async def details() -> Any:
        return body(await jp_fetch(*API, "jobs", "serving", "web"))

    ready = await until(details, lambda d: d["state"] == "READY", "READY")
    assert ready["kind"] == "service" and ready["size"] == "1/1 ready"
    assert ready["where"] == f"http://web.{k8s_namespace}.svc:8000"
    view = ready["view"]
    assert view["service_name"] == "web" and view["namespace"] == k8s_namespace
    assert view["desired"] == 1 and len(view["pods"]) == 1 and view["pods"][0][2] is True
    first_pod = view["pods"][0][0]
    listing = body(await jp_fetch(*API, "jobs", params={"kind": "service"}))
    assert [i["key"] for i in listing["items"]] == ["serving/web"] and listing["errors"] == []

    logs = await until(lambda: jp_fetch(*API, "jobs", "serving", "web", "logs", params={"pod": first_pod}),
                       lambda r: body(r)["lines"], "a log line")
    assert body(logs)["lines"][0] == [first_pod, "serving on 8000"]
    stream = await jp_ws_fetch(*API, "jobs", "serving", "web", "logs", "stream", params={"pod": first_pod})
    batch = json.loads(await asyncio.wait_for(stream.read_message(), GUARD))
    assert batch["lines"][0] == [first_pod, "serving on 8000"] and batch["offset"] == len(batch["lines"])
    stream.close()

    events = await jp_ws_fetch(*API, "events")
    snapshot = json.loads(await asyncio.wait_for(events.read_message(), GUARD))
    assert [i["key"] for i in snapshot["items"]] == ["serving/web"]
    result = body(await jp_fetch(*API, "jobs", "serving", "web", "scale", method="POST",
                                 body=json.dumps({"replicas": 2})))
    assert result == {"ok": True, "message": "service web scaled to 2"}
    while True:  # the hub pushes the new size (bounded by the guard)
        message = json.loads(await asyncio.wait_for(events.read_message(), GUARD))
        sizes = [i["size"] for i in message.get("items", []) if i["key"] == "serving/web"]
        if "2/2 ready" in sizes:
            break
    events.close()

    result = body(await jp_fetch(*API, "jobs", "serving", "web", "restart", method="POST", body=b""))
    assert result["ok"] is True and "restarting" in result["message"]
    rolled = await until(details, lambda d: d["state"] == "READY" and d["view"]["ready"] == 2
                         and first_pod not in [p[0] for p in d["view"]["pods"]], "pods replaced")
    assert len(rolled["view"]["pods"]) == 2

    result = body(await jp_fetch(*API, "jobs", "serving", "web", method="DELETE"))
    assert result == {"ok": True, "message": "service web deleted"}
    gone = body(await jp_fetch(*API, "jobs", params={"refresh": "0"}))["items"][0]
    assert gone["state"] == "DELETED" and gone["terminal"] is True
