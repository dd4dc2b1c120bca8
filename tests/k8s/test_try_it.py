"""Issue 19 §1 on the Kubernetes emulator: ``svc.request``, ``svc.models`` and ``svc.chat``
through the service's port-forward (opened on the first request, reused after), against the
OpenAI-compatible test server (tests/openai_server.py) run as the pod's command."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.engine import serve_http
from jupyter_tiers.engine.handles import Service
from jupyter_tiers.k8s.tier import K8sTier
from jupyter_tiers.serving.httpmodel import pretty_body

from .conftest import GUARD, wait_for

SERVER = (Path(__file__).parent.parent / "openai_server.py").read_text()


def serve(tier: K8sTier, name: str) -> Service:
    svc = tier.apply(tier.make_spec(SERVER, name=name, port=8000, readiness="/health"))
    status = svc.wait_ready(GUARD)
    assert status.state.value == "READY", status
    return svc


def test_request_through_the_port_forward_and_who_answered(tier: K8sTier) -> None:
    svc = serve(tier, "llm")
    pod = svc.pods()[0].name
    resp = svc.request("POST", "/echo", json={"prompt": "hi"})
    assert resp.status == 200 and resp.json()["body"] == '{"prompt": "hi"}'
    assert resp.answered_by == pod  # the pod's HOSTNAME, in X-Served-By
    url = serve_http.forward_url(svc.forward())
    assert tier.forwarded_pod(url) == pod  # the forward knows its pod too
    text = svc.request("POST", "/echo", body="just text", headers={"Content-Type": "text/plain"})
    assert text.json()["body"] == "just text" and text.json()["content_type"] == "text/plain"
    assert serve_http.forward_url(svc.forward()) == url  # reused, not reopened
    for code in (400, 502):
        bad = svc.request("GET", f"/status/{code}")
        assert bad.status == code and "<b>not bold</b>" in pretty_body(bad)


def test_chat_streams_through_the_port_forward(tier: K8sTier) -> None:
    svc = serve(tier, "chat")
    assert svc.models() == ["tiny-echo"]
    stream = svc.chat("alpha beta gamma delta [hold]", model="tiny-echo")
    assert [next(stream) for _ in range(3)] == ["echo: ", "alpha ", "beta "]  # the rest is held back
    releaser = threading.Thread(target=lambda: svc.request("POST", "/test/release", timeout=GUARD))
    releaser.start()
    assert list(stream) == ["gamma ", "delta ", "[hold]"]
    releaser.join(GUARD)
    assert stream.answered_by == svc.pods()[0].name
    with pytest.raises(TiersError, match="HTTP 500: the model crashed"):
        list(svc.chat("[fail500]"))


def test_a_reused_forward_whose_pod_is_gone_is_opened_afresh(tier: K8sTier) -> None:
    svc = serve(tier, "moved")
    first = svc.pods()[0].name
    assert svc.request("GET", "/health").answered_by == first
    old = serve_http.forward_url(svc.forward())
    svc.restart()  # the pod behind the open forward is replaced

    def replaced() -> bool:
        pods = svc.pods()
        return len(pods) == 1 and pods[0].name != first and pods[0].ready

    wait_for(replaced, GUARD, "the pod to be replaced")
    resp = svc.request("GET", "/health")
    assert resp.status == 200 and resp.answered_by == svc.pods()[0].name != first
    assert serve_http.forward_url(svc.forward()) != old
