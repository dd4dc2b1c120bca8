"""Files back (issue 16 §5): what a job left in its job directory and checkpoint directory, and
fetching them, streamed, resumable, never outside the destination.

Names are relative: ``loss.png``, ``out/metrics.csv`` for the job directory, and
``checkpoints/...`` for the checkpoint directory (``$JT_CHECKPOINT_DIR``). The rank-state files
(``ranks/``) are left out. The tiers list and read (``list_files``, ``file_chunks``); the rest
is here: the listing's parser, patterns, safe destinations and the download loop.

A download writes ``NAME.part`` in chunks and renames it to ``NAME`` once the size matches the
listing: a dropped connection is resumed from the ``.part``'s size at once (up to
``RESUME_ATTEMPTS`` times), any other cut leaves the ``.part`` (and ``NAME.part.meta``: the
remote file's size, mtime, sha256 and where it came from) and the next ``download`` continues
from its size, but only when that record still matches the remote file; otherwise it starts over.

An existing local file is decided on by content, never by name or size alone: the listing gives
the sha256 of every file up to ``HASH_LIMIT`` in the same round trip (a larger one is hashed on
the cluster only when a local file of its size is in the way). The same content: nothing is
fetched ("already up to date (same sha256)"); a different one is never replaced silently: it is
saved beside it as ``NAME (1).ext`` unless ``overwrite=True`` ("replaced"). Every file's outcome
is said in its :class:`Downloaded` (``note``). Files are created with the user's umask.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from ..batch.jobdir import LOG_NAME, is_own_file
from ..core.errors import TiersError
from .sync import SyncError, check_relpath

CHECKPOINTS = "checkpoints"
SKIPPED_DIRS = ("ranks",)
RESUME_ATTEMPTS = 5  # a download goes on from its .part after this many dropped connections
MAX_FILES = 10_000  # listed per directory; a job that leaves more is told to narrow the pattern
#: The listing hashes (sha256) every file up to this size in the same round trip.
HASH_LIMIT = 16 << 20
_SHA_RE = re.compile(r"[0-9a-f]{64}")


class FileInfo(NamedTuple):
    """One file a job left: relative name, size in bytes, modification time (epoch seconds),
    and its sha256 when the listing hashed it (files up to ``HASH_LIMIT``; else None)."""

    name: str
    size: int
    mtime: float
    sha256: str | None = None


class Downloaded(NamedTuple):
    """What ``download`` did with one listed file: ``path`` (where its content is now),
    ``outcome`` (``saved``, ``replaced``, ``renamed`` or ``up to date``) and ``note``, one line
    for the user (``metrics.csv: saved as metrics (1).csv (metrics.csv exists with different
    content; overwrite=True replaces it)``). Usable as a path (``open(d)``, ``Path(d)``)."""

    name: str
    path: Path
    outcome: str
    note: str

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return self.note


def parse_listing(text: bytes) -> list[FileInfo]:
    """``@@ LABEL`` headers, then ``SIZE<TAB>MTIME<TAB>PATH`` records, NUL-terminated (find's
    ``-printf '%s\\t%T@\\t%P\\0'``); label ``jobdir`` or ``checkpoints``; after a ``@@ sha256
    LABEL`` header, ``HASH  PATH`` records (``sha256sum -z``) of that directory's files. Records
    that do not parse, or whose path is not a safe relative one, are skipped."""
    out: list[FileInfo] = []
    hashes: dict[str, str] = {}
    label = None
    for raw in text.split(b"\0"):
        record = raw.lstrip(b"\n")
        if record.startswith(b"@@ "):
            head, _, record = record.partition(b"\n")
            label = head[3:].decode("ascii", "replace").strip()
            if not record:
                continue
        if label in ("sha256 jobdir", f"sha256 {CHECKPOINTS}") and record:
            digest, sep, rel = record.partition(b"  ")
            try:
                name = rel.decode("utf-8")
                check_relpath(name)
            except (ValueError, SyncError):
                continue
            if sep and _SHA_RE.fullmatch(digest.decode("ascii", "replace")):
                hashes[name if label == "sha256 jobdir" else f"{CHECKPOINTS}/{name}"] = digest.decode("ascii")
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
    out = [f._replace(sha256=hashes.get(f.name)) if f.size <= HASH_LIMIT else f for f in out]
    return sorted(out, key=lambda f: f.name)


#: The Files tab's groups, in the order it shows them: what the job wrote, its checkpoints, its
#: log, then what jupyter-tiers wrote to run it (batch.jobdir.OWN_FILES).
GROUPS = ("output", CHECKPOINTS, "log", "tiers")


def file_group(name: str) -> str:
    """The group of a listed name (one of ``GROUPS``): ``checkpoints/...`` is ``checkpoints``,
    ``job.log`` (or an array task's ``tasks/N/job.log``) is ``log``, our own plumbing
    (``.jobid``, ``rank.sh``, ``job.sbatch``, ...) is ``tiers``, anything else ``output``."""
    head, _, rest = name.partition("/")
    if head == CHECKPOINTS and rest:
        return CHECKPOINTS
    base = name.rsplit("/", 1)[-1]
    if base == LOG_NAME and (name == LOG_NAME or head == "tasks"):
        return "log"
    return "tiers" if is_own_file(name) else "output"


def in_display_order(files: Iterable[FileInfo]) -> list[FileInfo]:
    """``files`` as the Files tab lists them: by group (``GROUPS``), then by name."""
    return sorted(files, key=lambda f: (GROUPS.index(file_group(f.name)), f.name))


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
Digest = Callable[[str], "str | None"]  # (listed name) -> the remote file's sha256, None: unknown


class TransferCut(TiersError):
    """A chunk source's connection dropped mid-file: ``download`` goes on from what arrived."""


def download_source(profile: str, record: object) -> str:
    """The remote identity a ``.part`` records: profile, job id and job directory."""
    return f"{profile}:{getattr(record, 'job_id', '')}:{getattr(record, 'jobdir', '')}"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a local file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def numbered(name: str, k: int) -> str:
    """``out/metrics.csv`` -> ``out/metrics (k).csv`` (``model.tar.gz`` -> ``model (k).tar.gz``,
    ``.env`` -> ``.env (k)``): the name a different file is saved under beside an existing one."""
    head, sep, base = name.rpartition("/")
    stem, dot, ext = base[1:].partition(".") if base.startswith(".") else base.partition(".")
    stem = base[:1] + stem if base.startswith(".") else stem
    return f"{head}{sep}{stem} ({k}){dot}{ext}"


def _is_plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _part_meta(info: FileInfo, source: str) -> dict[str, object]:
    return {"size": info.size, "mtime": info.mtime, "sha256": info.sha256, "source": source}


def _new_file_mode(directory: Path) -> int:
    """The mode a file created in ``directory`` gets now (0o666 under the user's umask), found by
    creating one: the process's umask cannot be read without setting it, which is not
    thread-safe."""
    probe = directory / f".jt-mode-probe.{os.getpid()}.{threading.get_ident()}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        return stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
        probe.unlink()


def _open_part(part: Path, meta: dict[str, object]) -> tuple[int, int]:
    """Open ``part`` for appending (the user's umask, no symbolic link followed); its bytes are
    kept only when ``part.meta`` records the same remote file (size, mtime, sha256, source),
    else it starts empty. Returns (fd, bytes kept)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
    meta_path = part.with_name(part.name + ".meta")
    try:
        fd = os.open(part, flags, 0o666)
    except OSError as exc:
        raise TiersError(f"download: cannot write {part}: {exc.strerror}") from None
    try:
        have = os.fstat(fd).st_size
        recorded = None
        if have:
            try:
                with open(meta_path, encoding="utf-8") as f:
                    recorded = json.load(f)
            except (OSError, ValueError):
                recorded = None
        if have and (recorded != meta or have > int(meta["size"])):  # type: ignore[call-overload]
            os.ftruncate(fd, 0)  # another file's leftover, or the remote file changed: start over
            have = 0
        if have:  # resumed: a .part an earlier version left is 0600; the file gets the umask's mode
            os.fchmod(fd, _new_file_mode(part.parent))
        if not have or recorded != meta:
            tmp = meta_path.with_name(meta_path.name + ".tmp")
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            with os.fdopen(wfd, "w", encoding="utf-8") as f:
                json.dump(meta, f)
            os.replace(tmp, meta_path)
    except BaseException:
        os.close(fd)
        raise
    return fd, have


def _fetch(info: FileInfo, target: Path, chunks: ChunkSource, source: str,
           progress: Callable[[str, int, int], None] | None) -> None:
    """Stream ``info`` into ``target`` through ``target.part`` (resumed when it is the same
    remote file's), checked against the listed sha256 when there is one."""
    part = target.with_name(target.name + ".part")
    fd, have = _open_part(part, _part_meta(info, source))
    with os.fdopen(fd, "ab") as out:
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
    meta_path = part.with_name(part.name + ".meta")
    if info.sha256 is not None and file_sha256(part) != info.sha256:
        part.unlink()
        meta_path.unlink(missing_ok=True)
        raise TiersError(f"download: {info.name} arrived with a different sha256 than listed (it "
                         f"changed while it was read); list the files again and download it again")
    os.replace(part, target)
    meta_path.unlink(missing_ok=True)


def download(files: Sequence[FileInfo], dest: str | os.PathLike[str], chunks: ChunkSource,
             progress: Callable[[str, int, int], None] | None = None, *, overwrite: bool = False,
             digest: Digest | None = None, source: str = "") -> list[Downloaded]:
    """Fetch ``files`` into ``dest`` (streamed, resumable); one :class:`Downloaded` per file
    saying what happened. A local file already there with the same sha256 is kept ("already
    up to date"); one with other content is replaced only with ``overwrite=True``, else the
    file is saved beside it as ``NAME (1).ext`` (or is up to date there). ``digest`` gives a
    remote file's sha256 when the listing has none (a large file); ``source`` names the remote
    side (a ``.part`` is resumed only for the same source, size, mtime and sha256)."""
    done: list[Downloaded] = []
    for info in files:
        target = destination(dest, info.name)
        remote = [info.sha256]
        asked = [False]

        def same(path: Path, info: FileInfo = info, remote: list[str | None] = remote,
                 asked: list[bool] = asked) -> bool:
            if not _is_plain_file(path) or path.stat().st_size != info.size:
                return False
            if remote[0] is None and digest is not None and not asked[0]:
                asked[0] = True
                remote[0] = digest(info.name)
            return remote[0] is not None and file_sha256(path) == remote[0]

        if not os.path.lexists(target):
            _fetch(info._replace(sha256=remote[0]), target, chunks, source, progress)
            done.append(Downloaded(info.name, target, "saved", f"{info.name}: saved to {info.name}"))
            continue
        if same(target):
            done.append(Downloaded(info.name, target, "up to date",
                                   f"{info.name}: already up to date (same sha256)"))
            continue
        unknown = remote[0] is None and _is_plain_file(target) and target.stat().st_size == info.size
        why = ("its content could not be compared (no sha256 of the remote file)" if unknown
               else "with different content")
        if overwrite and _is_plain_file(target):
            _fetch(info._replace(sha256=remote[0]), target, chunks, source, progress)
            done.append(Downloaded(info.name, target, "replaced",
                                   f"{info.name}: replaced the local file (it was {why})"))
            continue
        for k in range(1, 1000):
            alt_name = numbered(info.name, k)
            alt = destination(dest, alt_name)
            if not os.path.lexists(alt):
                _fetch(info._replace(sha256=remote[0]), alt, chunks, source, progress)
                done.append(Downloaded(info.name, alt, "renamed",
                                       f"{info.name}: saved as {alt_name} ({info.name} exists here "
                                       f"{why}; overwrite=True replaces it)"))
                break
            if same(alt):
                done.append(Downloaded(info.name, alt, "up to date",
                                       f"{info.name}: already up to date as {alt_name} (same sha256)"))
                break
        else:
            raise TiersError(f"download: {info.name}: {numbered(info.name, 1)} to "
                             f"{numbered(info.name, 999)} all exist; pass overwrite=True or clear them")
    return done


def list_local(jobdir: str, checkpoint_dir: str | None) -> list[FileInfo]:
    """The local tier's listing: the same names as a cluster's, from the directories here, with
    the sha256 of every file up to ``HASH_LIMIT``."""
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
                sha = None
                if st.st_size <= HASH_LIMIT:
                    with contextlib.suppress(OSError):
                        sha = file_sha256(full)
                out.append(FileInfo(rel if label == "jobdir" else f"{CHECKPOINTS}/{rel}",
                                    st.st_size, st.st_mtime, sha))
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
