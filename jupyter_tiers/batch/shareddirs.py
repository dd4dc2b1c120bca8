"""Pure: which directories a job may be written under, when other users share the file system.

A job directory (and the workdir it is made in) and a checkpoint directory are written by path,
and sbatch runs in the job directory: if another user can rename or replace any directory on the
way there, they choose where the job's files, its log and its checkpoints go. So every directory
from ``/`` down to the place is checked (:func:`dir_problem`): it belongs to the user or to root,
and nobody else may write it, except a root-owned sticky directory such as ``/tmp`` (there others
may add entries but never rename or remove ours). A symbolic link on the way must be the user's or
root's (its directory is checked too, so nobody else can change it). The place itself, when it
already exists and must be the user's own (a checkpoint directory), must belong to the user and be
closed to writes by group and others: never one somebody else created.

The rule is written twice, once for each place it runs, and ``tests/hardening/
test_shared_dirs.py`` holds the two equal: :func:`dir_problem` for the on-cluster submit
(slurm/submit_here.py, which walks by directory file descriptor) and :data:`UNSAFE_DIRS_SH`, a
bash function for the job script's checkpoint directory (jobdir.checkpoint_lines) and the SSH
submit program (slurm/commands.SUBMIT_SH).
"""

from __future__ import annotations

import stat

# One-line reasons, the same words in Python and in bash (the test compares them).


def dir_problem(path: str, owner: int, mode: int, me: int, *, own: bool = False) -> str | None:
    """Why the directory entry ``path`` (its owner and full ``st_mode``, as ``lstat`` gives them)
    lets someone other than uid ``me`` choose what is below it, or None. ``own``: ``path`` is the
    place itself, which must be ``me``'s and closed to group and others."""
    perm = stat.S_IMODE(mode)
    if stat.S_ISLNK(mode):
        if owner not in (me, 0):
            return f"{path} is a symbolic link of uid {owner}"
        return None
    if own:
        if owner != me:
            return f"{path} belongs to uid {owner}, not to you"
        if perm & 0o022:
            return f"{path} (mode {perm:04o}) is writable by group or others"
        return None
    if owner not in (me, 0):
        return f"{path} belongs to uid {owner}, who could swap what is in it"
    if perm & 0o022 and not (owner == 0 and perm & stat.S_ISVTX):
        return (f"{path} (mode {perm:04o}) is writable by group or others, who could swap what is "
                "in it (only a root-owned sticky directory such as /tmp may be)")
    return None


#: ``jt_unsafe_dirs DIR [own]``: 0 when every directory from / down to DIR (an existing directory)
#: passes :func:`dir_problem`, both as written (each symbolic link on the way judged as a link) and
#: resolved (``pwd -P``); else 1 with the first reason in ``$JT_WHY``. ``own``: DIR itself must be
#: the user's (:func:`dir_problem`'s ``own``). One ``stat`` for the whole walk.
UNSAFE_DIRS_SH = r"""jt_dir_verdict() {  # OWNER RAWMODE(hex) PATH ME [own] -> JT_WHY (batch/shareddirs.py)
  local m=$((16#$2)) p
  p=$((m & 8#7777)); JT_WHY=""
  if [ $((m & 8#170000)) -eq $((8#120000)) ]; then
    if [ "$1" != "$4" ] && [ "$1" != 0 ]; then JT_WHY="$3 is a symbolic link of uid $1"; fi
  elif [ -n "${5:-}" ]; then
    if [ "$1" != "$4" ]; then JT_WHY="$3 belongs to uid $1, not to you"
    elif ((p & 8#022)); then printf -v JT_WHY '%s (mode %04o) is writable by group or others' "$3" "$p"
    fi
  elif [ "$1" != "$4" ] && [ "$1" != 0 ]; then JT_WHY="$3 belongs to uid $1, who could swap what is in it"
  elif ((p & 8#022)) && ! { [ "$1" = 0 ] && ((p & 8#1000)); }; then
    printf -v JT_WHY '%s (mode %04o) is writable by group or others, who could swap what is in it %s' \
      "$3" "$p" "(only a root-owned sticky directory such as /tmp may be)"
  fi
}
jt_unsafe_dirs() {
  local real path part owner raw name last
  local -a dirs=(/) parts
  JT_WHY=""
  real="$(cd -P -- "$1" 2>/dev/null && pwd -P)" || { JT_WHY="$1 is not a directory you can enter"; return 1; }
  path="${1%/}"; case "$path" in /*) ;; "") path=/;; *) path="$PWD/$path";; esac
  for last in "$path" "$real"; do
    IFS=/ read -r -a parts <<< "${last#/}"
    last=""
    for part in "${parts[@]}"; do
      case "$part" in ""|.) continue;; esac
      last="$last/$part"; dirs+=("$last")
    done
  done
  while read -r owner raw name; do
    if [ -n "${2:-}" ] && { [ "$name" = "$path" ] || [ "$name" = "$real" ]; }; then
      jt_dir_verdict "$owner" "$raw" "$name" "$EUID" own
    else
      jt_dir_verdict "$owner" "$raw" "$name" "$EUID"
    fi
    [ -z "$JT_WHY" ] || return 1
  done < <(stat -c '%u %f %n' -- "${dirs[@]}")
  return 0
}
"""
