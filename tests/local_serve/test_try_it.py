"""Issue 19 §1 on the local serving tier: ``svc.request``, ``svc.models`` and ``svc.chat``
through the front port, against the OpenAI-compatible test server (tests/openai_server.py)
run as the service's command. Nothing asserts on time: a held stream proves streaming."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest

from jupyter_tiers import serve_http
from jupyter_tiers.errors import SpecError, TiersError
from jupyter_tiers.handles import Service
from jupyter_tiers.httpmodel import pretty_body
from jupyter_tiers.local.serve_tier import LocalServeTier

from .conftest import GUARD

SERVER = (Path(__file__).parent.parent / "openai_server.py").read_text()


def serve(tier: LocalServeTier, name: str = "llm", replicas: int = 1) -> Service:
    svc = tier.apply(tier.make_spec(SERVER, name=name, replicas=replicas, readiness="/health"))
    status = svc.wait_ready(GUARD)
    assert status.state.value == "READY", status
    return svc


def test_request_json_and_text_bodies_through_the_front_port(tier: LocalServeTier) -> None:
    svc = serve(tier)
    resp = svc.request("POST", "/echo", json={"a": [1, "ü"]}, headers={"X-Test": "yes"})
    assert resp.status == 200 and resp.ok
    echoed = resp.json()
    assert echoed["method"] == "POST" and echoed["x_test"] == "yes"
    assert echoed["content_type"] == "application/json"
    assert echoed["body"] == '{"a": [1, "ü"]}'
    assert resp.answered_by == svc.pods()[0].name  # X-Served-By: the replica's name
    assert 0 < resp.ttfb <= resp.total
    assert '"method": "POST"' in pretty_body(resp)  # indented JSON for the panel

    text = svc.request("PUT", "/echo", body="plain words\n", headers={"Content-Type": "text/plain"})
    assert text.json()["body"] == "plain words\n" and text.json()["method"] == "PUT"
    # The forward is opened once and reused: the same URL for every request of this service.
    assert serve_http.forward_url(svc) == svc.status().endpoint


def test_error_statuses_and_hostile_bodies_come_back_as_text(tier: LocalServeTier) -> None:
    svc = serve(tier)
    for code in (404, 418, 500, 503):
        resp = svc.request("GET", f"/status/{code}")
        assert resp.status == code and not resp.ok
        assert resp.text.startswith(f"status {code} from ") and "<b>not bold</b>" in resp.text
    missing = svc.request("GET", "/no/such/route")
    assert missing.status == 404 and missing.json()["error"]["message"] == "no route /no/such/route"
    hostile = svc.request("GET", "/hostile")
    shown = pretty_body(hostile)
    assert "<script>" in shown and "\x1b" not in shown  # markup kept as text, escapes as '?'
    # A URL, a second host or a bad method never leaves the machine: refused before sending.
    for path in ("http://example.com/", "//example.com/x", "no-slash", "/a b"):
        with pytest.raises(SpecError, match="path"):
            svc.request("GET", path)
    with pytest.raises(SpecError, match="method"):
        svc.request("BREW", "/")
    with pytest.raises(SpecError, match="Host is set by the client"):
        svc.request("GET", "/", headers={"Host": "example.com"})


def test_models_and_chat_not_streamed(tier: LocalServeTier) -> None:
    svc = serve(tier)
    assert svc.models() == ["tiny-echo"]
    answer = svc.chat([{"role": "user", "content": "hello there"}], stream=False)
    assert list(answer) == ["echo: hello there"]
    with pytest.raises(TiersError, match=r"HTTP 404: The model `other` does not exist\."):
        list(svc.chat("hi", model="other"))
    with pytest.raises(TiersError, match=r"HTTP 500: the model crashed <b>badly</b>"):
        list(svc.chat("please [fail500]"))
    with pytest.raises(SpecError, match="temperature"):
        svc.chat("hi", temperature="hot")


def test_chat_streams_pieces_before_the_stream_ends(tier: LocalServeTier) -> None:
    """The server sends three pieces, then holds the stream until released: the iterator must
    yield those three while the rest is not even written yet."""
    svc = serve(tier)
    stream = svc.chat("one two three four five [hold]")
    got = [next(stream) for _ in range(3)]
    assert got == ["echo: ", "one ", "two "]
    assert stream.stats.ttft is not None and stream.stats.pieces == 3
    release = threading.Thread(target=lambda: urllib.request.urlopen(
        urllib.request.Request(svc.status().endpoint + "/test/release", method="POST"), timeout=GUARD).read())
    release.start()
    rest = list(stream)
    release.join(GUARD)
    assert rest == ["three ", "four ", "five ", "[hold]"]
    assert stream.text == "echo: one two three four five [hold]"
    assert stream.stats.pieces == 7 and stream.stats.tokens_per_s is not None


def test_a_server_that_is_not_openai_compatible(tier: LocalServeTier) -> None:
    from .conftest import HTTP_BODY

    svc = tier.apply(tier.make_spec(HTTP_BODY, name="plain", readiness="/health"))
    assert svc.wait_ready(GUARD).state.value == "READY"
    with pytest.raises(TiersError, match="not OpenAI-compatible: GET /v1/models gave HTTP 404"):
        svc.models()
