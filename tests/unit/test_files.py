"""Issue 16 §5, pure parts: the file listing's parser (seeded fuzz), patterns, where a download
may write (never outside dest), and the resumable download loop."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.data.files import (
    HASH_LIMIT,
    FileInfo,
    destination,
    download,
    parse_listing,
    remote_path,
    select,
)

SEED = 20261217


def test_parse_listing() -> None:
    text = (b"@@ jobdir\n12\t1700000000.5\tloss.csv\0" b"3\t1700000001.0\tout/a b.png\0"
            b"7\t1700000002.0\tranks/0\0" b"5\t1.0\tweird\nname.txt\0"
            b"@@ checkpoints\n100\t1700000003.25\tstep-1/model.pt\0" b"9\t1.0\t../escape\0")
    assert parse_listing(text) == [
        FileInfo("checkpoints/step-1/model.pt", 100, 1700000003.25),
        FileInfo("loss.csv", 12, 1700000000.5),
        FileInfo("out/a b.png", 3, 1700000001.0),
    ]  # ranks/ is the shim's; a newline or '..' in a name is skipped


def test_select() -> None:
    files = [FileInfo("loss.csv", 1, 0), FileInfo("out/m.csv", 1, 0), FileInfo("checkpoints/s/x.pt", 1, 0)]
    assert [f.name for f in select(files, "*.csv")] == ["loss.csv", "out/m.csv"]
    assert [f.name for f in select(files, "checkpoints/*")] == ["checkpoints/s/x.pt"]
    assert [f.name for f in select(files, "out/m.csv")] == ["out/m.csv"]
    assert len(select(files)) == 3
    with pytest.raises(TiersError):
        select(files, "")


def test_remote_path() -> None:
    assert remote_path("out/a.png", "/w/j", "/w/c") == "/w/j/out/a.png"
    assert remote_path("checkpoints/s/m.pt", "/w/j", "/w/c/") == "/w/c/s/m.pt"
    with pytest.raises(TiersError):
        remote_path("../x", "/w/j", None)


def test_destination_never_outside(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    assert destination(dest, "a/b.txt") == dest.resolve() / "a/b.txt"
    for bad in ("../x", "/etc/passwd", "a/../../x"):
        with pytest.raises(TiersError, match="refused"):
            destination(dest, bad)
    outside = tmp_path / "outside"
    outside.mkdir()
    (dest / "link").symlink_to(outside)
    with pytest.raises(TiersError, match="outside"):
        destination(dest, "link/deeper/x.txt")
    assert not (outside / "deeper").exists()  # nothing was created through the link


def source(data: dict[str, bytes], calls: list[tuple[str, int]],
           cut_at: int | None = None) -> Callable[[str, int], Iterator[bytes]]:
    def chunks(name: str, offset: int) -> Iterator[bytes]:
        calls.append((name, offset))
        body = data[name][offset:]
        end = len(body) if cut_at is None else max(0, cut_at - offset)
        for i in range(0, min(end, len(body)), 1000):
            yield body[i:min(i + 1000, end)]
    return chunks


def test_download_resumes_from_the_partial_file(tmp_path: Path) -> None:
    data = {"big.bin": os.urandom(10_000), "small.txt": b"hello\n"}
    files = [FileInfo(n, len(b), 0.0, hashlib.sha256(b).hexdigest()) for n, b in sorted(data.items())]
    calls: list[tuple[str, int]] = []
    with pytest.raises(TiersError, match=r"big\.bin stopped at 4000 of 10000 bytes.*resume"):
        download(files, tmp_path, source(data, calls, cut_at=4000))
    assert (tmp_path / "big.bin.part").stat().st_size == 4000 and not (tmp_path / "big.bin").exists()
    calls.clear()
    got = download(files, tmp_path, source(data, calls))
    assert calls == [("big.bin", 4000), ("small.txt", 0)]
    assert [d.path.name for d in got] == ["big.bin", "small.txt"]
    assert (tmp_path / "big.bin").read_bytes() == data["big.bin"]
    assert not (tmp_path / "big.bin.part").exists()
    calls.clear()
    again = download(files, tmp_path, source(data, calls))  # the same sha256 already: nothing fetched
    assert {d.outcome for d in again} == {"up to date"}
    assert calls == []


def test_fuzz_parse_listing() -> None:
    """Any bytes parse into safe relative names (or nothing), never an exception."""
    rng = random.Random(SEED)
    bits = [b"@@ jobdir\n", b"@@ checkpoints\n", b"@@ other\n", b"\0", b"\t", b"\n", b"12", b"-3",
            b"1.5", b"nan", b"a.txt", b"../x", b"/abs", b"d/e", b"\xff\xfe", b"ranks/1", b" ",
            b"@@ sha256 jobdir\n", b"@@ sha256 checkpoints\n", b"  ", b"a" * 64, b"0" * 63]
    for _ in range(5000):
        text = b"".join(rng.choice(bits) for _ in range(rng.randint(0, 20)))
        for f in parse_listing(text):
            assert f.size >= 0 and not f.name.startswith("/") and ".." not in f.name.split("/")
            assert f.sha256 is None or (len(f.sha256) == 64 and f.size <= HASH_LIMIT)


def test_download_goes_on_by_itself_after_dropped_connections(tmp_path: Path) -> None:
    """Issue 18 §1: a dropped connection (TransferCut from the chunk source, as SlurmTier's
    raises on the SSH stream's ConnectError) is resumed from the .part at once; the file arrives
    whole, each byte fetched once."""
    from jupyter_tiers.data.files import RESUME_ATTEMPTS, TransferCut

    blob = random.Random(SEED).randbytes(100_000)
    drops = [30_000, 30_001, 77_777]
    fetched: list[int] = []

    def chunks(name: str, offset: int) -> Iterator[bytes]:
        fetched.append(offset)
        for at in range(offset, len(blob), 1000):
            end = min(at + 1000, len(blob))
            if drops and drops[0] < end:
                yield blob[at:drops[0]]
                drops.pop(0)
                raise TransferCut("stream `tail` failed: connection lost")
            yield blob[at:end]

    got = download([FileInfo("big.bin", len(blob), 0.0)], tmp_path, chunks)
    assert [d.path for d in got] == [tmp_path / "big.bin"] and (tmp_path / "big.bin").read_bytes() == blob
    assert fetched == [0, 30_000, 30_001, 77_777] and not (tmp_path / "big.bin.part").exists()

    def always_drops(name: str, offset: int) -> Iterator[bytes]:
        yield blob[offset:offset + 10]
        raise TransferCut("connection lost")

    with pytest.raises(TiersError, match=r"big\.bin stopped at \d+ of 100000 bytes.*resume") as err:
        download([FileInfo("big.bin", len(blob), 0.0)], tmp_path / "again", always_drops)
    assert "\n" not in str(err.value)
    assert (tmp_path / "again" / "big.bin.part").stat().st_size == 10 * (RESUME_ATTEMPTS + 1)
