"""Issue 19 §1, the pure parts: the SSE parser (EventSource rules), requests validated before
anything is sent, responses shown as text, the OpenAI payloads (models, chat, chunks, errors),
the Try it panel's messages from the browser (and a deleted service refusing them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.serving.httpmodel import (
    MAX_SHOWN,
    HttpResponse,
    answered_by,
    charset,
    make_request,
    parse_headers,
    pretty_body,
    view_of,
)
from jupyter_tiers.serving.openai_compat import (
    ChatStats,
    SSEError,
    SSEEvent,
    SSEParser,
    chat_request,
    check_messages,
    chunk_text,
    completion_text,
    error_text,
    model_ids,
    parse_sse,
)

# --- SSE ------------------------------------------------------------------------------------------


def test_sse_events_fields_comments_and_line_ends() -> None:
    stream = (b"\xef\xbb\xbf: comment\r\n"
              b"data: one\n\n"
              b"event: add\rdata:two\rdata:  three\r\rid: 7\r\n"
              b"data\r\n\r\n"
              b"retry: 100\nfoo: bar\n\n"  # no data: nothing dispatched
              b"data: unfinished")  # no blank line at the end: dropped
    assert parse_sse([stream]) == [SSEEvent("one"), SSEEvent("two\n three", "add"),
                                   SSEEvent("", "message", "7")]


def test_sse_same_events_however_the_bytes_are_split() -> None:
    stream = ("\ufeffdata: héllo\r\n\r\nevent: e\ndata: a\ndata: b\n\n: x\r\ndata: [DONE]\r\n\r\n").encode()
    whole = parse_sse([stream])
    assert [e.data for e in whole] == ["héllo", "a\nb", "[DONE]"]
    for size in (1, 2, 3, 5, 7):
        assert parse_sse([stream[i:i + size] for i in range(0, len(stream), size)]) == whole, size


def test_sse_line_without_end_is_bounded() -> None:
    parser = SSEParser()
    with pytest.raises(SSEError, match="longer than"):
        for _ in range(20):
            parser.feed(b"x" * 100_000)


def test_sse_event_of_many_short_data_lines_is_bounded() -> None:
    """Issue 26 §4: each line under MAX_LINE, but no blank line ever ends the event: its data
    would grow without end (2 MiB here) before the cap."""
    parser = SSEParser()
    with pytest.raises(SSEError, match="an event longer than 1 MiB"):
        for _ in range(2048):
            assert parser.feed(b"data: " + b"x" * 1024 + b"\n") == []
    ok = SSEParser()
    assert [len(e.data) for e in ok.feed(b"data: " + b"x" * 500_000 + b"\ndata: y\n\n") * 3] == [500_002] * 3


# --- requests -------------------------------------------------------------------------------------


def test_make_request_json_text_and_bytes() -> None:
    req = make_request("post", "/v1/x?a=1", json={"k": "ü"})
    assert req.method == "POST" and req.body == '{"k": "ü"}'.encode()
    assert ("Content-Type", "application/json") in req.headers
    own = make_request("PUT", "/", json=[1], headers={"content-type": "application/vnd+json"})
    assert own.headers == (("content-type", "application/vnd+json"),)
    assert make_request("GET", "/", body="t").body == b"t"
    assert make_request("GET", "/", body=b"\x00\xff").body == b"\x00\xff"


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"method": "BREW", "path": "/"}, "method"),
    ({"method": "GET", "path": "http://example.com/"}, "path"),
    ({"method": "GET", "path": "//example.com/"}, "path"),
    ({"method": "GET", "path": "/a b"}, "path"),
    ({"method": "GET", "path": "/ü"}, "path"),
    ({"method": "GET", "path": ""}, "path"),
    ({"method": "GET", "path": "/", "headers": {"Host": "evil"}}, "headers"),
    ({"method": "GET", "path": "/", "headers": {"X-A": "1\r\nX-B: 2"}}, "headers"),
    ({"method": "GET", "path": "/", "headers": {"bad name": "1"}}, "headers"),
    ({"method": "GET", "path": "/", "headers": "X-A: 1"}, "headers"),
    ({"method": "GET", "path": "/", "json": {"a": 1}, "body": "x"}, "body"),
    ({"method": "GET", "path": "/", "json": float("nan")}, "json"),
    ({"method": "GET", "path": "/", "json": {1, 2}}, "json"),
    ({"method": "GET", "path": "/", "body": 5}, "body"),
])
def test_bad_requests_name_what_is_wrong(kwargs: dict, field: str) -> None:
    with pytest.raises(SpecError) as info:
        make_request(**kwargs)
    assert info.value.field == field and "\n" not in str(info.value)


def test_parse_headers_lines() -> None:
    assert parse_headers("X-A: 1\n\n  Authorization: Bearer t:k \n") == (
        ("X-A", "1"), ("Authorization", "Bearer t:k"))
    with pytest.raises(SpecError, match="line 2: 'Name: value'"):
        parse_headers("X-A: 1\nnot a header")


# --- responses ------------------------------------------------------------------------------------


def response(body: bytes, ctype: str = "text/plain") -> HttpResponse:
    return HttpResponse(200, "OK", (("Content-Type", ctype),), body, 0.01, 0.02)


def test_pretty_body_indents_json_and_keeps_markup_as_text() -> None:
    assert pretty_body(response(b'{"a":[1,2]}', "application/json")) == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert pretty_body(response(b"[1]", "text/plain")) == "[\n  1\n]"  # looks like JSON: indented
    assert pretty_body(response(b"{not json", "application/json")) == "{not json"
    hostile = response(b"<script>x</script>\x1b[2J\x07\ttab\nline", "text/html")
    assert pretty_body(hostile) == "<script>x</script>?[2J?\ttab\nline"
    assert response(b"\xe9", "text/plain; charset=latin-1").text == "é"
    assert charset("text/plain; charset=no-such") == "utf-8"


def test_who_answered_from_headers_or_the_forward() -> None:
    assert answered_by((("X-Served-By", "web-1"),)) == "web-1"
    assert answered_by((("x-pod-name", "p\x1b"),), "fwd") == "p?"
    assert answered_by((("Server", "x"),), "fwd") == "fwd"
    view = view_of(HttpResponse(503, "Unavailable", (), b"down", 0.0104, 0.0209, answered_by="r0"))
    assert view["answered_by"] == "r0" and view["ttfb_ms"] == 10.4 and view["body"] == "down"
    assert not view["shown_cut"]
    big = view_of(HttpResponse(200, "OK", (), b"x" * (MAX_SHOWN + 5), 0.0, 0.0))
    assert big["shown_cut"] and len(big["body"]) == MAX_SHOWN and big["bytes"] == MAX_SHOWN + 5


# --- OpenAI payloads ------------------------------------------------------------------------------


def test_models_chat_chunks_and_errors() -> None:
    assert model_ids({"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}) == ("m1", "m2")
    for not_models in (None, [], {"data": "x"}, {"data": [{"name": "m"}]}, {"error": "404"}):
        assert model_ids(not_models) is None
    assert check_messages("hi") == [{"role": "user", "content": "hi"}]
    body = chat_request([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                        model="m", stream=True, params={"max_tokens": 5, "temperature": 0.5})
    assert body == {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                    "stream": True, "model": "m", "max_tokens": 5, "temperature": 0.5}
    for bad, field in (([], "messages"), ([{"role": "boss", "content": "x"}], "messages"),
                       ([{"role": "user", "content": 1}], "messages")):
        with pytest.raises(SpecError) as info:
            chat_request(bad, model=None, stream=True, params={})
        assert info.value.field == field
    with pytest.raises(SpecError, match="not a chat parameter"):
        chat_request("x", model=None, stream=True, params={"temprature": 1})
    with pytest.raises(SpecError, match="max_tokens"):
        chat_request("x", model=None, stream=True, params={"max_tokens": True})
    assert chunk_text('{"choices":[{"delta":{"content":"Hi"}}]}') == "Hi"
    assert chunk_text('{"choices":[{"text":"Hi"}]}') == "Hi"
    assert chunk_text('{"choices":[{"delta":{"role":"assistant"}}]}') == ""
    assert chunk_text("not json") == "" and chunk_text(" [DONE] ") is None
    assert completion_text({"choices": [{"message": {"content": "whole"}}]}) == "whole"
    assert error_text({"error": {"message": "bad\nthing"}}, "f") == "bad thing"
    assert error_text({"detail": "nope"}, "f") == "nope" and error_text(None, "raw <b>") == "raw <b>"


def test_chat_stats() -> None:
    stats = ChatStats(started=10.0)
    assert stats.ttft is None and stats.tokens_per_s is None
    for now in (10.5, 11.0, 11.5):
        stats.add(now)
    assert stats.ttft == 0.5 and stats.tokens_per_s == 2.0
    burst = ChatStats(started=10.0)
    for now in (10.5, 10.5001, 10.5002):  # read in one go: no rate (it read 120000 pieces/s)
        burst.add(now)
    assert burst.ttft == 0.5 and burst.tokens_per_s is None


# --- the panel's messages from the browser -------------------------------------------------------


def test_panel_messages_become_requests() -> None:
    from jupyter_tiers.faces.widgets.try_panel import chat_of, request_of

    assert request_of({"method": "POST", "path": "/x", "headers": "X-A: 1", "body_kind": "json",
                       "body": '{"a": 1}'}) == ("POST", "/x", {"headers": (("X-A", "1"),), "json": {"a": 1}})
    assert request_of({"method": "PUT", "path": "/x", "body_kind": "text", "body": "t"})[2] == {
        "headers": (), "body": "t"}
    assert request_of({"method": "GET", "path": "/", "body_kind": "json", "body": "  "})[2] == {"headers": ()}
    with pytest.raises(SpecError, match=r"^body: not JSON .*choose text to send it as it is$"):
        request_of({"method": "POST", "path": "/", "body_kind": "json", "body": "{bad"})
    with pytest.raises(SpecError, match="body_kind: json, text or none"):
        request_of({"method": "POST", "path": "/", "body_kind": "xml"})
    assert chat_of({"messages": [{"role": "user", "content": "hi"}], "model": "", "max_tokens": 4}) == (
        [{"role": "user", "content": "hi"}], None, {"max_tokens": 4})
    with pytest.raises(SpecError, match="max_tokens: a whole number from 1 to"):
        chat_of({"messages": "hi", "max_tokens": 0})
    # The system prompt goes first; temperature 0..2; blank is the server's default.
    assert chat_of({"messages": "hi", "system": "be brief", "temperature": 0.2, "max_tokens": ""}) == (
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], None,
        {"temperature": 0.2})
    blank = chat_of({"messages": "hi", "system": "  ", "temperature": ""})
    assert blank == ([{"role": "user", "content": "hi"}], None, {})
    for bad in (-0.1, 2.5, True, "1", float("nan")):
        with pytest.raises(SpecError, match="temperature: a number from 0 to 2"):
            chat_of({"messages": "hi", "temperature": bad})
    with pytest.raises(SpecError, match="system: a system prompt as text"):
        chat_of({"messages": "hi", "system": ["x"]})


def test_usage_is_the_servers_token_count_or_none() -> None:
    from jupyter_tiers.serving.openai_compat import chunk_parts, usage_of

    assert usage_of({"usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}}) == {
        "prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}
    assert usage_of({"usage": {"completion_tokens": 3, "prompt_tokens": -1, "total_tokens": True}}) == {
        "completion_tokens": 3}
    for nothing in (None, [], {"usage": None}, {"usage": {}}, {"usage": {"completion_tokens": "7"}},
                    {"usage": {"completion_tokens": 1.5}}, {"choices": []}):
        assert usage_of(nothing) is None
    # A streamed chunk's usage is read with the rest of it (chunk_parts: one parser a chunk).
    last = chunk_parts('{"choices": [], "usage": {"completion_tokens": 5}}')
    assert last is not None and last.usage == {"completion_tokens": 5}
    assert chunk_parts("[DONE]") is None
    for nothing in ('{"usage": ', '{"choices": [{"delta": {"content": "usage"}}]}'):
        got = chunk_parts(nothing)
        assert got is not None and got.usage is None


def test_fuzz_usage_of_random_json_is_counts_or_none() -> None:
    import json
    import random

    from jupyter_tiers.serving.openai_compat import chunk_parts

    rng = random.Random(2912)
    values: list[object] = [None, True, 0, 7, -3, 1.5, 10**13, "5", [], {}, "usage"]
    for _ in range(500):
        usage = {rng.choice(["prompt_tokens", "completion_tokens", "total_tokens", "x"]): rng.choice(values)
                 for _ in range(rng.randint(0, 4))}
        text = json.dumps({"usage": rng.choice([usage, rng.choice(values)])})
        if rng.random() < 0.2:
            text = text[: rng.randint(0, len(text))]
        parts = chunk_parts(text)
        got = None if parts is None else parts.usage
        assert got is None or (got and all(type(v) is int and 0 <= v < 10**12 for v in got.values()))


def test_a_deleted_service_refuses_try_it(tmp_path: Path) -> None:
    from jupyter_tiers.core.model import ServiceState, ServiceStatus
    from jupyter_tiers.faces.widgets.serve_view import ServeView
    from tests.helpers import SentRecorder

    from .test_serve_text import make_service

    class View(SentRecorder, ServeView):
        pass

    tier, service = make_service(tmp_path, [ServiceStatus("llama-svc", ServiceState.DELETED)])
    view = View(service)
    try:
        for content in ({"kind": "try", "id": 1, "method": "GET", "path": "/"},
                        {"kind": "chat", "id": 2, "messages": "hi"}, {"kind": "detect"}):
            view._on_front_end_msg(view, content, [])
        assert view.sent[-2:] == [
            {"kind": "try_result", "id": 1, "error": "service llama-svc is deleted"},
            {"kind": "chat_end", "id": 2, "error": "service llama-svc is deleted"}]
        assert view.try_note == "service llama-svc is deleted" and tier.calls == []
    finally:
        view.close()
