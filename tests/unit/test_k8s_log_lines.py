"""The pod log and watch line splitter (k8s/watch.py split_chunks): any chunking of a stream gives
the lines that splitting the whole stream gives (seeded fuzz, chunk boundaries inside multi-byte
characters, invalid UTF-8, ``\\r``, empty lines, a last line without a newline), and the work stays
linear: held bytes are never concatenated chunk by chunk, and a chunk of many lines is decoded
and split once (checked by counting calls, not by timing)."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

from jupyter_tiers.k8s.watch import _lines, split_chunks

PIECES = [b"2026-12-02T10:00:00.123456789Z ", b"loss=0.5", "ü".encode(), "✓".encode(), b"\xff",
          b"\xe2\x9c", b"\r", b"", b" ", b"Error", b"{\"type\": \"ADDED\"}", b"x" * 300]


def _stream(rng: random.Random) -> bytes:
    lines = [b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))
             for _ in range(rng.randint(0, 40))]
    data = b"\n".join(lines)
    return data + b"\n" if rng.random() < 0.7 else data


def _reference(data: bytes) -> list[str]:
    """Line by line, the obvious way."""
    raws = data.split(b"\n")
    if raws[-1] == b"":
        raws.pop()
    return [raw.decode("utf-8", errors="replace") for raw in raws]


def _chunked(rng: random.Random, data: bytes) -> list[bytes]:
    chunks, i = [], 0
    while i < len(data):
        n = rng.choice([0, 1, 1, 2, 3, 7, rng.randint(1, 64), rng.randint(1, 4096)])
        chunks.append(data[i:i + n])
        i += n
    return chunks


def test_any_chunking_gives_the_same_lines() -> None:
    rng = random.Random(20261202)
    for _ in range(3000):
        data = _stream(rng)
        assert list(split_chunks(_chunked(rng, data))) == _reference(data), data


def test_every_byte_alone_and_the_whole_stream_at_once() -> None:
    rng = random.Random(7)
    for _ in range(200):
        data = _stream(rng)
        expected = _reference(data)
        assert list(split_chunks([data[i:i + 1] for i in range(len(data))])) == expected
        assert list(split_chunks([data])) == expected
        assert list(split_chunks([b"", data, b""])) == expected


def test_a_multibyte_character_cut_between_chunks_is_whole() -> None:
    check = "✓".encode()
    assert list(split_chunks([b"a" + check[:1], check[1:2], check[2:] + b"b\nc"])) == ["a✓b", "c"]
    assert list(split_chunks([])) == [] and list(split_chunks([b"", b""])) == []
    assert list(split_chunks([b"\n\n"])) == ["", ""]


def test_lines_arrive_as_their_chunk_does() -> None:
    """A follower must see a line as soon as its chunk arrives, not when the stream ends."""
    seen: list[str] = []

    def chunks() -> Iterator[bytes]:
        yield b"first\nsec"
        assert seen == ["first"]
        yield b"ond\n"
        assert seen == ["first", "second"]

    for line in split_chunks(chunks()):
        seen.append(line)
    assert seen == ["first", "second"]


class _Resp:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: Any = None, decode_content: bool = True) -> Iterator[bytes]:
        assert amt is None and decode_content is False
        return iter(self.chunks)


def test_lines_reads_the_response_stream() -> None:
    assert list(_lines(_Resp([b'{"a"', b": 1}\n{}\n", b"tail"]))) == ['{"a": 1}', "{}", "tail"]


class _NoConcat(bytes):
    """A chunk that refuses ``+``: re-copying the held bytes on every chunk is quadratic."""

    def __add__(self, other: object) -> bytes:
        raise AssertionError("chunks concatenated one by one")

    def __radd__(self, other: object) -> bytes:
        raise AssertionError("chunks concatenated one by one")


def test_one_huge_line_is_joined_once() -> None:
    chunks = [_NoConcat(b"x" * 32768) for _ in range(256)] + [_NoConcat(b"\nnext\n")]
    lines = list(split_chunks(chunks))
    assert [len(line) for line in lines] == [256 * 32768, 4]


def test_a_chunk_of_many_lines_is_split_once() -> None:
    """Was: one split of the rest of the held bytes per line (quadratic in a chunk's lines)."""
    data = b"".join(b"line %d\n" % i for i in range(20000))
    calls: dict[str, int] = {}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            calls[arg.__name__] = calls.get(arg.__name__, 0) + 1

    lines: list[str] = []
    sys.setprofile(profile)
    try:
        lines.extend(split_chunks([data[:100000], data[100000:]]))
    finally:
        sys.setprofile(None)
    assert lines == [f"line {i}" for i in range(20000)]
    assert sum(calls.values()) < 40, calls
