"""Code sync (``--sync PATH``): the notebook's directory as a content-hash manifest.

Pure except for :func:`scan`, :func:`build_manifest` and :func:`write_tar`, which read the
notebook's files. A manifest maps each synced file's relative path to its size, sha256 and mode
(``644`` or ``755``: only the executable bit travels). The tiers compare it with what the cluster
already holds and send only what changed (slurm/sync_remote.py; the local tier copies).

Rules, decided here once for every tier:

- ``PATH`` is relative to the notebook's directory (the kernel's working directory) and stays
  inside it: no absolute path, no ``..``. The synced tree mirrors that directory, so a file the
  notebook opens as ``configs/a.yaml`` is ``configs/a.yaml`` for the ranks too, and the tree's
  root is on ``PYTHONPATH`` as the notebook's directory is on the kernel's ``sys.path``.
- ``.gitignore`` and ``.tiersignore`` files (in the notebook's directory and below) are honoured
  with git's semantics (``pathspec``'s GitIgnoreSpec: negation, dir-only ``x/``, anchored ``/x``,
  ``**``); a deeper file's rules win over a shallower one's. ``.git/``, ``__pycache__/``,
  ``.ipynb_checkpoints/``, ``*.pyc`` and the project's ``tiers.yaml`` are never synced. A file
  named on ``--sync`` itself is synced even if an ignore file lists it (as ``git add -f``).
- Credentials that sit beside notebooks are never synced unless the user names them (or a
  directory holding them, such as ``.ssh``) on ``--sync`` itself: ``.env``, ``.env.*``,
  ``.netrc``, ``*.pem``, ``*.key``, ``id_*`` (SSH keys; not ``*.py``), and the directories
  ``.aws/`` and ``.ssh/``. This is decided before any ignore file, so no ``!`` rule in a
  ``.gitignore`` or ``.tiersignore`` that came with a repository brings them back.
- A symbolic link to a regular file inside the notebook's directory is synced as a copy of that
  file; any other symbolic link (to a directory, outside the directory, dangling) is refused in
  one line naming it, so nothing outside the notebook's directory leaves the machine by
  accident. Sockets, FIFOs and devices are skipped.
- File names must be UTF-8 without control characters (a tab or a newline would break the
  line-based manifest the cluster side reads with awk).
- The total is capped (profile ``sync_max_mb``, default 100): over it, one line names the
  largest files, before anything is hashed or sent.
"""

from __future__ import annotations

import hashlib
import os
import stat
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from ..core.errors import TiersError

DEFAULT_MAX_MB = 100
IGNORE_FILES = (".gitignore", ".tiersignore")
NEVER_SYNCED_DIRS = frozenset({".git", "__pycache__", ".ipynb_checkpoints"})
NEVER_SYNCED_SUFFIXES = (".pyc",)
# The project's own tiers.yaml may hold profile env values (tokens): it configures the notebook's
# side and no job reads it. Named on --sync it still travels.
NEVER_SYNCED_FILES = frozenset({"tiers.yaml"})
#: Credentials: never synced unless named on --sync (is_secret).
SECRET_DIRS = frozenset({".aws", ".ssh"})
SECRET_NAMES = frozenset({".env", ".netrc"})
SECRET_SUFFIXES = (".pem", ".key")
MAX_PATH = 1024  # characters of one relative path
MAX_FILES = 50_000
MAX_IGNORE_BYTES = 1 << 20
_HEX = frozenset("0123456789abcdef")


class SyncError(TiersError):
    """A --sync problem, in one line (what was wrong, what is allowed)."""


class Entry(NamedTuple):
    """One synced file."""

    path: str  # relative, POSIX separators
    size: int
    sha256: str
    mode: int  # 0o644 or 0o755


@dataclass(frozen=True)
class Manifest:
    """Every synced file, sorted by path."""

    entries: tuple[Entry, ...] = ()

    @property
    def total(self) -> int:
        return sum(e.size for e in self.entries)

    def by_path(self) -> dict[str, Entry]:
        return {e.path: e for e in self.entries}

    def digest(self) -> str:
        """sha256 of the manifest's text: one hash for the whole tree (a pod annotation)."""
        return hashlib.sha256(format_manifest(self).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SyncPlan:
    """What the receiving side must change: files to (re)send and paths to delete."""

    send: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.send and not self.delete


class Found(NamedTuple):
    """A file :func:`scan` selected: its relative path, size, mode and where to read it."""

    path: str
    size: int
    mode: int
    source: str


# --- paths --------------------------------------------------------------------------------------

def check_relpath(path: str, what: str = "path") -> str:
    """``path`` if it is a safe relative POSIX path (no ``..``, not absolute, no empty or ``.``
    parts, no control characters, valid UTF-8); else SyncError naming it."""
    if not isinstance(path, str) or not path:
        raise SyncError(f"{what}: empty path")
    shown = repr(path[:200])
    if len(path) > MAX_PATH:
        raise SyncError(f"{what} {shown}...: longer than {MAX_PATH} characters")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise SyncError(f"{what} {shown}: not valid UTF-8; rename it or ignore it in .tiersignore") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise SyncError(f"{what} {shown}: control characters (tab, newline, ...) in a file name "
                        "cannot be synced; rename it or ignore it in .tiersignore")
    if path.startswith("/"):
        raise SyncError(f"{what} {shown}: absolute; give a path relative to the notebook's directory")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise SyncError(f"{what} {shown}: only plain relative paths (no '..', '.', '//' parts)")
    return path


def check_sync_paths(paths: Iterable[Any]) -> tuple[str, ...]:
    """The ``--sync`` values, normalised (``./src/`` -> ``src``; ``.`` is the whole directory);
    SyncError for an absolute path or one leaving the notebook's directory."""
    out: list[str] = []
    for raw in paths:
        text = str(raw).strip()
        if not text:
            raise SyncError("--sync: empty path; give a path relative to the notebook's directory, e.g. .")
        if text.startswith(("/", "~")):
            raise SyncError(f"--sync {text!r}: give a path relative to the notebook's directory "
                            "(the synced tree mirrors it), not an absolute one")
        parts = [p for p in text.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise SyncError(f"--sync {text!r}: '..' leaves the notebook's directory; only paths "
                            "inside it can be synced")
        norm = "/".join(parts) or "."
        if norm != ".":
            check_relpath(norm, "--sync")
        if norm not in out:
            out.append(norm)
    return tuple(out)


# --- ignore rules -------------------------------------------------------------------------------

def parse_ignore(text: str, source: str = ".tiersignore") -> Any:
    """A gitignore-syntax file as a matcher (pathspec's GitIgnoreSpec); SyncError if pathspec
    refuses a pattern (naming the file)."""
    import pathspec  # only when something is synced

    if len(text) > MAX_IGNORE_BYTES:
        raise SyncError(f"{source}: larger than {MAX_IGNORE_BYTES} bytes")
    try:
        with warnings.catch_warnings():  # re's FutureWarning on "[[" patterns: not the user's concern
            warnings.simplefilter("ignore")
            return pathspec.GitIgnoreSpec.from_lines(text.splitlines())
    except Exception as exc:  # pathspec raises several types for a bad pattern
        raise SyncError(f"{source}: a pattern pathspec cannot read: {str(exc)[:200]}") from None


# The rules in force in one directory: (directory relative to the root, matcher), shallowest first.
Rules = tuple[tuple[str, Any], ...]


def is_secret(name: str, is_dir: bool) -> bool:
    """Whether a file or directory ``name`` (one path component) looks like credentials."""
    if is_dir:
        return name in SECRET_DIRS
    return (name in SECRET_NAMES or name.startswith(".env.") or name.endswith(SECRET_SUFFIXES)
            or (name.startswith("id_") and not name.endswith(".py")))


def is_ignored(rules: Rules, path: str, is_dir: bool, *, secrets: bool = True) -> bool:
    """Whether ``path`` (relative to the root) is ignored: credentials (:func:`is_secret`,
    unless ``secrets`` is False: the user named them) always; then the deepest ignore file with
    a pattern matching it decides (git's precedence); within a file the last match wins."""
    name = path.rsplit("/", 1)[-1]
    if secrets and is_secret(name, is_dir):
        return True
    if is_dir and name in NEVER_SYNCED_DIRS:
        return True
    if not is_dir and (name.endswith(NEVER_SYNCED_SUFFIXES) or path in NEVER_SYNCED_FILES):
        return True
    for base, spec in reversed(rules):
        sub = path[len(base) + 1:] if base else path
        result = spec.check_file(sub + "/" if is_dir else sub)
        if result.include is not None:
            return bool(result.include)
    return False


def _dir_rules(parent: Rules, root: Path, rel: str) -> Rules:
    rules = parent
    for fname in IGNORE_FILES:
        f = root / rel / fname if rel else root / fname
        if f.is_file():
            shown = f"{rel}/{fname}" if rel else fname
            try:
                text = f.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise SyncError(f"{shown}: cannot read it ({exc.strerror})") from None
            rules = (*rules, (rel, parse_ignore(text, shown)))
    return rules


# --- walking and hashing ------------------------------------------------------------------------

def _mode(st_mode: int) -> int:
    return 0o755 if st_mode & 0o111 else 0o644


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def _file(root: Path, real_root: str, rel: str) -> Found | None:
    """``rel`` as a synced file, following a symlink only to a regular file inside the root."""
    full = os.path.join(root, rel)
    st = os.lstat(full)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(full)
        real = os.path.realpath(full)
        if not _inside(real, real_root) or not os.path.isfile(real):
            kind = "outside the notebook's directory" if not _inside(real, real_root) else (
                "a directory" if os.path.isdir(real) else "nothing (dangling)")
            raise SyncError(f"--sync: {rel} is a symbolic link to {target} ({kind}); only links to "
                            "files inside the directory are synced: ignore it in .tiersignore")
        st = os.stat(real)
        return Found(rel, st.st_size, _mode(st.st_mode), real)
    if not stat.S_ISREG(st.st_mode):
        return None  # a socket, FIFO or device: not code
    return Found(rel, st.st_size, _mode(st.st_mode), full)


def scan(root: str | os.PathLike[str], paths: Sequence[str] = (".",)) -> list[Found]:
    """The files ``paths`` (checked by :func:`check_sync_paths`) select under ``root``, with
    ignore rules applied; sorted by path. Reads names and sizes only, no content."""
    root = Path(root)
    real_root = os.path.realpath(root)
    paths = check_sync_paths(paths)
    found: dict[str, Found] = {}
    dirs: list[str] = []
    for sel in paths:
        full = root / sel if sel != "." else root
        if not os.path.lexists(full):
            raise SyncError(f"--sync {sel}: no such file or directory in {root}")
        if sel != "." and (os.path.islink(full) or not full.is_dir()):
            check_relpath(sel, "--sync")
            f = _file(root, real_root, sel)  # named explicitly: synced even if ignored
            if f is not None:
                found[f.path] = f
        else:
            dirs.append("" if sel == "." else sel)
    for start in dirs:
        # The ignore files of the directories from the root down to ``start`` apply too.
        rules: Rules = ()
        walked = ""
        parts = [p for p in start.split("/") if p]
        # Naming a credentials directory (--sync .ssh) sends what is in it, as the user asked.
        named_secret = any(is_secret(p, True) for p in parts)
        for part in parts:
            rules = _dir_rules(rules, root, walked)
            walked = f"{walked}/{part}" if walked else part
            if is_ignored(rules, walked, True, secrets=False):
                raise SyncError(f"--sync {start}: ignored by a .gitignore or .tiersignore rule")
        _walk(root, real_root, start, rules, found, secrets=not named_secret)
    return sorted(found.values(), key=lambda f: f.path)


def _walk(root: Path, real_root: str, start: str, parent: Rules, found: dict[str, Found], *,
          secrets: bool = True) -> None:
    stack = [(start, parent)]
    while stack:
        rel, inherited = stack.pop()
        rules = _dir_rules(inherited, root, rel)
        try:
            names = sorted(os.listdir(root / rel if rel else root))
        except OSError as exc:
            raise SyncError(f"--sync: cannot list {rel or '.'} ({exc.strerror})") from None
        for name in names:
            child = f"{rel}/{name}" if rel else name
            full = os.path.join(root, child)
            is_dir = os.path.isdir(full) and not os.path.islink(full)
            if is_ignored(rules, child, is_dir, secrets=secrets):
                continue
            check_relpath(child, "--sync: file")
            if is_dir:
                stack.append((child, rules))
                continue
            f = _file(root, real_root, child)
            if f is not None:
                found[f.path] = f
                if len(found) > MAX_FILES:
                    raise SyncError(f"--sync: more than {MAX_FILES} files; ignore what the job does "
                                    "not need in .tiersignore")


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def size_refusal(files: Sequence[Found], max_mb: float) -> str | None:
    """One line if ``files`` exceed ``max_mb`` megabytes (naming the largest), else None."""
    total = sum(f.size for f in files)
    if total <= max_mb * 1_000_000:
        return None
    largest = sorted(files, key=lambda f: (-f.size, f.path))[:3]
    named = ", ".join(f"{f.path} ({_mb(f.size)})" for f in largest)
    return (f"--sync: {_mb(total)} in {len(files)} files is over the {max_mb:g} MB limit (profile "
            f"sync_max_mb); largest: {named}; ignore them in .tiersignore or raise sync_max_mb")


_HASH_CACHE: dict[tuple[str, int, int, int], str] = {}


def file_sha256(path: str) -> str:
    """sha256 of a file, cached per (path, size, mtime, inode) for this process."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns, st.st_ino)
    cached = _HASH_CACHE.get(key)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    digest = h.hexdigest()
    if len(_HASH_CACHE) > 4 * MAX_FILES:
        _HASH_CACHE.clear()
    _HASH_CACHE[key] = digest
    return digest


def build_manifest(root: str | os.PathLike[str], paths: Sequence[str] = (".",),
                   max_mb: float = DEFAULT_MAX_MB) -> tuple[Manifest, dict[str, str]]:
    """The manifest of what ``paths`` select under ``root`` (size cap first, then hashing), and
    where each file is read from (relative path -> local file)."""
    files = scan(root, paths)
    refusal = size_refusal(files, max_mb)
    if refusal:
        raise SyncError(refusal)
    entries = tuple(Entry(f.path, f.size, file_sha256(f.source), f.mode) for f in files)
    return Manifest(entries), {f.path: f.source for f in files}


# --- the manifest's text ------------------------------------------------------------------------

def format_manifest(manifest: Manifest) -> str:
    """One ``SHA256<TAB>SIZE<TAB>MODE<TAB>PATH`` line per file (what the cluster side stores)."""
    return "".join(f"{e.sha256}\t{e.size}\t{e.mode:o}\t{e.path}\n" for e in manifest.entries)


def parse_manifest(text: str) -> Manifest:
    """The inverse of :func:`format_manifest`; SyncError naming the first bad line."""
    entries: dict[str, Entry] = {}
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            raise SyncError(f"manifest line {n}: expected SHA256, SIZE, MODE and PATH separated by tabs")
        sha, size, mode, path = fields
        if len(sha) != 64 or not set(sha) <= _HEX:
            raise SyncError(f"manifest line {n}: {sha[:70]!r} is not a sha256")
        if not size.isascii() or not size.isdigit() or len(size) > 15:
            raise SyncError(f"manifest line {n}: size {size[:20]!r} is not a byte count")
        if mode not in ("644", "755"):
            raise SyncError(f"manifest line {n}: mode {mode[:10]!r}; allowed: 644, 755")
        check_relpath(path, f"manifest line {n}")
        if path in entries:
            raise SyncError(f"manifest line {n}: {path!r} listed twice")
        entries[path] = Entry(path, int(size), sha, int(mode, 8))
    return Manifest(tuple(sorted(entries.values(), key=lambda e: e.path)))


def diff(local: Manifest, remote: Manifest | Mapping[str, Entry]) -> SyncPlan:
    """What to send (new or different content or mode) and delete (gone locally) so that the
    remote side holds ``local``."""
    theirs = remote.by_path() if isinstance(remote, Manifest) else dict(remote)
    ours = local.by_path()
    send = tuple(p for p, e in ours.items() if theirs.get(p) != e)
    delete = tuple(sorted(p for p in theirs if p not in ours))
    return SyncPlan(send=send, delete=delete)


def describe(manifest: Manifest, paths: Sequence[str], limit: int = 50) -> str:
    """The ``--dry-run`` listing: each file with its size, then the total."""
    lines = [f"# --sync {' '.join(paths)}: {len(manifest.entries)} files, {_mb(manifest.total)}"]
    for e in manifest.entries[:limit]:
        lines.append(f"#   {e.path}  ({e.size} bytes{', executable' if e.mode == 0o755 else ''})")
    if len(manifest.entries) > limit:
        lines.append(f"#   ... and {len(manifest.entries) - limit} more")
    return "\n".join(lines) + "\n"


# --- sending ------------------------------------------------------------------------------------

def write_tar(out: IO[bytes], members: Iterable[tuple[str, str | bytes, int]]) -> None:
    """An uncompressed tar of ``(name, local file or bytes, mode)`` members to ``out``; a file is
    copied in chunks (never whole in memory)."""
    import tarfile

    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name, source, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if isinstance(source, bytes):
                import io

                info.size = len(source)
                tar.addfile(info, io.BytesIO(source))
                continue
            with open(source, "rb") as f:
                info.size = os.fstat(f.fileno()).st_size
                info.mtime = int(os.fstat(f.fileno()).st_mtime)
                tar.addfile(info, f)


def copy_tree(manifest: Manifest, sources: Mapping[str, str], dest: str | os.PathLike[str]) -> int:
    """Copy every file of ``manifest`` into ``dest`` (created; private modes kept: 0700 dirs);
    returns the bytes copied."""
    import shutil

    dest = Path(dest)
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    copied = 0
    for e in manifest.entries:
        target = dest / e.path
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(sources[e.path], target, follow_symlinks=True)
        os.chmod(target, e.mode & 0o700)
        copied += e.size
    return copied


def shell_lines(tree: str) -> list[str]:
    """Batch-script lines that make ``tree`` (an already quoted shell word) the ranks' working
    directory and put it first on PYTHONPATH."""
    return [
        "# --sync: the ranks run in the synced copy of the notebook's directory, which is on",
        "# PYTHONPATH as the notebook's directory is on the kernel's sys.path.",
        f"export JT_SYNC_DIR={tree}",
        'cd -- "$JT_SYNC_DIR"',
        'export PYTHONPATH="$JT_SYNC_DIR${PYTHONPATH:+:$PYTHONPATH}"',
    ]


def max_mb(settings: Mapping[str, Any]) -> float:
    """The profile's ``sync_max_mb`` (default 100); SyncError if it is not a positive number."""
    value = settings.get("sync_max_mb", DEFAULT_MAX_MB)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1e6:
        raise SyncError(f"profile sync_max_mb {value!r}: give a number of megabytes above 0 "
                        f"(default {DEFAULT_MAX_MB})")
    return float(value)


def notebook_manifest(paths: Sequence[str], profile: Mapping[str, Any],
                      root: str | os.PathLike[str] | None = None) -> tuple[Manifest, dict[str, str]]:
    """The manifest of ``paths`` in the notebook's directory (``root``, default the kernel's
    working directory) under the size cap of ``profile`` (a profile's settings)."""
    return build_manifest(os.getcwd() if root is None else root, paths, max_mb(profile))
