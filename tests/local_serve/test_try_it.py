"""Issue 19 §1 on the local serving tier: ``svc.request``, ``svc.models`` and ``svc.chat``
through the front port, against the OpenAI-compatible test server (tests/openai_server.py)
run as the service's command. Nothing asserts on time: a held stream proves streaming."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.core.errors import SpecError, TiersError
from jupyter_tiers.engine import serve_http
from jupyter_tiers.engine.handles import Service
from jupyter_tiers.faces.widgets.serve_view import ServeView
from jupyter_tiers.local.serve_tier import LocalServeTier
from jupyter_tiers.serving.httpmodel import pretty_body
from jupyter_tiers.serving.openai_compat import MIN_RATE_SPAN
from tests.helpers import SentRecorder, wait_for

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
    assert serve_http.forward_url(svc.forward()) == svc.status().endpoint


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


def test_a_chat_answer_and_one_event_are_capped(tier: LocalServeTier) -> None:
    """Issue 26 §4: a server that never stops answering is read up to 8 MiB of text, and an
    event that never ends up to 1 MiB; each ends in one line saying so."""
    from jupyter_tiers.serving.openai_compat import MAX_ANSWER

    svc = serve(tier)
    stream = svc.chat("[flood]")
    got = 0
    with pytest.raises(TiersError) as err:
        for piece in stream:
            got += len(piece)
    assert "longer than 8 MiB" in str(err.value) and "\n" not in str(err.value)
    assert MAX_ANSWER - 65536 < got <= MAX_ANSWER
    with pytest.raises(TiersError, match="an event longer than 1 MiB"):
        list(svc.chat("[bigevent]"))
    assert list(svc.chat("still answers")) == ["echo: ", "still ", "answers"]  # the service is fine


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
    assert stream.stats.pieces == 7
    # A rate only over a span long enough to be one (openai_compat.MIN_RATE_SPAN; a burst has none).
    span = (stream.stats.last or 0) - (stream.stats.first or 0)
    assert (stream.stats.tokens_per_s is not None) == (span >= MIN_RATE_SPAN), span


def test_a_server_that_is_not_openai_compatible(tier: LocalServeTier) -> None:
    from .conftest import HTTP_BODY

    svc = tier.apply(tier.make_spec(HTTP_BODY, name="plain", readiness="/health"))
    assert svc.wait_ready(GUARD).state.value == "READY"
    with pytest.raises(TiersError, match="not OpenAI-compatible: GET /v1/models gave HTTP 404"):
        svc.models()


# --- the Try it panel's kernel side (ServeView) on a real service --------------------------------

class RecordingView(SentRecorder, ServeView):
    """A ServeView keeping the custom messages it would send to the browser."""

    def front(self, content: Any) -> None:
        self._on_front_end_msg(self, content, [])

    def of_kind(self, kind: str, mid: Any = None) -> list[dict[str, Any]]:
        with self.sent_lock:
            return [m for m in self.sent if m.get("kind") == kind and (mid is None or m.get("id") == mid)]


@pytest.fixture
def view_of_service(tier: LocalServeTier) -> Iterator[RecordingView]:
    view = RecordingView(serve(tier, "panel"))
    yield view
    view.close()


def test_panel_request_json_text_and_errors(view_of_service: RecordingView) -> None:
    view = view_of_service
    view.front({"kind": "try", "id": 1, "method": "POST", "path": "/echo", "headers": "X-Test: from-panel",
                "body_kind": "json", "body": '{"n": 1}'})
    view.front({"kind": "try", "id": 2, "method": "PATCH", "path": "/echo", "headers": "",
                "body_kind": "text", "body": "<b>plain</b>"})
    view.front({"kind": "try", "id": 3, "method": "GET", "path": "/hostile", "body_kind": "none"})
    view.front({"kind": "try", "id": 4, "method": "GET", "path": "/status/503", "body_kind": "none"})
    view.front({"kind": "try", "id": 5, "method": "POST", "path": "/echo", "body_kind": "json",
                "body": "{oops"})
    view.front({"kind": "try", "id": 6, "method": "GET", "path": "http://example.com/", "body_kind": "none"})
    wait_for(lambda: all(view.of_kind("try_result", i) for i in range(1, 7)), "six answers", timeout=GUARD)
    first = view.of_kind("try_result", 1)[0]["response"]
    assert first["status"] == 200 and first["answered_by"] == view.service.pods()[0].name
    assert '\n  "x_test": "from-panel"' in first["body"]  # indented JSON
    assert '"body": "{\\"n\\": 1}"' in first["body"]
    assert first["ttfb_ms"] > 0 and first["total_ms"] >= first["ttfb_ms"]
    assert ["X-Served-By", first["answered_by"]] in first["headers"]
    assert '"body": "<b>plain</b>"' in view.of_kind("try_result", 2)[0]["response"]["body"]
    hostile = view.of_kind("try_result", 3)[0]["response"]["body"]
    assert "<script>" in hostile and "\x1b" not in hostile
    assert view.of_kind("try_result", 4)[0]["response"]["status"] == 503
    assert view.of_kind("try_result", 5)[0]["error"].startswith("body: not JSON")
    assert view.of_kind("try_result", 6)[0]["error"].startswith("path: a path starting with one '/'")


def test_panel_detects_openai_and_streams_a_chat(view_of_service: RecordingView) -> None:
    view = view_of_service
    view.front({"kind": "detect"})
    wait_for(lambda: view.try_openai == "yes", "OpenAI-compatible detected", timeout=GUARD)
    assert view.try_models == ["tiny-echo"] and view.try_note == "OpenAI-compatible: 1 model"
    view.front({"kind": "chat", "id": 7, "model": "tiny-echo",
                "messages": [{"role": "user", "content": "red green blue [hold]"}]})
    # Three pieces come before the server lets the rest go: they reach the browser first.
    wait_for(lambda: "".join(m["text"] for m in view.of_kind("chat_piece", 7)) == "echo: red green ",
             "the first three pieces", timeout=GUARD)
    assert not view.of_kind("chat_end", 7)
    assert view.of_kind("chat_piece", 7)[0]["ttft_ms"] > 0  # the figures come with the pieces
    urllib.request.urlopen(urllib.request.Request(view.service.url + "/test/release", method="POST"),
                           timeout=GUARD).read()
    wait_for(lambda: view.of_kind("chat_end", 7), "the end of the chat", timeout=GUARD)
    assert "".join(m["text"] for m in view.of_kind("chat_piece", 7)) == "echo: red green blue [hold]"
    end = view.of_kind("chat_end", 7)[0]
    assert "error" not in end and end["pieces"] == 5 and end["ttft_ms"] > 0
    assert end["tokens_per_s"] is None or end["tokens_per_s"] > 0  # none for pieces read in one burst
    # svc.chat asks for stream_options.include_usage and the test server, as vLLM, sends it: the
    # server's own counts come along (the panel then says tokens, from them).
    assert end["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    # A server that sends usage unasked (llama.cpp); the system prompt and parameters reach it.
    view.front({"kind": "chat", "id": 10, "system": "be brief", "temperature": 0.3, "max_tokens": 12,
                "messages": [{"role": "user", "content": "[params] [usage]"}]})
    wait_for(lambda: view.of_kind("chat_end", 10), "the chat with usage", timeout=GUARD)
    end = view.of_kind("chat_end", 10)[0]
    said = "".join(m["text"] for m in view.of_kind("chat_piece", 10))
    assert said == "echo: system=['be brief'] temperature=0.3 max_tokens=12 turns=2", said
    assert end["usage"] == {"prompt_tokens": 5, "completion_tokens": end["pieces"],
                            "total_tokens": end["pieces"] + 5}
    # A server that refuses stream_options sends no usage: no counts, the panel says pieces.
    key = view.service.record.key
    try:
        plain = [{"role": "user", "content": "x y [no-stream-options]"}]
        view.front({"kind": "chat", "id": 12, "messages": plain})
        wait_for(lambda: view.of_kind("chat_end", 12), "the chat without usage", timeout=GUARD)
        end = view.of_kind("chat_end", 12)[0]
        assert "error" not in end and end["usage"] is None and end["pieces"] == 4, end
    finally:
        serve_http._no_stream_options.discard(key)  # the other chats of this service ask for usage
    # An error answer comes back as text; Stop ends a held stream.
    view.front({"kind": "chat", "id": 8, "messages": [{"role": "user", "content": "[fail500]"}]})
    wait_for(lambda: view.of_kind("chat_end", 8), "the failed chat", timeout=GUARD)
    assert view.of_kind("chat_end", 8)[0]["error"] == "chat: HTTP 500: the model crashed <b>badly</b>"
    view.front({"kind": "chat", "id": 9, "messages": [{"role": "user", "content": "a b c d [hold]"}]})
    wait_for(lambda: view.of_kind("chat_piece", 9), "a piece", timeout=GUARD)
    view.front({"kind": "chat_stop", "id": 9})
    wait_for(lambda: view.of_kind("chat_end", 9), "the stopped chat", timeout=GUARD)
    assert view.of_kind("chat_end", 9)[0]["error"] == "stopped"
    urllib.request.urlopen(urllib.request.Request(view.service.url + "/test/release", method="POST"),
                           timeout=GUARD).read()  # let the server's held handler finish


def test_panel_keeps_at_most_its_cap_of_an_answer(view_of_service: RecordingView) -> None:
    from jupyter_tiers.faces.widgets.try_panel import MAX_SHOWN

    view = view_of_service
    view.front({"kind": "chat", "id": 11, "messages": [{"role": "user", "content": "[flood]"}]})
    wait_for(lambda: view.of_kind("chat_end", 11), "the capped chat", timeout=GUARD)
    sent = sum(len(m["text"]) for m in view.of_kind("chat_piece", 11))
    assert sent == MAX_SHOWN
    assert "the panel keeps its beginning" in view.of_kind("chat_end", 11)[0]["error"]


def test_panel_on_a_plain_server_says_not_openai(tier: LocalServeTier) -> None:
    from .conftest import HTTP_BODY

    svc = tier.apply(tier.make_spec(HTTP_BODY, name="plainview", readiness="/health"))
    assert svc.wait_ready(GUARD).state.value == "READY"
    view = RecordingView(svc)
    try:
        view.front({"kind": "detect"})
        wait_for(lambda: view.try_openai == "no", "not OpenAI-compatible", timeout=GUARD)
        assert "not OpenAI-compatible: GET /v1/models gave HTTP 404" in view.try_note
        # No header names the replica: with one ready replica the panel says it is that one.
        wait_for(lambda: view.ready == 1, "the view to see the ready replica", timeout=GUARD)
        view.front({"kind": "try", "id": 1, "method": "GET", "path": "/", "body_kind": "none"})
        answer = wait_for(lambda: view.of_kind("try_result", 1), "the answer", timeout=GUARD)[0]["response"]
        assert answer["answered_by"] == f"{answer['body']} (the only ready pod)"
    finally:
        view.close()


def test_a_client_gone_mid_answer_leaves_the_service_up(tier: LocalServeTier) -> None:
    """A chat stopped mid-stream (its socket shut) once killed the supervisor with SIGPIPE when
    the front port wrote the next piece to it; it now gets EPIPE and goes on. Replicas still
    start with SIGPIPE at its default (not inherited ignored)."""
    svc = serve(tier, "survivor")
    for _ in range(3):
        stream = svc.chat("a b c d e [hold]")
        assert next(stream) == "echo: "
        stream.abort()
        with pytest.raises(TiersError, match="chat: stopped"):
            list(stream)
        assert svc.request("POST", "/test/release").status == 200  # the held answer goes on
    assert svc.status().state.value == "READY"
    assert list(svc.chat("still here", stream=False)) == ["echo: still here"]
    # A shell replica shows what it inherited (Python sets SIGPIPE ignored itself, so not Python).
    body = "grep '^SigIgn' /proc/$$/status; exec sleep 600"
    shell = tier.apply(tier.make_spec(body, name="sigs", shell=True))
    line = wait_for(lambda: next((ln for ln in shell.logs().splitlines() if "SigIgn:" in ln), None),
                    "the replica's SigIgn line", timeout=GUARD)
    assert not int(line.split()[-1], 16) & (1 << (13 - 1)), f"SIGPIPE inherited ignored: {line}"


def test_completions_whole_and_streamed(tier: LocalServeTier) -> None:
    """/v1/completions through svc.request: the whole answer, and a streamed one whose SSE body
    the pure parser reads back piece by piece."""
    from jupyter_tiers.serving.openai_compat import chunk_text, completion_text, parse_sse

    svc = serve(tier, "complete")
    whole = svc.request("POST", "/v1/completions", json={"model": "tiny-echo", "prompt": "x y"})
    assert whole.status == 200 and completion_text(whole.json()) == "echo: x y"
    streamed = svc.request("POST", "/v1/completions", json={"prompt": "x y", "stream": True})
    assert streamed.header("content-type") == "text/event-stream"
    pieces = [chunk_text(event.data) for event in parse_sse([streamed.body])]
    assert pieces == ["echo: ", "x ", "y", None]  # None: the [DONE] marker
    bad = svc.request("POST", "/v1/completions", json={"prompt": 3})
    assert bad.status == 400 and bad.json()["error"]["message"] == "prompt: a string is required"
