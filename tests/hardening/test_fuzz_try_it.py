"""Issue 19 §1: seeded fuzz of Try it's parsers and options (tests/hardening/test_fuzz.py style).

The SSE parser gives the events a plain reference reading of the whole stream gives, however
the bytes are split, and nothing but SSEError; a request's method, path, headers and body give
a validated request (a path on the forward, never a host) or one short SpecError; chat messages
and parameters the same; the OpenAI readers and the body shown to a person never raise and
never pass a control character through.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.faces.widgets.try_panel import chat_of, request_of
from jupyter_tiers.serving.httpmodel import (
    RESERVED_HEADERS,
    HttpRequest,
    HttpResponse,
    make_request,
    parse_headers,
    pretty_body,
    view_of,
)
from jupyter_tiers.serving.openai_compat import (
    SSEError,
    SSEEvent,
    SSEParser,
    chat_request,
    chunk_text,
    completion_text,
    error_text,
    model_ids,
)

SEED = 20261219
STREAMS = 1500
REQUESTS = 3000

PIECES = [b"data:", b"data: ", b"event:", b"event: e", b"id:", b"id: 1", b"retry: 5", b":", b": c",
          b"\n", b"\r", b"\r\n", b"\n\n", b"\r\r", b"\xef\xbb\xbf", b"x", b"hello", b"\xc3\xa9", b"\xe9",
          b"\x00", b"[DONE]", b'{"choices":[{"delta":{"content":"t"}}]}', b"data", b" ", b"\xff\xfe"]


def reference_events(stream: bytes) -> list[SSEEvent]:
    """The EventSource rules applied to the whole stream at once (a second reading, not the parser's)."""
    if stream.startswith(b"\xef\xbb\xbf"):
        stream = stream[3:]
    lines = re.split(rb"\r\n|\r|\n", stream)[:-1]  # the last part has no line end: not a line yet
    events, data, event, last_id = [], [], "", ""
    for raw in lines:
        line = raw.decode("utf-8", errors="replace")
        if line == "":
            if data:
                events.append(SSEEvent("\n".join(data), event or "message", last_id))
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            value = value[1:] if value.startswith(" ") else value
        else:
            name, value = line, ""
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
    return events


def test_fuzz_sse_parser_matches_the_reference_however_split() -> None:
    rng = random.Random(SEED)
    total = 0
    for i in range(STREAMS):
        stream = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 60)))
        if rng.random() < 0.1:
            stream += bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        expected = reference_events(stream)
        cuts = sorted(rng.sample(range(len(stream) + 1), min(len(stream) + 1, rng.randint(0, 8))))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        parser = SSEParser()
        got = [event for chunk in chunks for event in parser.feed(chunk)]
        assert got == expected, f"stream {i}: {stream!r} split at {cuts}"
        total += len(got)
    assert total > STREAMS // 5, "the fuzz should also produce many events"


def test_fuzz_sse_parser_refuses_only_with_sse_error() -> None:
    rng = random.Random(SEED + 1)
    for _ in range(50):
        parser = SSEParser()
        try:
            for _ in range(rng.randint(1, 30)):
                noise = bytes(rng.randrange(1, 256) for _ in range(rng.randint(0, 200)))
                parser.feed(noise * rng.randint(1, 400))
        except SSEError as exc:
            assert "\n" not in str(exc)


# --- requests -----------------------------------------------------------------------------------

METHODS = ["GET", "get", "POST", "Put", "DELETE", "HEAD", "OPTIONS", "PATCH", "BREW", "", "GET ", "G\nET",
           None, 7]
PATHS = ["/", "/v1/models", "/a?b=c&d=%20", "//evil.example/x", "http://evil.example/", "evil.example",
         "/a b", "/\x00", "/ü", "", "/" + "x" * 9000, "/\r\nHost: evil", "/#frag", None, 3,
         "/~!$&'()*+,;=:@"]
HEADER_NAMES = ["X-A", "Content-Type", "Host", "content-length", "Transfer-Encoding", "Connection",
                "bad name", "", "X-\u00e9", "Authorization", "a:b", 5, None]
HEADER_VALUES = ["1", "", "a\r\nb", "x\0", "Bearer t", " spaced ", "é", None, 3]
JSONS: list[Any] = [{"a": 1}, [1, "x"], "text", 1.5, True, float("nan"), {1, 2}, {"k": object()},
                    {"\ud800": 1}]
BODIES: list[Any] = ["text", b"\x00bytes", bytearray(b"b"), 12, ["list"], "é" * 10]


def _pick(rng: random.Random, values: list[Any], good: int) -> Any:
    """One of ``values``, one of the first ``good`` (valid) ones more often than not."""
    return rng.choice(values[:good] if rng.random() < 0.6 else values)


def _headers(rng: random.Random) -> Any:
    pairs = [(_pick(rng, HEADER_NAMES, 2), _pick(rng, HEADER_VALUES, 2)) for _ in range(rng.randint(0, 3))]
    shape = rng.random()
    if shape < 0.5:
        return dict(pairs)
    if shape < 0.8:
        return pairs
    return rng.choice([None, "X-A: 1", [("only-one",)], 7])


def test_fuzz_requests_are_valid_or_one_short_spec_error() -> None:
    rng = random.Random(SEED + 2)
    made = refused = 0
    for i in range(REQUESTS):
        kwargs: dict[str, Any] = {"headers": _headers(rng)}
        if rng.random() < 0.4:
            kwargs["json"] = rng.choice(JSONS)
        if rng.random() < 0.4:
            kwargs["body"] = rng.choice(BODIES)
        method, path = _pick(rng, METHODS, 8), _pick(rng, PATHS, 3)
        try:
            req = make_request(method, path, **kwargs)  # type: ignore[arg-type]  # fuzzed types
        except SpecError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400, f"request {i}: {exc!r}"
            refused += 1
            continue
        assert isinstance(req, HttpRequest)
        assert req.path.startswith("/") and not req.path.startswith("//")
        assert all(33 <= ord(ch) < 127 for ch in req.path)
        assert not {name.lower() for name, _ in req.headers} & RESERVED_HEADERS
        assert all("\r" not in v and "\n" not in v for _, v in req.headers)
        made += 1
    assert made > REQUESTS // 20 and refused > REQUESTS // 4, (made, refused)


def test_fuzz_header_lines() -> None:
    rng = random.Random(SEED + 3)
    alphabet = ["X-A", ":", " ", "\n", "\r\n", "value", "Host", "é", "\t", "bad name", "\x00",
                "Authorization"]
    for _ in range(REQUESTS):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        try:
            pairs = parse_headers(text)
        except SpecError as exc:
            assert "\n" not in str(exc)
            continue
        for name, value in pairs:
            assert name and "\n" not in value and name.lower() not in RESERVED_HEADERS


# --- chat -----------------------------------------------------------------------------------------

ROLES: list[Any] = ["user", "system", "assistant", "tool", "developer", "boss", "", None, 1]
CONTENTS: list[Any] = ["hi", "", "é\n\x00", None, 5, ["parts"], {"x": 1}]
PARAMS: list[tuple[str, Any]] = [
    ("max_tokens", 5), ("temperature", 0.2), ("top_p", 1), ("stop", ["\n"]), ("n", 2),
    ("max_tokens", "5"), ("max_tokens", True), ("temperature", "hot"), ("stop", 3), ("seed", 1.5),
    ("temprature", 1), ("stream", True)]


def test_fuzz_chat_requests() -> None:
    rng = random.Random(SEED + 4)
    built = 0
    for i in range(REQUESTS):
        shape = rng.random()
        if shape < 0.15:
            messages: Any = rng.choice(["hello", "", [], None, 3, {"role": "user"}])
        else:
            messages = []
            for _ in range(rng.randint(1, 4)):
                msg = {"role": _pick(rng, ROLES, 5), "content": _pick(rng, CONTENTS, 2)}
                if rng.random() < 0.1:
                    msg[rng.choice(["name", "extra"])] = "n"
                messages.append(msg)
        params = dict(_pick(rng, PARAMS, 5) for _ in range(rng.randint(0, 2)))
        model = _pick(rng, [None, "m", "", 5, "x" * 400], 2)
        try:
            body = chat_request(messages, model=model, stream=rng.random() < 0.5, params=params)
        except SpecError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400, f"chat {i}: {exc!r}"
            continue
        json.dumps(body)  # always a JSON body
        assert body["messages"] and all(isinstance(m["content"], str) for m in body["messages"])
        built += 1
    assert built > REQUESTS // 20


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    if depth > 3 or rng.random() < 0.4:
        return rng.choice([None, True, 0, -1.5, "", "t\x1b[2J", "[DONE]", "data"])
    if rng.random() < 0.5:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["choices", "delta", "message", "content", "text", "data", "id", "error", "detail", "x"]
    return {rng.choice(keys): _json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def test_fuzz_openai_readers_never_raise() -> None:
    rng = random.Random(SEED + 5)
    for _ in range(REQUESTS):
        value = _json_value(rng)
        text = json.dumps(value) if rng.random() < 0.8 else json.dumps(value)[: rng.randint(0, 20)]
        piece = chunk_text(text)
        assert piece is None or isinstance(piece, str)
        assert isinstance(completion_text(value), str)
        ids = model_ids(value)
        assert ids is None or all(isinstance(i, str) and i.isprintable() for i in ids)
        message = error_text(value, "fallback")
        assert message.isprintable() and len(message) <= 500


def test_fuzz_bodies_shown_as_text() -> None:
    rng = random.Random(SEED + 6)
    ctypes = ["application/json", "text/plain", "text/html; charset=latin-1", "application/x+json",
              "text/plain; charset=bogus", "", "text/plain; charset=utf-16"]
    for _ in range(REQUESTS):
        if rng.random() < 0.5:
            body = json.dumps(_json_value(rng)).encode()
        else:
            body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 60)))
        headers = (("Content-Type", rng.choice(ctypes)), ("X-Served-By", rng.choice(["p", "\x1b]52;x", ""])))
        resp = HttpResponse(rng.randint(100, 599), rng.choice(["OK", "bad\x07"]), headers, body, 0.0, 0.0)
        shown = pretty_body(resp)
        assert all(ch.isprintable() or ch in "\n\t" for ch in shown)
        view = view_of(resp)
        json.dumps(view)
        assert all(ch.isprintable() for k, v in view["headers"] for ch in k + v)


# --- the Try it panel's messages from the browser ----------------------------------------------------

def test_fuzz_panel_messages_give_a_request_or_one_short_spec_error() -> None:
    rng = random.Random(SEED + 7)
    values: list[Any] = ["GET", "POST", "/", "/echo", "", None, 3, True, [], {}, "X-A: 1\nbad", "X-A: 1",
                         '{"a": 1}', "{bad", "json", "text", "none", "xml", "\x00", "//h", 10**6, 5, "5"]
    keys = ["method", "path", "headers", "body", "body_kind", "messages", "model", "max_tokens", "id"]
    made = 0
    for i in range(REQUESTS):
        content = {k: _pick(rng, values, 8) for k in rng.sample(keys, rng.randint(0, len(keys)))}
        try:
            method, path, kwargs = request_of(content)
            made += 1
            assert isinstance(method, str) and isinstance(path, str)
            assert set(kwargs) <= {"headers", "json", "body"}
        except SpecError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400, f"message {i}: {exc!r}"
        try:
            messages, model, params = chat_of(content)
            assert messages and all(isinstance(m["content"], str) for m in messages)
            assert model is None or isinstance(model, str)
            assert set(params) <= {"max_tokens"}
        except SpecError as exc:
            assert "\n" not in str(exc), f"message {i}: {exc!r}"
    assert made > REQUESTS // 50
