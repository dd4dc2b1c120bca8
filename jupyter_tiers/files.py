"""Files back (issue 16 §5): what a job left in its job directory and checkpoint directory, and
fetching them, streamed, resumable, never outside the destination.

Names are relative: ``loss.png``, ``out/metrics.csv`` for the job directory, and
``checkpoints/...`` for the checkpoint directory (``$JT_CHECKPOINT_DIR``). The rank-state files
(``ranks/``) are left out. The tiers list and read (``list_files``, ``file_chunks``); the rest
is here: the listing's parser, patterns, safe destinations and the download loop.

A download writes ``NAME.part`` in chunks and renames it to ``NAME`` once the size matches the
listing: a dropped connection is resumed from the ``.part``'s size at once (up to
``RESUME_ATTEMPTS`` times), any other cut leaves the ``.part`` and the next ``download`` continues
from its size; a file already complete at the destination (same size) is not fetched again.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from .errors import TiersError
from .sync import SyncError, check_relpath

CHECKPOINTS = "checkpoints"
SKIPPED_DIRS = ("ranks",)
RESUME_ATTEMPTS = 5  # a download goes on from its .part after this many dropped connections
MAX_FILES = 10_000  # listed per directory; a job that leaves more is told to narrow the pattern


class FileInfo(NamedTuple):
    """One file a job left: relative name, size in bytes, modification time (epoch seconds)."""

    name: str
    size: int
    mtime: float


def parse_listing(text: bytes) -> list[FileInfo]:
    """``@@ LABEL`` headers, then ``SIZE<TAB>MTIME<TAB>PATH`` records, NUL-terminated (find's
    ``-printf '%s\\t%T@\\t%P\\0'``); label ``jobdir`` or ``checkpoints``. Records that do not
    parse, or whose path is not a safe relative one, are skipped."""
    out: list[FileInfo] = []
    label = None
    for raw in text.split(b"\0"):
        record = raw.lstrip(b"\n")
        if record.startswith(b"@@ "):
            head, _, record = record.partition(b"\n")
            label = head[3:].decode("ascii", "replace").strip()
            if not record:
                continue
        if label not in ("jobdir", CHECKPOINTS) or not record:
            continue
        fields = record.split(b"\t", 2)
        if len(fields) != 3:
            continue
        try:
            size = int(fields[0])
            mtime = float(fields[1])
            path = fields[2].decode("utf-8")
            check_relpath(path)
        except (ValueError, SyncError):
            continue
        if size < 0:
            continue
        if label == "jobdir":
            if path.split("/", 1)[0] in SKIPPED_DIRS:
                continue
            out.append(FileInfo(path, size, mtime))
        else:
            out.append(FileInfo(f"{CHECKPOINTS}/{path}", size, mtime))
    return sorted(out, key=lambda f: f.name)


def select(files: Iterable[FileInfo], pattern: str = "*") -> list[FileInfo]:
    """The files whose name, or base name, matches the glob ``pattern`` (``*.png``,
    ``checkpoints/*``, ``out/metrics.csv``)."""
    if not isinstance(pattern, str) or not pattern:
        raise TiersError("pattern: give a glob such as '*' or '*.csv'")
    return [f for f in files if fnmatch.fnmatchcase(f.name, pattern)
            or fnmatch.fnmatchcase(f.name.rsplit("/", 1)[-1], pattern)]


def remote_path(name: str, jobdir: str, checkpoint_dir: str | None) -> str:
    """Where ``name`` (a listed name) lives on the job's side."""
    check_relpath(name)
    head, _, rest = name.partition("/")
    if head == CHECKPOINTS and rest and checkpoint_dir:
        return f"{checkpoint_dir.rstrip('/')}/{rest}"
    return f"{jobdir.rstrip('/')}/{name}"


def destination(dest: str | os.PathLike[str], name: str) -> Path:
    """``dest/name``, refused (TiersError) if it would land outside ``dest`` (a ``..`` in the
    name, or a symbolic link inside ``dest`` pointing elsewhere)."""
    try:
        check_relpath(name)
    except SyncError as exc:
        raise TiersError(f"download: refused file name: {exc}") from None
    Path(dest).mkdir(parents=True, exist_ok=True)
    root = Path(dest).resolve()
    target = root / name

    def check(directory: Path) -> None:
        real = directory.resolve()
        if real != root and not str(real).startswith(str(root).rstrip("/") + "/"):
            raise TiersError(f"download: {name} would be written outside {root} (through a "
                             f"symbolic link at {directory}); refused")

    existing = target.parent
    while not existing.exists():  # before creating anything: no mkdir through a planted link
        existing = existing.parent
    check(existing)
    target.parent.mkdir(parents=True, exist_ok=True)
    check(target.parent)
    return target


ChunkSource = Callable[[str, int], Iterator[bytes]]  # (listed name, offset) -> its bytes from there


class TransferCut(TiersError):
    """A chunk source's connection dropped mid-file: ``download`` goes on from what arrived."""


def download(files: Sequence[FileInfo], dest: str | os.PathLike[str], chunks: ChunkSource,
             progress: Callable[[str, int, int], None] | None = None) -> list[Path]:
    """Fetch ``files`` into ``dest`` (streamed, resumable); returns the local paths."""
    done: list[Path] = []
    for info in files:
        target = destination(dest, info.name)
        if target.is_file() and not target.is_symlink() and target.stat().st_size == info.size:
            done.append(target)  # already here, complete
            continue
        part = target.with_name(target.name + ".part")
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
        try:
            fd = os.open(part, flags, 0o600)
        except OSError as exc:
            raise TiersError(f"download: cannot write {part}: {exc.strerror}") from None
        with os.fdopen(fd, "ab") as out:
            have = os.fstat(out.fileno()).st_size
            if have > info.size:  # a different file's leftover: start again
                out.truncate(0)
                have = 0
            drops = 0
            while have < info.size:
                try:
                    for chunk in chunks(info.name, have):
                        out.write(chunk)
                        have += len(chunk)
                        if progress is not None:
                            progress(info.name, have, info.size)
                        if have > info.size:
                            break
                    break
                except TransferCut:
                    # The connection dropped: what arrived is in the .part; go on from there
                    # over a new one (a bounded number of times, then say so below).
                    drops += 1
                    out.flush()
                    if drops > RESUME_ATTEMPTS:
                        break
        if have != info.size:
            raise TiersError(f"download: {info.name} stopped at {have} of {info.size} bytes (it "
                             f"changed, or the connection dropped); call download again to resume "
                             f"from {part.name}")
        os.replace(part, target)
        done.append(target)
    return done


def list_local(jobdir: str, checkpoint_dir: str | None) -> list[FileInfo]:
    """The local tier's listing: the same names as a cluster's, from the directories here."""
    out: list[FileInfo] = []
    for label, root in (("jobdir", jobdir), (CHECKPOINTS, checkpoint_dir)):
        if not root or not os.path.isdir(root):
            continue
        count = 0
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root)
            if label == "jobdir" and rel_dir == ".":
                dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS]
            for fname in filenames:
                full = os.path.join(dirpath, fname)
                try:
                    st = os.lstat(full)
                except OSError:
                    continue
                if not os.path.isfile(full) or os.path.islink(full):
                    continue
                rel = fname if rel_dir == "." else f"{rel_dir}/{fname}"
                try:
                    check_relpath(rel)
                except SyncError:
                    continue
                out.append(FileInfo(rel if label == "jobdir" else f"{CHECKPOINTS}/{rel}",
                                    st.st_size, st.st_mtime))
                count += 1
                if count >= MAX_FILES:
                    break
    return sorted(out, key=lambda f: f.name)


def local_chunks(path: str, offset: int, size: int = 1 << 20) -> Iterator[bytes]:
    """A local file from ``offset``, in chunks."""
    with open(path, "rb") as f:
        f.seek(offset)
        while chunk := f.read(size):
            yield chunk
