"""Files back on Slurm (pure): the one command that lists a job's files (with the sha256 of the
small ones, in the same round trip), the one that hashes one file, and the one that streams one
file from an offset. Paths travel as argv words, never inside the program text."""

from __future__ import annotations

from .commands import BASH

# "$1" the job directory, "$2" the checkpoint directory (or empty), "$3" the most records per
# directory, "$4" the largest file hashed. NUL-terminated records (a newline in a name cannot
# break them; files.parse_listing): SIZE TAB MTIME TAB PATH, then after "@@ sha256 LABEL" the
# sha256sum -z lines "HASH  PATH" of that directory's files up to "$4" bytes.
LIST_SH = r"""for pair in "jobdir:$1" "checkpoints:$2"; do
  label="${pair%%:*}"; d="${pair#*:}"
  [ -n "$d" ] || continue
  case "$d" in "~/"*) d="$HOME/${d#"~/"}";; esac
  [ -d "$d" ] || continue
  printf '@@ %s\n' "$label"
  find "$d" -mindepth 1 -type f -printf '%s\t%T@\t%P\0' 2>/dev/null | head -z -n "$3"
  printf '\n@@ sha256 %s\n' "$label"
  (cd -- "$d" && find . -mindepth 1 -type f -size -"$(( $4 + 1 ))"c -printf '%P\0' 2>/dev/null \
    | head -z -n "$3" | xargs -0 -r sha256sum -z -- 2>/dev/null)
done
exit 0
"""

# "$1" the file: its sha256 (nothing when it cannot be read).
SHA_SH = r"""f="$1"
case "$f" in "~/"*) f="$HOME/${f#"~/"}";; esac
sha256sum -- "$f" 2>/dev/null | cut -c1-64
exit 0
"""

# "$1" the file, "$2" the 1-based byte to start from (tail -c +N).
CAT_SH = r"""f="$1"
case "$f" in "~/"*) f="$HOME/${f#"~/"}";; esac
exec tail -c +"$2" -- "$f"
"""


def list_argv(jobdir: str, checkpoint_dir: str | None, limit: int, hash_limit: int) -> list[str]:
    return [*BASH, LIST_SH, "jt-files", jobdir, checkpoint_dir or "", str(int(limit)), str(int(hash_limit))]


def sha_argv(path: str) -> list[str]:
    return [*BASH, SHA_SH, "jt-sha", path]


def cat_argv(path: str, offset: int) -> list[str]:
    return [*BASH, CAT_SH, "jt-cat", path, str(int(offset) + 1)]
