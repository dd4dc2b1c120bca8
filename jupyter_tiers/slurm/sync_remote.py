"""--sync on a Slurm cluster: one round trip to learn what changed, one tar of only that.

The cluster keeps, per job name, ``{workdir}/.sync/{name}/``: ``tree/`` (the synced files),
``manifest`` (sync.py's text for ``tree/``, written last) and ``snap/TOKEN/`` (a hard-linked
snapshot per submitted job, so a later sync never changes the code a pending or running job
sees; files are replaced by new inodes, never rewritten in place; snapshots older than 30 days
are pruned). The first round trip (:data:`CHECK_SH`) sends the notebook's manifest on stdin; awk
compares it with the stored manifest and with the sizes of the files really in ``tree/`` and
answers ``+ PATH`` (send), ``- PATH`` (delete) lines, or, when nothing changed, takes the
snapshot at once and answers ``= DIR``. Only then does a second round trip (:data:`APPLY_SH`)
carry a tar of the changed files, apply it and take the snapshot. An unchanged project costs one
round trip and no file bytes. Everything here but :func:`sync_to_cluster` is pure.
"""

from __future__ import annotations

import gzip
import io
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, cast

from ..data.sync import Manifest, SyncError, SyncPlan, check_relpath, format_manifest, write_tar
from .commands import BASH, check_workdir

if TYPE_CHECKING:
    from ..transport.base import Transport

# The sync root is checked as commands.SUBMIT_SH checks a job directory: {workdir}/.sync and
# .sync/NAME (and tree/, snap/ in it) are real directories of this user, not symbolic links
# (else another user, or a planted link, would choose where the synced files and snapshots go);
# they are made 0700, so nothing else can create entries in them, and .lock is refused when it
# is a link (bash cannot open with O_NOFOLLOW; in a directory only we can write, no link can
# appear after the check).
_PRELUDE = r"""set -e
umask 077
d="$1"
case "$d" in "~/"*) d="$HOME/${d#"~/"}";; esac
ours() {
  [ -e "$1" ] || [ -L "$1" ] || mkdir -m 0700 -- "$1" 2>/dev/null || true
  if [ -L "$1" ] || [ ! -d "$1" ] || [ ! -O "$1" ]; then
    echo "the sync directory $1 is not a directory of yours (a symbolic link, a file or" \
      "another user's); remove it or choose another workdir" >&2
    exit 4
  fi
  chmod 0700 -- "$1"
}
(umask 067 && mkdir -p -- "${d%/*/*}")
ours "${d%/*}"
ours "$d"
ours "$d/tree"
ours "$d/snap"
if [ -L "$d/.lock" ] || { [ -e "$d/.lock" ] && [ ! -f "$d/.lock" ]; }; then
  echo "the sync lock $d/.lock is not a plain file (a symbolic link?); remove it" >&2
  exit 4
fi
# Two kernels syncing the same name take turns (util-linux flock; without it, no lock).
if command -v flock >/dev/null 2>&1; then exec 9>>"$d/.lock"; flock -w 600 9 || true; fi
[ -f "$d/manifest" ] || : > "$d/manifest"
snapshot() {
  s="$d/snap/$1"
  cp -al -- "$d/tree" "$s"
  touch -- "$s"
  find "$d/snap" -mindepth 1 -maxdepth 1 -type d -mtime +30 -exec rm -rf -- {} + 2>/dev/null || true
  printf '=\t%s\n' "$(cd -- "$s" && pwd -P)"
}
"""

# $1 the sync root, $2 the snapshot token; stdin: the notebook's manifest, kept as
# .pending.TOKEN for the apply step when something changed (so it is sent once). A stored entry
# counts only while the file in tree/ still has its size (one removed or truncated there is
# re-sent).
CHECK_SH = _PRELUDE + r"""sizes="$d/.sizes.$$"
pending="$d/.pending.$2"
trap 'rm -f -- "$sizes"' EXIT
find "$d" -maxdepth 1 -name '.pending.*' -mmin +120 -delete 2>/dev/null || true
cat > "$pending"
(cd -- "$d/tree" && find . -type f -printf '%s\t%P\n') > "$sizes"
changes=$(awk -F'\t' -v m="$d/manifest" -v s="$sizes" '
  FILENAME == m { old[$4] = $0; next }
  FILENAME == s { size[$2] = $1; next }
  { seen[$4] = 1; if (old[$4] != $0 || size[$4] != $2) print "+\t" $4 }
  END { for (p in old) if (!(p in seen)) print "-\t" p }
' "$d/manifest" "$sizes" "$pending")
if [ -z "$changes" ]; then rm -f -- "$pending"; snapshot "$2"; else printf '%s\n' "$changes"; fi
"""

# $1 the sync root, $2 the snapshot token; stdin: a gzipped tar of m/changed (every path sent
# or deleted, one a line), m/delete (the deleted ones, NUL-separated) and t/PATH per file sent.
# The stored manifest first loses every changed entry (so a cut mid-way re-sends them); the
# check's pending manifest replaces it last. A changed file is removed before its new copy
# lands: a new inode, so the snapshots keep the old one.
APPLY_SH = _PRELUDE + r"""pending="$d/.pending.$2"
if [ ! -f "$pending" ]; then
  echo "the manifest of this sync's check is gone (another sync, or over 2 hours old): submit again" >&2
  exit 3
fi
in=$(mktemp -d -- "$d/.in.XXXXXX")
trap 'rm -rf -- "$in"' EXIT
tar -x -z -f - -C "$in"
awk -F'\t' -v c="$in/m/changed" 'FILENAME == c { skip[$0] = 1; next } !($4 in skip)' \
  "$in/m/changed" "$d/manifest" > "$d/manifest.new"
mv -f -- "$d/manifest.new" "$d/manifest"
if [ -s "$in/m/delete" ]; then (cd -- "$d/tree" && xargs -0 rm -f -- < "$in/m/delete"); fi
if [ -d "$in/t" ]; then
  (cd -- "$in/t" && find . -type f -print0) | (cd -- "$d/tree" && xargs -0 rm -f --)
  cp -a -- "$in/t/." "$d/tree/"
fi
find "$d/tree" -mindepth 1 -type d -empty -delete
mv -f -- "$pending" "$d/manifest"
snapshot "$2"
"""


@dataclass(frozen=True)
class SyncOutcome:
    """What one sync did: the snapshot the job runs in, and its cost."""

    snapshot: str
    round_trips: int
    sent_files: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    sent_bytes: int = 0  # stdin bytes of the round trips (manifest + tar)


def sync_root(workdir: str, name: str) -> str:
    """``{workdir}/.sync/{name}`` (the name is a validated job name: no '/', not '..')."""
    if not name or "/" in name or name in (".", ".."):
        raise SyncError(f"job name {name!r} cannot name a sync directory")
    return f"{check_workdir(workdir)}/.sync/{name}"


def check_argv(root: str, token: str) -> list[str]:
    return [*BASH, CHECK_SH, "jt-sync-check", root, _token(token)]


def apply_argv(root: str, token: str) -> list[str]:
    return [*BASH, APPLY_SH, "jt-sync-apply", root, _token(token)]


def _token(token: str) -> str:
    if not token.isascii() or not token.isalnum() or len(token) > 64:
        raise SyncError(f"snapshot token {token!r}: letters and digits only")
    return token


def parse_check(text: str, local: Manifest) -> tuple[SyncPlan, str | None]:
    """The check's answer: what to send and delete, or the snapshot directory when nothing
    changed. Paths are checked (a delete outside the tree is refused) and a path to send must
    be one of ``local``'s."""
    ours = local.by_path()
    send: list[str] = []
    delete: list[str] = []
    snapshot = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        kind, tab, value = line.partition("\t")
        if not tab or kind not in "+-=" or len(kind) != 1:
            raise SyncError(f"sync check line {n}: unexpected output {line[:80]!r}")
        if kind == "=":
            if not value.startswith("/") or any(ord(c) < 32 for c in value):
                raise SyncError(f"sync check line {n}: {value[:80]!r} is not an absolute directory")
            snapshot = value
            continue
        path = check_relpath(value, f"sync check line {n}")
        if kind == "+":
            if path not in ours:
                raise SyncError(f"sync check line {n}: asks for {path!r}, which is not synced")
            send.append(path)
        else:
            delete.append(path)
    if snapshot is None and not send and not delete:
        raise SyncError("the sync check answered nothing")
    return SyncPlan(tuple(sorted(send)), tuple(sorted(delete))), snapshot


def apply_payload(local: Manifest, sources: Mapping[str, str], plan: SyncPlan) -> bytes:
    """The apply round trip's stdin: a gzipped tar (level 1: small files and tar headers shrink
    several times; fast on big binaries) of the changed paths, the delete list and the files.
    The new manifest is not in it: the check left it on the cluster."""
    by = local.by_path()
    members: list[tuple[str, str | bytes, int]] = [
        ("m/changed", "".join(p + "\n" for p in (*plan.send, *plan.delete)).encode("utf-8"), 0o600),
        ("m/delete", b"".join(p.encode("utf-8") + b"\0" for p in plan.delete), 0o600),
    ]
    members += [(f"t/{p}", sources[p], by[p].mode & 0o700) for p in plan.send]
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1, mtime=0) as gz:
        write_tar(cast(IO[bytes], gz), members)  # a GzipFile is a binary file object
    return buf.getvalue()


def sync_to_cluster(transport: Transport, workdir: str, name: str, local: Manifest,
                    sources: Mapping[str, str]) -> SyncOutcome:
    """Bring ``{workdir}/.sync/{name}/tree`` to ``local`` and snapshot it for one job."""
    root = sync_root(workdir, name)
    token = secrets.token_hex(6)
    text = format_manifest(local).encode("utf-8")
    result = transport.run(check_argv(root, token), stdin=text, check=False, timeout=300)
    if result.exit_status != 0:
        raise SyncError(f"--sync: comparing with {root} failed: {_last(result.stderr)}")
    plan, snapshot = parse_check(result.text(), local)
    if snapshot is not None:
        return SyncOutcome(snapshot, 1, sent_bytes=len(text))
    payload = apply_payload(local, sources, plan)
    result = transport.run(apply_argv(root, token), stdin=payload, check=False, timeout=1800)
    if result.exit_status != 0:
        raise SyncError(f"--sync: writing {root} failed: {_last(result.stderr)}")
    _, snapshot = parse_check(result.text(), local)
    if snapshot is None:
        raise SyncError(f"--sync: {root}: no snapshot was taken")
    return SyncOutcome(snapshot, 2, plan.send, plan.delete, len(text) + len(payload))


def _last(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:300] if lines else "no message"
