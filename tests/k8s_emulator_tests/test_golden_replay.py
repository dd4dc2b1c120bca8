"""Replay the recorded requests of golden 02 (server-side apply), 07 (errors) and 08 (watch expiry,
pagination) against the bare emulator and compare status codes, reasons and message formats.

UIDs, hashes, timestamps and resourceVersions are ignored; the namespace ``golden`` becomes the
test's namespace.  Steps that need a controller's or kubelet's work are compared by status only."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from kubernetes import client

from .conftest import GOLDEN

_NOISE = re.compile(r"\d+|[0-9a-f]{8}-[0-9a-f-]{27}")


def _load(name: str) -> list[dict[str, Any]]:
    return json.loads((GOLDEN / name).read_text())["steps"]


def _resolve_body(steps: list[dict[str, Any]], body: Any) -> Any:
    if isinstance(body, str) and body.startswith("<identical to steps["):
        n = int(body.split("[")[1].split("]")[0])
        return _resolve_body(steps, steps[n]["request"]["body"])
    return body


def _swap_ns(value: Any, ns: str) -> Any:
    if isinstance(value, str):  # a YAML body
        return re.sub(r"namespace: golden\b", f"namespace: {ns}", value)
    return json.loads(
        json.dumps(value)
        .replace('"golden"', json.dumps(ns))
        .replace("golden/", f"{ns}/")
        .replace("golden:", f"{ns}:")
        .replace('\\"golden\\"', f'\\"{ns}\\"')
    )


def _norm(msg: str) -> str:
    return _NOISE.sub("#", msg)


class Replayer:
    """Sends recorded requests through the client's REST layer with a chosen credential."""

    def __init__(self, emu: Any, ns: str) -> None:
        self.emu, self.ns = emu, ns
        self.rest = emu.api_client().rest_client
        self.viewer = emu.viewer_token(ns)

    def send(self, step: dict[str, Any], steps: list[dict[str, Any]], token: str | None) -> tuple[int, Any]:
        req = step["request"]
        path = req["path"].replace("/namespaces/golden/", f"/namespaces/{self.ns}/")
        query = "&".join(f"{k}={v}" for k, v in (req.get("query") or {}).items())
        url = self.emu.server.url + path + (f"?{query}" if query else "")
        headers = {"Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        body = _resolve_body(steps, req.get("body"))
        if body is not None:
            body = _swap_ns(body, self.ns)
            headers["Content-Type"] = req.get("content_type") or "application/json"
        try:
            resp = self.rest.request(req["method"], url, headers=headers, body=body)
            code, text = resp.status, resp.read().decode()
        except client.ApiException as e:
            code, text = e.status, e.body.decode() if isinstance(e.body, bytes) else e.body
        try:
            return code, json.loads(text) if text else None
        except ValueError:
            return code, text


def _compare(step: dict[str, Any], code: int, got: Any, ns: str, label: str) -> None:
    assert code == step["status"], f"{label}: status {code} != {step['status']}: {got}"
    want = step.get("response")
    if not isinstance(want, dict) or not isinstance(got, dict):
        return
    want = _swap_ns(want, ns)
    assert got.get("kind") == want.get("kind"), label
    if want.get("kind") == "Status":
        assert got.get("reason") == want.get("reason"), f"{label}: {got}"
        assert got.get("status") == want.get("status"), label
        if "message" in want:
            assert _norm(got["message"]) == _norm(want["message"]), (
                f"{label}:\n{got['message']}\n{want['message']}"
            )
        for key in ("kind", "group", "name"):
            if key in (want.get("details") or {}):
                assert got["details"].get(key) == want["details"][key], f"{label}: details.{key}"
        if "causes" in (want.get("details") or {}):
            assert [c["field"] for c in got["details"]["causes"]] == [
                c["field"] for c in want["details"]["causes"]
            ], label
    elif isinstance(want.get("metadata"), dict) and "generation" in want["metadata"]:
        assert got["metadata"].get("generation") == want["metadata"]["generation"], label


def _token_for(step: dict[str, Any], r: Replayer) -> str | None:
    note = step.get("note", "")
    if "bogus" in note or "401 on a discovery" in note:
        return "bogus-token"
    if "no credentials" in note:
        return None
    if note.startswith("viewer"):
        return r.viewer
    return r.emu.admin_token


def test_replay_02_server_side_apply(bare, ns):
    steps = _load("02-server-side-apply.json")
    r = Replayer(bare, ns)
    for i, step in enumerate(steps):
        if step["request"] is None or step.get("streaming"):
            continue
        code, got = r.send(step, steps, bare.admin_token)
        if i in (3, 7, 8, 9):  # these read what the controllers produced: status only
            assert code == step["status"], i
            continue
        _compare(step, code, got, ns, f"02 step {i}")


def test_replay_07_errors(bare, ns):
    steps = _load("07-errors.json")
    r = Replayer(bare, ns)
    for i, step in enumerate(steps):
        req = step["request"]
        if req is None or "rbac.authorization" in req["path"] or req["path"].endswith("/token"):
            continue  # RBAC objects are not served: the viewer token stands in for the RoleBinding
        code, got = r.send(step, steps, _token_for(step, r))
        _compare(step, code, got, ns, f"07 step {i}")


def test_replay_08_watch_expiry_and_pagination(bare, ns):
    steps = _load("08-watch-expiry-bookmarks.json")
    core = client.CoreV1Api(bare.api_client())
    for i in range(3):
        core.create_namespaced_config_map(
            ns, {"metadata": {"name": f"w{i}", "labels": {"golden-scenario": "watch"}}, "data": {"i": str(i)}}
        )
    bare.compact()  # the recorded "resourceVersion=1" watches are far older than the window
    r = Replayer(bare, ns)
    for i, step in enumerate(steps):
        req = step["request"]
        if req is None:
            if "compacted" in step.get("note", ""):
                core.patch_namespaced_config_map("w2", ns, {"data": {"k": "0"}})
                bare.compact()
            continue
        q = req.get("query") or {}
        if "watch" in q and q.get("resourceVersion") != "1" and "sendInitialEvents" not in q:
            continue  # live watches are covered by test_watch_list.py
        if q.get("resourceVersion") and q["resourceVersion"] not in ("0", "1"):
            step = json.loads(json.dumps(step))
            step["request"]["query"]["resourceVersion"] = str(bare.store.resource_version - 1)
        if q.get("continue"):
            step = json.loads(json.dumps(step))
            step["request"]["query"]["continue"] = r.last_continue  # type: ignore[attr-defined]
        code, got = r.send(step, steps, bare.admin_token)
        if isinstance(got, str) and step.get("events"):
            events = [json.loads(x) for x in got.splitlines() if x.strip()]
            want = [e["line"] for e in step["events"]]
            assert [e["type"] for e in events] == [e["type"] for e in want], i
            assert _norm(events[0]["object"]["message"]) == _norm(want[0]["object"]["message"]), i
            continue
        if isinstance(got, dict) and got.get("kind") == "ConfigMapList":
            if "continue" in got["metadata"] and i == 13:
                r.last_continue = got["metadata"]["continue"]  # type: ignore[attr-defined]
            if "remainingItemCount" in (step["response"] or {}).get("metadata", {}):
                assert (
                    got["metadata"]["remainingItemCount"]
                    == step["response"]["metadata"]["remainingItemCount"]
                )
            assert code == step["status"], i
            continue
        _compare(step, code, got, ns, f"08 step {i}")


@pytest.mark.parametrize(
    "name", ["02-server-side-apply.json", "07-errors.json", "08-watch-expiry-bookmarks.json"]
)
def test_golden_files_present(name):
    assert (GOLDEN / name).exists()
