"""Files back on Slurm (pure): the one command that lists a job's files, and the one that
streams one file from an offset. Paths travel as argv words, never inside the program text."""

from __future__ import annotations

from .commands import BASH

# "$1" the job directory, "$2" the checkpoint directory (or empty), "$3" the most records per
# directory. NUL-terminated records (a newline in a name cannot break them; files.parse_listing).
LIST_SH = r"""for pair in "jobdir:$1" "checkpoints:$2"; do
  label="${pair%%:*}"; d="${pair#*:}"
  [ -n "$d" ] || continue
  case "$d" in "~/"*) d="$HOME/${d#"~/"}";; esac
  [ -d "$d" ] || continue
  printf '@@ %s\n' "$label"
  find "$d" -mindepth 1 -type f -printf '%s\t%T@\t%P\0' 2>/dev/null | head -z -n "$3"
done
exit 0
"""

# "$1" the file, "$2" the 1-based byte to start from (tail -c +N).
CAT_SH = r"""f="$1"
case "$f" in "~/"*) f="$HOME/${f#"~/"}";; esac
exec tail -c +"$2" -- "$f"
"""


def list_argv(jobdir: str, checkpoint_dir: str | None, limit: int) -> list[str]:
    return [*BASH, LIST_SH, "jt-files", jobdir, checkpoint_dir or "", str(int(limit))]


def cat_argv(path: str, offset: int) -> list[str]:
    return [*BASH, CAT_SH, "jt-cat", path, str(int(offset) + 1)]
