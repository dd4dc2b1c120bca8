"""The load generator's response reader (loadgen._read_response) on bytes fed to an asyncio
StreamReader, no socket: statuses, bodies by length, chunks or close, keep-alive; and a seeded
fuzz in which any bytes give a status or one of the errors the generator records as a row's
error (never anything else)."""

from __future__ import annotations

import asyncio
import random

import pytest

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.serving.loadgen import _error_text, _read_response, forward_address

SEED = 20261204
GOOD = [b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.0 500 Oops\r\n\r\nbody", b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"]
HANDLED = (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError)


def read(raw: bytes, method: str = "GET") -> tuple[tuple[int, bool], bytes]:
    result, left = read_named(raw, method)
    return result[:2], left


def read_named(raw: bytes, method: str = "GET") -> tuple[tuple[int, bool, str | None], bytes]:
    result, left = read_all(raw, method)
    return result[:3], left


def read_all(raw: bytes, method: str = "GET") -> tuple[tuple[int, bool, str | None, str | None], bytes]:
    async def go() -> tuple[tuple[int, bool, str | None, str | None], bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        line = await reader.readline()
        result = await _read_response(reader, line, method)
        return result, await reader.read()

    return asyncio.run(go())


def test_an_error_in_a_stream_after_http_200_is_found() -> None:
    events = (b": keep-alive\n\ndata: {\"choices\": [{\"delta\": {\"content\": \"a\"}}]}\n\n"
              b'data: {"error": {"message": "the engine died", "code": 500}}\n\n')
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    plain = head + b"Content-Length: %d\r\n\r\n" % len(events) + events + b"NEXT"
    assert read_all(plain) == ((200, True, None, "the engine died"), b"NEXT")
    # Chunked, the error event cut across two chunks.
    cut = events.index(b"engine")
    body = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (cut, events[:cut], len(events) - cut, events[cut:])
    assert read_all(head + b"Transfer-Encoding: chunked\r\n\r\n" + body)[0][3] == "the engine died"
    fine = events.replace(b"error", b"other")
    assert read_all(head + b"Content-Length: %d\r\n\r\n" % len(fine) + fine)[0][3] is None
    # The same bytes as JSON, not a stream: not looked into.
    json_head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    assert read_all(json_head + b"Content-Length: %d\r\n\r\n" % len(events) + events)[0][3] is None


@pytest.mark.parametrize(("raw", "method", "expected", "left"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcNEXT", "GET", (200, True), b"NEXT"),
    (b"HTTP/1.1 503 Busy\r\nconnection: close\r\ncontent-length: 0\r\n\r\n", "GET", (503, False), b""),
    (b"HTTP/1.0 200 OK\r\n\r\nto the end", "GET", (200, False), b""),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", "GET", (200, True), b""),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\nNEXT", "GET",
     (200, True), b"NEXT"),
    (b"HTTP/1.1 204 No Content\r\n\r\nNEXT", "GET", (204, True), b"NEXT"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nNEXT", "HEAD", (200, True), b"NEXT"),
])
def test_responses(raw: bytes, method: str, expected: tuple[int, bool], left: bytes) -> None:
    assert read(raw, method) == (expected, left)


def test_who_answered_is_read_from_the_first_naming_header() -> None:
    raw = (b"HTTP/1.1 200 OK\r\nX-Replica: web-b\r\nX-Served-By: web-a\r\nX-Served-By: web-z\r\n"
           b"Content-Length: 0\r\n\r\n")
    assert read_named(raw)[0] == (200, True, "web-a")  # x-served-by ranks first, its first value
    assert read_named(b"HTTP/1.1 200 OK\r\nX-Pod-Name: \x1b[31mweb-x\r\nContent-Length: 0\r\n\r\n")[0] \
        == (200, True, "?[31mweb-x")  # shown as text
    assert read_named(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")[0] == (200, True, None)


@pytest.mark.parametrize("raw", [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 abc\r\n\r\n", b"",
                                 b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
                                 b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"])
def test_broken_responses_are_errors(raw: bytes) -> None:
    with pytest.raises(HANDLED) as err:
        read(raw)
    assert _error_text(err.value)


def test_only_loopback_http_forwards() -> None:
    assert forward_address("http://127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert forward_address("http://localhost:1/") == ("localhost", 1)
    for url in ("https://127.0.0.1:8000", "http://example.com:80", "http://10.0.0.1:80", "http://127.0.0.1",
                "ftp://127.0.0.1:21"):
        with pytest.raises(TiersError, match=r"is not a local http://127\.0\.0\.1:PORT address"):
            forward_address(url)


def test_fuzz_any_bytes_give_a_status_or_a_recorded_error() -> None:
    rng = random.Random(SEED)
    pieces = [b"HTTP/1.1 ", b"HTTP/1.0 ", b"200 OK", b"404 Not Found", b"\r\n", b"\n", b"Content-Length: ",
              b"Transfer-Encoding: chunked", b"Connection: close", b"5", b"ffff", b"0", b"abc", b":", b" ",
              b"\x00\xff", b";ext", b"-1", b"99999999999"]
    statuses = errors = 0
    for _ in range(3000):
        if rng.random() < 0.6:  # a good response, mutated a little
            raw = bytearray(rng.choice(GOOD))
            for _ in range(rng.randint(0, 3)):
                at = rng.randint(0, len(raw))
                raw[at:at + rng.randint(0, 3)] = rng.choice(pieces)
            raw = bytes(raw)
        else:
            raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        if rng.random() < 0.05:
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        try:
            (status, keep), _ = read(raw, rng.choice(["GET", "HEAD"]))
        except HANDLED as exc:
            errors += 1
            assert _error_text(exc)
            continue
        statuses += 1
        assert status >= 0 and isinstance(keep, bool)
    assert statuses > 100 and errors > 100, (statuses, errors)
