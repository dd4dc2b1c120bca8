"""Issue 29 §1 and issue 26 §4, pure parts: a download decides on an existing local file by
content (sha256), never replaces or skips one silently and says what it did; a ``.part`` is
resumed only for the same remote file (size, mtime, sha256, source); files get the user's umask."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.data.files import FileInfo, download, numbered, parse_listing

NEW = b"step,loss\n1,0.25\n"
OLD = b"step,loss\n1,0.50\n"  # same size, other content: a fixed-format CSV of an earlier run


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source(data: dict[str, bytes], calls: list[tuple[str, int]]):  # type: ignore[no-untyped-def]
    def chunks(name: str, offset: int) -> Iterator[bytes]:
        calls.append((name, offset))
        yield data[name][offset:]
    return chunks


def test_same_size_other_content_is_saved_beside_and_said(tmp_path: Path) -> None:
    (tmp_path / "metrics.csv").write_bytes(OLD)
    calls: list[tuple[str, int]] = []
    info = FileInfo("metrics.csv", len(NEW), 1.0, sha(NEW))
    [got] = download([info], tmp_path, source({"metrics.csv": NEW}, calls))
    assert got.outcome == "renamed" and got.path == tmp_path.resolve() / "metrics (1).csv"
    assert "saved as metrics (1).csv" in got.note and "overwrite=True" in got.note
    assert (tmp_path / "metrics.csv").read_bytes() == OLD  # never replaced silently
    assert (tmp_path / "metrics (1).csv").read_bytes() == NEW
    # again: the copy beside it has the content: nothing fetched, and said so
    calls.clear()
    [again] = download([info], tmp_path, source({"metrics.csv": NEW}, calls))
    assert calls == [] and again.outcome == "up to date"
    assert again.note == "metrics.csv: already up to date as metrics (1).csv (same sha256)"
    # overwrite=True replaces it, and says so
    [rep] = download([info], tmp_path, source({"metrics.csv": NEW}, calls), overwrite=True)
    assert rep.outcome == "replaced" and "replaced" in rep.note
    assert (tmp_path / "metrics.csv").read_bytes() == NEW


def test_same_content_is_not_fetched(tmp_path: Path) -> None:
    (tmp_path / "metrics.csv").write_bytes(NEW)
    calls: list[tuple[str, int]] = []
    [got] = download([FileInfo("metrics.csv", len(NEW), 1.0, sha(NEW))], tmp_path,
                     source({"metrics.csv": NEW}, calls))
    assert calls == [] and got.outcome == "up to date"
    assert got.note == "metrics.csv: already up to date (same sha256)" and os.fspath(got) == str(got.path)


def test_large_file_is_hashed_remotely_only_when_a_local_file_is_in_the_way(tmp_path: Path) -> None:
    asked: list[str] = []

    def digest(name: str) -> str | None:
        asked.append(name)
        return sha(NEW)

    calls: list[tuple[str, int]] = []
    info = FileInfo("big.bin", len(NEW), 1.0)  # no sha256 in the listing
    download([info], tmp_path, source({"big.bin": NEW}, calls), digest=digest)
    assert asked == []  # nothing in the way: no hashing
    [got] = download([info], tmp_path, source({"big.bin": NEW}, calls), digest=digest)
    assert asked == ["big.bin"] and got.outcome == "up to date"
    (tmp_path / "big.bin").write_bytes(OLD)
    [got] = download([info], tmp_path, source({"big.bin": NEW}, calls), digest=digest)
    assert got.outcome == "renamed" and (tmp_path / "big.bin").read_bytes() == OLD
    # no digest at all: the content cannot be compared, so the file is not taken for the same
    [got] = download([info], tmp_path / "x", source({"big.bin": NEW}, calls))
    (tmp_path / "x" / "big.bin").write_bytes(OLD)
    [got] = download([info], tmp_path / "x", source({"big.bin": NEW}, calls))
    assert got.outcome == "renamed" and "could not be compared" in got.note


def test_part_is_resumed_only_for_the_same_remote_file(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    calls: list[tuple[str, int]] = []

    def cut(name: str, offset: int) -> Iterator[bytes]:
        calls.append((name, offset))
        yield data[offset:4000]

    first = FileInfo("w.bin", len(data), 100.0, sha(data))
    with pytest.raises(TiersError, match="stopped at 4000"):
        download([first], tmp_path, cut, source="p:1:/w")
    assert (tmp_path / "w.bin.part").stat().st_size == 4000
    calls.clear()
    download([first], tmp_path, source({"w.bin": data}, calls), source="p:1:/w")
    assert calls == [("w.bin", 4000)] and (tmp_path / "w.bin").read_bytes() == data
    assert not (tmp_path / "w.bin.part").exists() and not (tmp_path / "w.bin.part.meta").exists()

    # A .part of an older version of the file (other mtime and content, same size): start over.
    changed = bytes(reversed(data))
    for other in (FileInfo("v.bin", len(data), 200.0, sha(changed)),
                  FileInfo("v.bin", len(data), 100.0, sha(data))):
        with pytest.raises(TiersError):
            download([FileInfo("v.bin", len(data), 100.0, sha(data))], tmp_path / other.sha256[:4], cut,
                     source="p:1:/w")
        calls.clear()
        got_source = "p:1:/w" if other.mtime != 100.0 else "p:2:/w"  # the mtime, or the source, differs
        download([other], tmp_path / other.sha256[:4],
                 source({"v.bin": changed if other.mtime != 100.0 else data}, calls), source=got_source)
        assert calls == [("v.bin", 0)], other  # not resumed from the old .part
    # A .part without its record (an older version's download) is not trusted either.
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "u.bin.part").write_bytes(b"\0" * 100)
    calls.clear()
    download([FileInfo("u.bin", len(data), 1.0, sha(data))], tmp_path / "u", source({"u.bin": data}, calls))
    assert calls == [("u.bin", 0)] and (tmp_path / "u" / "u.bin").read_bytes() == data


def test_a_changed_file_is_caught_by_its_sha256(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []
    with pytest.raises(TiersError, match="different sha256"):
        download([FileInfo("m.csv", len(NEW), 1.0, sha(OLD))], tmp_path, source({"m.csv": NEW}, calls))
    assert not (tmp_path / "m.csv").exists() and not (tmp_path / "m.csv.part").exists()


def test_files_get_the_users_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        download([FileInfo("m.csv", len(NEW), 1.0, sha(NEW))], tmp_path, source({"m.csv": NEW}, []))
    finally:
        os.umask(old)
    assert (tmp_path / "m.csv").stat().st_mode & 0o777 == 0o644


def test_numbered() -> None:
    assert numbered("metrics.csv", 1) == "metrics (1).csv"
    assert numbered("out/model.tar.gz", 2) == "out/model (2).tar.gz"
    assert numbered("job.log", 3) == "job (3).log"
    assert numbered("README", 1) == "README (1)"
    assert numbered(".env", 1) == ".env (1)"
    assert numbered("d/.cfg.yaml", 1) == "d/.cfg (1).yaml"


def test_listing_carries_sha256() -> None:
    digest = "ab" * 32
    text = (b"@@ jobdir\n17\t1.0\tout/metrics.csv\0" b"5\t1.0\tbig.bin\0"
            b"\n@@ sha256 jobdir\n" + digest.encode() + b"  out/metrics.csv\0"
            b"zz  big.bin\0" + digest.encode() + b"  ../x\0"
            b"@@ checkpoints\n3\t1.0\ts/m.pt\0"
            b"\n@@ sha256 checkpoints\n" + digest.encode() + b"  s/m.pt\0")
    assert parse_listing(text) == [
        FileInfo("big.bin", 5, 1.0, None),  # a malformed hash is no hash
        FileInfo("checkpoints/s/m.pt", 3, 1.0, digest),
        FileInfo("out/metrics.csv", 17, 1.0, digest),
    ]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_every_outcome_gets_the_users_umask_also_a_resumed_part(tmp_path: Path, umask: int) -> None:
    """Issue 29 §11: not 0600. A ``.part`` an earlier version left (0600) and this download
    resumes must not hand its mode to the file; a renamed or replaced file gets the umask too."""
    from jupyter_tiers.data.files import _part_meta

    want = 0o666 & ~umask
    info = FileInfo("m.csv", len(NEW), 1.0, sha(NEW))
    old = os.umask(umask)
    try:
        resume = tmp_path / "resume"
        resume.mkdir()
        part = resume / "m.csv.part"
        part.write_bytes(NEW[:5])
        part.chmod(0o600)
        (resume / "m.csv.part.meta").write_text(json.dumps(_part_meta(info, "src")))
        calls: list[tuple[str, int]] = []
        [got] = download([info], resume, source({"m.csv": NEW}, calls), source="src")
        assert calls == [("m.csv", 5)] and got.outcome == "saved"  # it was resumed
        (tmp_path / "m.csv").write_bytes(OLD)
        [renamed] = download([info], tmp_path, source({"m.csv": NEW}, []))
        [replaced] = download([info], tmp_path, source({"m.csv": NEW}, []), overwrite=True)
    finally:
        os.umask(old)
    assert renamed.outcome == "renamed" and replaced.outcome == "replaced"
    for path in (got.path, renamed.path, replaced.path):
        assert path.read_bytes() == NEW
        assert path.stat().st_mode & 0o777 == want, (path, oct(path.stat().st_mode))
    assert sorted(p.name for p in resume.iterdir()) == ["m.csv"]  # no probe or .part left
