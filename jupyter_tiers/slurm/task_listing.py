"""One remote command that finds every task's checkpoint of a Slurm job array (pure: builder and
parser; the Slurm tier runs it).

An array task's ``JT_CHECKPOINT_DIR`` is ``{workdir}/{name}/$SLURM_JOB_ID/checkpoints``, and a
task's ``SLURM_JOB_ID`` is its own raw job id (``51_7`` may run as job 58), which only the
scheduler knows. So the command asks sacct (and squeue, for a controller without accounting or a
task still queued) which raw id each ``ARRAY_i`` ran as, then lists each task's directory, and
optionally prints the end of each task's log (for the array's main metric). One round trip for
any number of tasks.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re

from ..batch.arrays import TASKS_DIR
from ..batch.jobdir import CHECKPOINTS, LOG_NAME, parse_listing
from .commands import BASH, NEUTRAL_ENV_SH, check_job_id

#: Marks a task's log tail: ``%tail INDEX BASE64`` (base64, so log text cannot forge a line).
TAIL_MARK = "%tail"

# "$1" array id, "$2" the checkpoint root {workdir}/{name}, "$3" the array's job directory,
# "$4" lines of each task's log to print (0: none). Prints, per task the scheduler knows by its
# raw id: "@@ INDEX DIR" and the directory's "MTIME TYPE NAME" entries (as the status listing),
# then, if asked, "%tail INDEX BASE64" per task directory. Each listing and tail gets at most 10 s.
TASK_CHECKPOINTS_SH = NEUTRAL_ENV_SH + r"""a="$1"; root="$2"; dir="$3"; lines="$4"
lim=()
if command -v timeout >/dev/null 2>&1; then lim=(timeout 10); fi
{ sacct -X -n -P -j "$a" -o JobID,JobIDRaw 2>/dev/null
  squeue -h -r -t all -j "$a" -o '%i|%A' 2>/dev/null; } | sort -u |
while IFS='|' read -r tid raw; do
  case "$tid" in "$a"_*) ;; *) continue ;; esac
  i="${tid#"$a"_}"
  case "$i" in ''|*[!0-9]*) continue ;; esac
  case "$raw" in ''|*[!0-9]*) continue ;; esac
  d="$root/$raw/""" + CHECKPOINTS + r""""
  printf '@@ %s %s\n' "$i" "$d"
  "${lim[@]}" find "$d" -mindepth 1 -maxdepth 1 -printf '%T@ %y %f\n' 2>/dev/null
done
if [ "$lines" -gt 0 ]; then
  for t in "$dir"/""" + TASKS_DIR + r"""/*/; do
    i="${t%/}"; i="${i##*/}"
    case "$i" in ''|*[!0-9]*) continue ;; esac
    printf '%s %s %s\n' '""" + TAIL_MARK + r"""' "$i" \
      "$("${lim[@]}" tail -n "$lines" -- "${t}""" + LOG_NAME + r"""" 2>/dev/null | base64 -w0)"
  done
fi
exit 0
"""

_ROOT_RE = re.compile(r"/[A-Za-z0-9_./+@=,-]{0,2048}")


def task_checkpoints_argv(array_id: str, root: str, jobdir: str, tail_lines: int = 0) -> list[str]:
    """The command listing the checkpoints (and, with ``tail_lines``, the log ends) of every task
    of array ``array_id``; ``root`` is ``{workdir}/{name}``, ``jobdir`` the array's directory."""
    check_job_id(array_id)
    if "_" in array_id:
        raise ValueError(f"{array_id!r} is a task, not an array")
    for path in (root, jobdir):
        if not _ROOT_RE.fullmatch(path) or ".." in path.split("/"):
            raise ValueError(f"{path!r} is not an absolute path of plain characters")
    return [*BASH, TASK_CHECKPOINTS_SH, "jt-task-checkpoints", array_id, root, jobdir,
            str(max(0, int(tail_lines)))]


def parse_task_checkpoints(output: str) -> tuple[dict[int, tuple[str, str | None]], dict[int, str]]:
    """The command's output -> (task index -> (checkpoint dir, newest entry), task index -> the
    end of its log). Lines that are not understood are skipped, so arbitrary text never raises."""
    tails: dict[int, str] = {}
    listing = []
    for line in output.split("\n"):
        if line.startswith(TAIL_MARK + " "):
            index, _, data = line[len(TAIL_MARK) + 1:].partition(" ")
            if index.isascii() and index.isdigit() and len(index) <= 7:
                with contextlib.suppress(binascii.Error, ValueError):
                    raw = base64.b64decode(data.strip(), validate=True)
                    tails[int(index)] = raw.decode("utf-8", "replace")
            continue
        listing.append(line)
    listed = parse_listing("\n".join(listing))
    return listed, tails
