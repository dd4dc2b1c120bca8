"""The job-directory protocol shared by the Slurm and local tiers (pure, no I/O).

A job directory holds the cell body (``main.py``, or ``main.sh`` for a shell body), ``rank.sh``
(the rank shim every rank runs through: it prefixes each output line with the global rank,
``"137: ..."``, and records ``start``, heartbeat and ``exit``/``signal``/``killed`` under
``ranks/<rank>``), ``env.sh`` (mode 600, only with env: ``export K='value'`` lines, so values
never appear in a script shown to the user or stored in the registry), and the merged log
``job.log``. On each heartbeat the shim also samples its program's resource use into
``ranks/<rank>.u`` and ``usage/`` (and, where ``nvidia-smi`` exists, its node's GPUs into
``.gpu/<node>``; see usage.py). This module writes those files' text and reads the rank files back.

It also names a job's checkpoint directory (``JT_CHECKPOINT_DIR``) and reads the tiers' listing of
it (``LISTING_MARKER``, then one ``@@ INDEX DIR`` line per directory and its entries), which the
handoff (handoff.py) turns into the checkpoint a serving tier loads.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable
from dataclasses import replace

from ..core.errors import SpecError
from ..core.model import JobSpec, RankPhase, RankState
from .shareddirs import UNSAFE_DIRS_SH
from .stacks import BOOT_FILE, BOOT_PY, STACKS_DIR
from .usage import APPS_QUERY, GPU_DIR, GPU_QUERY, USAGE_SUFFIX, join_gpus, parse_usage_words

LOG_NAME = "job.log"
RANKS_DIR = "ranks"
CHECKPOINTS = "checkpoints"

#: What jupyter-tiers itself writes into a job directory, on Slurm (SUBMIT_SH, the rendered
#: job) and on the local tier (its supervisor's files): the Files tab shows these apart from the
#: job's own outputs. Names relative to the job directory; an array task's ``tasks/N/params.json``
#: and ``tasks/N/cell.py`` count by their base name.
OWN_FILES = frozenset({
    ".jobid", ".submit.lock", ".upload.tar", "job.sbatch", "rank.sh", "main.py", "main.sh",
    "env.sh", "job.sh", "job.json", "state.json", "supervisor.pid", "supervisor.log", "cancel",
    ".batch-env.json", "array.json", "params.json", "cell.py", ".rank-boot.py",
})
#: Directories whose files are ours: ``code/`` is the ``--sync`` copy of the notebook's files,
#: ``stacks/`` the ranks' answers to ``job.stacks()`` (stacks.py), ``usage/`` the ranks' usage
#: samples (usage.py: one file per rank, 256 rows for a 256-rank job) and ``ranks/`` their states.
OWN_DIRS = ("code", "stacks", "usage", "ranks")
#: Files we write that hold the user's own cell: listed with the job's outputs, not hidden with our
#: plumbing (a user looking for the script found it among jupyter-tiers' own files).
CELL_FILES = frozenset({"main.py", "main.sh", "cell.py"})


def is_own_file(name: str) -> bool:
    """Whether ``name`` (a listed name, relative to the job directory) is one jupyter-tiers
    wrote to run the job, not one the job made (``job.log``, the job's log, is the job's; the
    cell's own ``main.py``, :data:`CELL_FILES`, is the user's)."""
    parts = name.split("/")
    if parts[0] in OWN_DIRS and len(parts) > 1:
        return True
    if len(parts) == 1:
        return name in OWN_FILES and name not in CELL_FILES
    # an array task's own files: tasks/<index>/params.json, tasks/<index>/cell.py
    return len(parts) == 3 and parts[0] == "tasks" and parts[2] == "params.json"


# What a checkpoint directory may hold. The path reaches a shell (the sbatch script) and, through
# the handoff, a Python string literal in a serving body, so it is kept to characters that need no
# quoting anywhere.
_DIR_RE = re.compile(r"^(~/)?[A-Za-z0-9_./+@=,-]+$")
# Entries being written or not meant as checkpoints.
_SKIP_SUFFIXES = (".tmp", ".part", ".partial", ".lock", "~", ".swp")


def job_files(spec: JobSpec) -> dict[str, tuple[str, int]]:
    """The tier-neutral files of a job directory: name -> (content, mode)."""
    # Private modes: a root-run tar keeps them, whatever the umask (see SUBMIT_SH).
    files: dict[str, tuple[str, int]] = {"rank.sh": (RANK_SHIM, 0o700)}
    body = spec.script if spec.script.endswith("\n") else spec.script + "\n"
    files["main.sh" if spec.shell else "main.py"] = (body, 0o600)
    if not spec.shell:  # the rank shim runs a Python cell through it (stacks.py)
        files[BOOT_FILE] = (BOOT_PY, 0o600)
    if spec.env:
        files["env.sh"] = (render_env(spec), 0o600)
    return files


def checkpoint_lines(spec: JobSpec) -> list[str]:
    """Batch-step lines giving every rank ``JT_CHECKPOINT_DIR``, created before the ranks start
    (an existing one checked: the user's own, under directories nobody else can swap).

    Default ``{workdir}/{name}/$SLURM_JOB_ID/checkpoints`` (the workdir is the job directory's
    parent); ``spec.checkpoint_dir`` overrides it (validated; ``~/`` expands through $HOME).
    """
    # 0750 (setgid, so what the ranks write keeps its group) and parents 0750: a serving pod
    # running as another uid of the user's group reads the checkpoints (the ranks run under
    # umask 027, see RANK_SHIM); the job's own files stay 0600. The parents come from mkdir -p
    # under the umask, the directory itself from mkdir -m (with -p, -m would apply to it alone,
    # shellcheck SC2174); an existing directory keeps its mode, as with mkdir -p -m.
    # An existing directory is used only when it and every directory above it pass
    # shareddirs.py's rule (the user's own, nobody else could swap it): never one another user
    # made or can replace; else the job stops before any rank starts, saying why.
    return [
        f"export JT_CHECKPOINT_DIR={checkpoint_dir_shell(spec.checkpoint_dir, spec.name)}",
        '(umask 027 && mkdir -p -- "$(dirname -- "$JT_CHECKPOINT_DIR")"'
        ' && { [ -d "$JT_CHECKPOINT_DIR" ] || mkdir -m 2750 -- "$JT_CHECKPOINT_DIR"; })',
        *UNSAFE_DIRS_SH.splitlines(),
        'if [ -d "$JT_CHECKPOINT_DIR" ] && ! jt_unsafe_dirs "$JT_CHECKPOINT_DIR" own; then',
        '  echo "jupyter-tiers: not writing checkpoints into $JT_CHECKPOINT_DIR: $JT_WHY;'
        ' choose a --checkpoint-dir of your own that only you can write" >&2',
        "  exit 1",
        "fi",
    ]


def render_env(spec: JobSpec) -> str:
    """``export`` lines for env.sh; values are quoted so they reach the job literally."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in spec.env)


_RANK_SHIM = r"""#!/bin/bash
# jupyter-tiers rank shim: run one rank's program, prefix its output with the global rank,
# and record start, heartbeat and exit under ranks/<rank> for the notebook's watcher.
rank="${RANK:-${SLURM_PROCID:-0}}"
export RANK="$rank" WORLD_SIZE="${WORLD_SIZE:-${JT_WORLD_SIZE:-${SLURM_NTASKS:-1}}}"
export LOCAL_RANK="${LOCAL_RANK:-${SLURM_LOCALID:-0}}"
state="$JT_JOB_DIR/ranks/$rank"
node="${SLURMD_NODENAME:-$(hostname)}"
# The run of a requeued job (0 for the first); in the start line and in the program's environment.
export JT_RESTART_COUNT="${JT_RESTART_COUNT:-${SLURM_RESTART_COUNT:-0}}"
printf 'start %s %s %s\n' "$(date +%s.%N)" "$node" "$JT_RESTART_COUNT" >> "$state"
shim=$$
# --signal (signals.py): slurmstepd delivers it to every process of the step. The heartbeat and
# the prefixer started below inherit "ignore"; the shim then only notes it; the program gets the
# default action back (env --default-signal also undoes an "ignore" inherited from torchrun's agent).
sig="${JT_SIGNAL:-}"
if [ -n "$sig" ]; then trap '' "$sig"; fi
# Resource use (usage.py), on each beat: the program's process tree from /proc (CPU seconds,
# CPU % since the last beat, RSS) into ranks/<rank>.u and usage/<rank>; where nvidia-smi exists,
# one rank per node and beat refreshes the node's GPU snapshot .gpu/<node> (mkdir as the lock,
# the others reuse it: never one query per rank). No /proc (or JT_USAGE=0): no sampling.
# The tree is walked down /proc/PID/task/*/children with bash builtins only: no fork, and only
# this rank's processes are read. Scanning all of /proc on every beat of every rank cost
# O(ranks x processes): 1024 local ranks on one machine saturated it. Kernels without the
# children files (CONFIG_PROC_CHILDREN) still get that scan, once per beat per rank.
pidfile="$JT_JOB_DIR/ranks/.$rank.pid"
beat="${JT_HEARTBEAT:-10}"
sampling="${JT_USAGE:-1}"
[ -r /proc/self/stat ] || sampling=0
walk=scan
if [ -r "/proc/$$/task/$$/children" ] && [ "${JT_USAGE_WALK:-}" != scan ]; then walk=children; fi
smi=""
if [ "$sampling" != 0 ]; then
  mkdir -p "$JT_JOB_DIR/usage" "$JT_JOB_DIR/.gpu" 2>/dev/null
  if command -v nvidia-smi >/dev/null 2>&1; then smi=nvidia-smi; fi
fi
hz="$(getconf CLK_TCK 2>/dev/null)"; hz="${hz:-100}"
page="$(getconf PAGESIZE 2>/dev/null)"; page="${page:-4096}"
now_s() {  # seconds since the epoch with 6 decimals into REPLY (bash 5's EPOCHREALTIME, else date)
  local t="${EPOCHREALTIME:-}" frac
  [ -n "$t" ] || t="$(date +%s.%N)"
  t="${t/,/.}"; frac="${t#*.}000000"
  REPLY="${t%%.*}.${frac:0:6}"
}
gpu_due() {  # is the node's GPU snapshot $1 missing or 0.9 beat old (or from the future)?
  local last=""
  read -r _ last < "$1" 2>/dev/null
  now_s
  awk -v now="$REPLY" -v last="${last:-0}" -v beat="$beat" \
    'BEGIN { exit !(now - last >= 0.9 * beat || last - now > beat) }'
}
walk_tree() {  # $1: the program's pid -> its tree's CPU ticks, RSS pages, pids in W_TICKS W_RSS W_IDS
  local -a queue=("$1") kids f
  local i=0 p s k
  W_TICKS=0; W_RSS=0; W_IDS=""
  while [ "$i" -lt "${#queue[@]}" ] && [ "$i" -lt 4096 ]; do
    p="${queue[i]}"; i=$((i + 1))
    s=""
    read -r s < "/proc/$p/stat" 2>/dev/null
    [ -n "$s" ] || continue
    # after "(comm) ": stat fields 3.. -> f[0]=state f[1]=ppid ... f[11..14]=u/s/cu/cstime f[21]=rss
    read -r -a f <<< "${s##*) }"
    W_TICKS=$((W_TICKS + f[11] + f[12] + f[13] + f[14])); W_RSS=$((W_RSS + f[21]))
    W_IDS="$W_IDS${W_IDS:+,}$p"
    for k in /proc/"$p"/task/*/children; do
      kids=()
      read -r -a kids < "$k" 2>/dev/null
      queue+=("${kids[@]}")
    done
  done
}
scan_tree() {  # as walk_tree, from every process's stat (kernels without the children files)
  local line
  line="$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" '
    { p = $1; s = $0; sub(/^[^(]*\(.*\) /, "", s); split(s, f, " ")
      pp[p] = f[2]; t[p] = f[12] + f[13] + f[14] + f[15]; r[p] = f[22] }
    END {
      if (!(root in pp)) exit
      for (p in pp) kids[pp[p]] = kids[pp[p]] " " p
      q[1] = root; n = 1; i = 1; ids = ""
      while (i <= n && n < 4096) {
        p = q[i++]; ticks += t[p]; rss += r[p]; ids = ids (ids == "" ? "" : ",") p
        m = split(kids[p], c, " "); for (j = 1; j <= m; j++) q[++n] = c[j]
      }
      printf "%d %d %s\n", ticks, rss, ids
    }')"
  W_TICKS=0; W_RSS=0; W_IDS=""
  [ -n "$line" ] && read -r W_TICKS W_RSS W_IDS <<< "$line"
}
sample_usage() {
  local pid now us cpu centi line gpu tmp
  read -r pid < "$pidfile" 2>/dev/null || return 0
  now_s; now="$REPLY"; us="${now/./}"; us="$((10#$us))"
  if [ "$walk" = children ]; then walk_tree "$pid"; else scan_tree "$pid"; fi
  [ -n "$W_IDS" ] || return 0
  cpu=0  # tenths of a percent of one core since the last beat
  if [ -n "$prev_ticks" ] && [ "$us" -gt "$prev_us" ]; then
    cpu=$(( (W_TICKS - prev_ticks) * 1000000000 / (hz * (us - prev_us)) ))
    [ "$cpu" -ge 0 ] || cpu=0
  fi
  centi=$((W_TICKS * 100 / hz))
  printf -v line 'usage %s %d.%02d %d.%d %d %s' "$now" "$((centi / 100))" "$((centi % 100))" \
    "$((cpu / 10))" "$((cpu % 10))" "$((W_RSS * page / 1024))" "$W_IDS"
  prev_ticks="$W_TICKS"; prev_us="$us"
  printf '%s\n' "$line" > "$JT_JOB_DIR/ranks/.$rank.u" && mv -f "$JT_JOB_DIR/ranks/.$rank.u" "$state.u"
  printf '%s\n' "$line" >> "$JT_JOB_DIR/usage/$rank"
  [ -n "$smi" ] || return 0
  gpu="$JT_JOB_DIR/.gpu/$node"
  if [ -d "$gpu.lock" ] && [ -n "$(find "$gpu.lock" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then
    rmdir "$gpu.lock" 2>/dev/null  # left by a rank killed while it queried
  fi
  # The node's snapshot is renewed once it is 0.9 beat old (its ts line), by whichever of the
  # node's ranks comes first: checked again under the lock, so never twice within a beat.
  if gpu_due "$gpu" && mkdir "$gpu.lock" 2>/dev/null; then
    if gpu_due "$gpu"; then
      tmp="$JT_JOB_DIR/.gpu/.$node.$rank"
      now_s
      { printf 'ts %s\n' "$REPLY"
        timeout 20 nvidia-smi --query-gpu=__GPU_QUERY__ --format=csv,noheader,nounits | sed 's/^/gpu /'
        timeout 20 nvidia-smi --query-compute-apps=__APPS_QUERY__ --format=csv,noheader,nounits \
          | sed 's/^/app /'
      } > "$tmp" 2>/dev/null && mv -f "$tmp" "$gpu" && cat "$gpu" >> "$JT_JOB_DIR/usage/gpu-$node"
      rm -f "$tmp"
    fi
    rmdir "$gpu.lock" 2>/dev/null
  fi
  return 0
}
# Stacks (stacks.py): a Python cell runs through the boot, which registers faulthandler for a
# real-time signal before the cell starts; a poller answers each new id in stacks/request by
# signalling the program (its pid as the boot recorded it) and waiting for the dump. The poller
# sleeps with read -t on a pipe it holds itself: no process is started while nobody asks.
stk="$JT_JOB_DIR/__STACKS_DIR__"
export JT_STACKS_DIR="$stk"
poll="${JT_STACKS_POLL:-1}"
prog=("$@")
no_python="no Python stack to take: this rank's program is not a Python cell"
[ "${JT_STACKS:-1}" = 0 ] || mkdir -p "$stk" 2>/dev/null
if [ -d "$stk" ] && [ "$#" -ge 2 ] && [ "${2##*/}" = main.py ] && [ -r "$JT_JOB_DIR/__BOOT__" ]; then
  prog=("$1" "$JT_JOB_DIR/__BOOT__" "${@:2}")
  no_python=""
fi
sig_caught() {  # does process $1 catch signal $2 (SigCgt of /proc/PID/status)? no /proc: yes
  local key val
  while read -r key val; do
    if [ "$key" = SigCgt: ]; then (( (16#$val >> ($2 - 1)) & 1 )); return; fi
  done < "/proc/$1/status"
  return 0
}
stacks_answer() {  # $1: a request id -> stacks/<rank>: request ID TS NODE, the dump or none WHY, end ID
  local out="$stk/$rank" pid="" num="" why="" before=0 size=0 last=-1 same=0 n=0
  read -r pid num 2>/dev/null < "$stk/.$rank.boot"
  now_s
  # only the latest answer is kept (faulthandler appends: O_APPEND writes follow the truncation)
  printf 'request %s %s %s\n' "$1" "$REPLY" "$node" > "$out"
  if ! kill -0 "$child" 2>/dev/null; then why="its program has exited"
  elif [ -n "$no_python" ]; then why="$no_python"
  elif [ "$pid" != "$child" ] || [ -z "$num" ]; then
    why="its Python has not set up stack taking (still starting, or see the rank's log)"
  elif ! sig_caught "$child" "$num" 2>/dev/null; then
    why="its program no longer handles the stack signal (it replaced the handler or exec'd another program)"
  fi
  if [ -z "$why" ]; then
    before=$(wc -c < "$out")
    kill -"$num" "$child" 2>/dev/null || why="its program has exited"
  fi
  if [ -z "$why" ]; then
    # faulthandler writes from the signal handler, in one burst of small writes: done once it
    # wrote and then nothing more for 0.5 s; nothing at all within 5 s: it did not run the handler
    while [ "$n" -lt 50 ]; do
      sleep 0.1; n=$((n + 1))
      size=$(wc -c < "$out") || break
      if [ "$size" -gt "$before" ] && [ "$size" = "$last" ]; then
        same=$((same + 1)); [ "$same" -lt 5 ] || break
      else
        same=0
      fi
      last="$size"
    done
    [ "$size" -gt "$before" ] \
      || why="it did not write its stack within 5 s (stopped, or blocked in the kernel)"
  fi
  [ -z "$why" ] || printf 'none %s\n' "$why" >> "$out"
  printf 'end %s\n' "$1" >> "$out"
}
stacks_poll() {
  local nap="" seen="$asked_before" id=""
  exec {nap}<> <(:) || nap=""
  while kill -0 "$shim"; do
    if [ -n "$nap" ]; then read -r -t "$poll" -u "$nap" _; else sleep "$poll"; fi
    id=""
    read -r id _ < "$stk/request"
    if [ -n "$id" ] && [ "$id" != "$seen" ]; then seen="$id"; stacks_answer "$id"; fi
  done
}
# The heartbeat ends with the shim, even if the shim is killed outright.
(prev_ticks=""; prev_us=""
 while sleep "$beat" && kill -0 "$shim" 2>/dev/null; do
   touch "$state"
   if [ "$sampling" != 0 ]; then sample_usage; fi
 done) >/dev/null 2>&1 &
heartbeat=$!
exec 3>&1
exec > >(exec sed -u "s/^/$rank: /" >&3) 2>&1
prefixer=$!
stopped=""
reset=()
if [ -n "$sig" ]; then
  trap ':' "$sig"
  if env --default-signal="$sig" true 2>/dev/null; then reset=(env --default-signal="$sig"); fi
fi
trap 'stopped=15; kill -TERM "$child" 2>/dev/null' TERM
trap 'stopped=2; kill -INT "$child" 2>/dev/null' INT
# Without job control bash starts background commands with INT and QUIT ignored; undo that
# (POSIX allows it in a subshell) so the INT forwarded above reaches the program.
# umask 027: what the rank writes (checkpoints) its group may read; the job's files stay private.
# A request made before the program starts is not for it (read now: the poller may start late).
asked_before=""
read -r asked_before _ 2>/dev/null < "$stk/request"
( trap - INT QUIT; umask 027; exec "${reset[@]}" "${prog[@]}" 3>&- ) &
child=$!
stacker=""
if [ -d "$stk" ]; then
  (stacks_poll) >/dev/null 2>&1 3>&- &
  stacker=$!
fi
if [ "$sampling" != 0 ]; then printf '%s\n' "$child" > "$pidfile"; fi
# A signal that came before $child was set could not be forwarded by the trap: do it now.
if [ -n "$stopped" ]; then kill -"$stopped" "$child" 2>/dev/null; fi
# A trapped signal interrupts wait (128+N); bash keeps the reaped child's own status.
while kill -0 "$child" 2>/dev/null; do wait "$child"; done
wait "$child"; code=$?
kill "$heartbeat" $stacker 2>/dev/null
rm -f "$pidfile"
if [ -n "$stopped" ]; then
  printf 'signal %s %s\n' "$stopped" "$(date +%s.%N)" >> "$state"
elif [ "$code" -gt 128 ]; then
  # HUP/INT/TERM come from outside (Slurm signals every process of the step, and the program
  # may die before our own trap runs): a stop. Any other signal (abort, segfault, an OOM kill)
  # is the rank's own failure.
  case "$((code - 128))" in 1|2|15) event=signal ;; *) event=killed ;; esac
  printf '%s %s %s\n' "$event" "$((code - 128))" "$(date +%s.%N)" >> "$state"
else
  printf 'exit %s %s\n' "$code" "$(date +%s.%N)" >> "$state"
fi
exec 1>&- 2>&-
# Let the prefixer flush the last lines, but do not hang on a background process the program
# left holding the pipe open.
(sleep "${JT_FLUSH_WAIT:-10}"; kill "$prefixer") >/dev/null 2>&1 3>&- &
flush_timer=$!
wait "$prefixer" 2>/dev/null
kill "$flush_timer" 2>/dev/null
exit "$code"
"""
RANK_SHIM = (_RANK_SHIM.replace("__GPU_QUERY__", GPU_QUERY).replace("__APPS_QUERY__", APPS_QUERY)
             .replace("__STACKS_DIR__", STACKS_DIR).replace("__BOOT__", BOOT_FILE))


def parse_rank_files(text: str) -> dict[str, dict[int, RankState]]:
    """Output of the rank-state query -> job dir -> rank -> state.

    The query prints, per job directory, a line ``@@ DIR``, then ``grep -H`` lines
    ``DIR/ranks/R:EVENT ...`` and ``find -printf`` lines ``% R MTIME`` for heartbeats.
    Events: ``start TS NODE [RUN]``, ``exit CODE TS``, ``signal SIG TS`` (stopped from outside),
    ``killed SIG TS`` (died of its own signal), ``requeue RUN TS`` (a requeued job's next run
    began: waiting again, see requeue.py). A rank restarted by a requeue starts again, so a
    later ``start`` clears an earlier end. ``DIR/ranks/R.u:usage ...`` lines are the rank's latest
    resource sample and ``DIR/.gpu/NODE:...`` lines its node's GPU snapshot (usage.py).
    """
    result: dict[str, dict[int, RankState]] = {}
    gpu_text: dict[str, dict[str, list[str]]] = {}  # job dir -> node -> its GPU snapshot's lines
    current: dict[int, RankState] | None = None
    gpus: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("@@ "):
            current = result.setdefault(line[3:], {})
            gpus = gpu_text.setdefault(line[3:], {})
            continue
        if current is None:
            continue
        if line.startswith("% "):
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit():
                rank = int(parts[1])
                prev = current.get(rank, RankState(rank=rank))
                current[rank] = replace(prev, heartbeat_at=_float(parts[2]))
            continue
        path, sep, event = line.partition(":")
        if not sep:
            continue
        head, _, rank_text = path.rpartition("/")
        if head.endswith("/" + GPU_DIR) or head == GPU_DIR:  # a node's GPU snapshot (usage.py)
            gpus.setdefault(rank_text, []).append(event)
            continue
        if rank_text.endswith(USAGE_SUFFIX) and rank_text[: -len(USAGE_SUFFIX)].isdigit():
            rank = int(rank_text[: -len(USAGE_SUFFIX)])
            sample = parse_usage_words(event.split())
            if sample is not None:
                current[rank] = replace(current.get(rank, RankState(rank=rank)), usage=sample)
            continue
        if not rank_text.isdigit():
            continue
        rank = int(rank_text)
        current[rank] = _apply_event(current.get(rank, RankState(rank=rank)), event.split())
    for jobdir, nodes in gpu_text.items():
        if nodes:
            result[jobdir] = join_gpus(result[jobdir], {n: "\n".join(lines) for n, lines in nodes.items()})
    return result


#: Below this many bytes free, a job directory's file system counts as full: the job's log and
#: rank states can no longer be written (a log line or a state line may not fit).
DISK_FULL_BYTES = 64 << 10


def parse_free_space(text: str) -> dict[str, int]:
    """Output of the rank-state query -> job dir -> bytes free on its file system, from the
    ``%free BLOCKS BLOCKSIZE`` line (``stat -f``: blocks an unprivileged writer may use)."""
    result: dict[str, int] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("@@ "):
            current = line[3:]
        elif current is not None and line.startswith("%free "):
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                result[current] = int(parts[1]) * int(parts[2])
    return result


def disk_full_note(jobdir: str, free: int | None) -> str | None:
    """The one line a view shows while a job directory's file system is full, else None."""
    if free is None or free >= DISK_FULL_BYTES:
        return None
    return (f"the cluster's disk holding {jobdir} is full ({free >> 10} KiB free): the job's log "
            f"and rank states cannot be written (No space left on device)")


def parse_rank_file(rank: int, text: str, heartbeat_at: float | None = None,
                    usage_text: str = "") -> RankState:
    """One rank file's text (the shim's ``start``/``exit``/``signal`` lines) -> that rank's state;
    ``usage_text``: its ``ranks/<rank>.u`` (the latest resource sample, usage.py).

    For readers of the job directory itself (the local tier); same rules as parse_rank_files.
    """
    state = RankState(rank=rank, heartbeat_at=heartbeat_at)
    for line in text.splitlines():
        state = _apply_event(state, line.split())
    for line in usage_text.splitlines():
        sample = parse_usage_words(line.split())
        if sample is not None:
            state = replace(state, usage=sample)
    return state


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _apply_event(state: RankState, words: list[str]) -> RankState:
    if not words:
        return state
    kind = words[0]
    if kind == "start" and len(words) >= 2:
        return replace(
            state,
            phase=RankPhase.RUNNING,
            started_at=_float(words[1]),
            node=words[2] if len(words) > 2 else state.node,
            exit_code=None,
            signal=None,
            ended_at=None,
            attempt=int(words[3]) if len(words) > 3 and words[3].isdigit() else state.attempt,
        )
    if kind == "requeue" and len(words) >= 2 and words[1].isdigit():
        return RankState(rank=state.rank, heartbeat_at=state.heartbeat_at, attempt=int(words[1]))
    if kind == "exit" and len(words) >= 3 and words[1].lstrip("-").isdigit():
        code = int(words[1])
        return replace(
            state,
            phase=RankPhase.EXITED if code == 0 else RankPhase.FAILED,
            exit_code=code,
            ended_at=_float(words[2]),
        )
    if kind in ("signal", "killed") and len(words) >= 3 and words[1].isdigit():
        # "signal": stopped from outside (fail-stop, cancel, time limit); "killed": died of its
        # own signal (abort, segfault, out of memory), which makes it a failure.
        return replace(
            state,
            phase=RankPhase.STOPPED if kind == "signal" else RankPhase.FAILED,
            signal=int(words[1]),
            ended_at=_float(words[2]),
        )
    return state


# --- the checkpoint directory -----------------------------------------------------------------


def check_checkpoint_dir(value: str) -> str:
    """A ``--checkpoint-dir`` value: an absolute path or ``~/path`` of plain characters."""
    if not isinstance(value, str) or not _DIR_RE.fullmatch(value) or (
        not value.startswith("/") and not value.startswith("~/")
    ) or ".." in value.split("/"):
        raise SpecError("checkpoint_dir", f"{value!r} is not allowed; use an absolute path or ~/path "
                        "of letters, digits and _ . / + @ = , - (no '..')")
    return value.rstrip("/") or "/"


def checkpoint_dir_shell(spec_dir: str | None, name: str) -> str:
    """The shell word a job script exports as ``JT_CHECKPOINT_DIR``.

    Default: ``{workdir}/{name}/$SLURM_JOB_ID/checkpoints``, where the workdir is the parent of the
    job directory (``$JT_JOB_DIR``). A ``~/`` override is expanded by the shell through ``$HOME``.
    """
    if spec_dir is None:
        return f'"${{JT_JOB_DIR%/*}}/{name}/$SLURM_JOB_ID/{CHECKPOINTS}"'
    path = check_checkpoint_dir(spec_dir)
    if path.startswith("~/"):
        return f'"$HOME"/{path[2:]}'
    return path


def checkpoint_root(jobdir: str, name: str) -> str:
    """``{workdir}/{name}``: where the default checkpoint directories of the jobs named ``name``
    whose directory is ``jobdir`` (absolute) live, one ``{job id}/checkpoints`` each."""
    return f"{posixpath.dirname(jobdir.rstrip('/'))}/{name}"


def default_checkpoint_dir(jobdir: str, name: str, job_id: str) -> str:
    """What the default expands to for a job whose directory is ``jobdir`` (absolute)."""
    return f"{checkpoint_root(jobdir, name)}/{job_id}/{CHECKPOINTS}"


def expected_checkpoint_dir(spec_dir: str | None, jobdir: str, name: str, job_id: str) -> str:
    """The directory recorded at submit (``~/`` is kept; the listing resolves it remotely)."""
    if spec_dir is None:
        return default_checkpoint_dir(jobdir, name, job_id)
    return check_checkpoint_dir(spec_dir)


# --- the listing ------------------------------------------------------------------------------

#: Appended to a status command: after it, one ``@@ INDEX DIR`` line per checkpoint directory
#: (``~/`` resolved), then one ``MTIME TYPE NAME`` line per entry (find -printf).
LISTING_MARKER = "@@jt-checkpoints"


def newest_entry(entries: Iterable[tuple[float, str, str]]) -> str | None:
    """The newest checkpoint among ``(mtime, type, name)`` entries of a directory.

    Files and directories (a Hugging Face ``checkpoint-500/``) count; hidden names and names of
    partial writes (``.tmp``, ``.part``...) do not, nor symbolic links: a link's own mtime says
    nothing about what it points to, and its target may be outside the checkpoint directory (a
    ``latest`` link names a checkpoint that counts by itself). Ties go to the greater name
    (``ckpt-000100.pt`` over ``ckpt-000050.pt``).
    """
    best: tuple[float, str] | None = None
    for mtime, kind, name in entries:
        if kind not in ("f", "d") or not name or name.startswith(".") or "/" in name:
            continue
        if name.endswith(_SKIP_SUFFIXES):
            continue
        if best is None or (mtime, name) > best:
            best = (mtime, name)
    return best[1] if best else None


def parse_listing(text: str) -> dict[int, tuple[str, str | None]]:
    """The listing part of a status command's output -> index -> (resolved dir, newest entry).

    A directory that does not exist (yet) has no entries: ``(dir, None)``. Lines that are not
    understood are skipped, so arbitrary text never raises.
    """
    out: dict[int, tuple[str, str | None]] = {}
    current: int | None = None
    entries: list[tuple[float, str, str]] = []

    def close() -> None:
        if current is not None:
            out[current] = (out[current][0], newest_entry(entries))

    for line in text.split("\n"):
        if line.startswith("@@ "):
            close()
            index, _, directory = line[3:].partition(" ")
            current = int(index) if index.isdigit() and directory else None
            entries = []
            if current is not None:
                out[current] = (directory, None)
            continue
        if current is None:
            continue
        parts = line.split(" ", 2)
        if len(parts) != 3:
            continue
        try:
            mtime = float(parts[0])
        except ValueError:
            continue
        if mtime != mtime:  # NaN
            continue
        entries.append((mtime, parts[1], parts[2]))
    close()
    return out


def split_listing(output: str) -> tuple[str, str]:
    """A status command's stdout -> (the scheduler's own output, the listing)."""
    head, found, tail = output.partition("\n" + LISTING_MARKER + "\n")
    if found:
        return head + "\n", tail
    if output.startswith(LISTING_MARKER + "\n"):
        return "", output[len(LISTING_MARKER) + 1:]
    return output, ""
