"""Pure rendering of a JobSpec into the files of a Slurm job directory.

Nothing here does I/O. The job directory holds:

- ``job.sbatch``: ``#SBATCH`` directives, setup lines from the profile, then the launcher;
- ``main.py`` (or ``main.sh`` with ``shell=True``): the notebook cell, verbatim;
- ``rank.sh``: the rank shim every task runs through; it records start, heartbeat and exit of its
  rank under ``ranks/`` and prefixes each output line with the global rank (``"137: ..."``);
- ``env.sh`` (mode 600, only when there is env): ``export K='value'`` lines, so values never appear
  in the script shown to the user or stored in the registry.

Every user value is validated first; whatever reaches a shell is quoted with ``shlex.quote``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..errors import SpecError
from ..model import LAUNCHERS, JobSpec

LOG_NAME = "job.log"
RANKS_DIR = "ranks"
DEFAULT_RDZV_BASE = 29500

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=@-]{0,127}$")
_LIST_RE = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
_CONSTRAINT_RE = re.compile(r"^[A-Za-z0-9_.,&|\[\]*()!:-]+$")
_TIME_RE = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d{1,2}(:\d{1,2}){0,2})$")
_MEM_RE = re.compile(r"^\d+[KMGT]?$", re.IGNORECASE)
_SWITCHES_RE = re.compile(r"^\d+(@(\d+-)?\d{1,2}(:\d{1,2}){0,2})?$")
_GPUS_RE = re.compile(r"^([A-Za-z0-9_.-]+:)?\d+$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OPT_NAME_RE = re.compile(r"^--[a-z][a-z0-9-]*$")
_OPT_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:@%+=/\[\]*&|!()-]+$")
_PYTHON_RE = re.compile(r"^[A-Za-z0-9_./+~-]+$")

# Options jupyter-tiers sets itself; passing them through would break log following or status.
_MANAGED_OPTIONS = {
    "--output": "jupyter-tiers writes the log to the job directory",
    "--error": "jupyter-tiers writes the log to the job directory",
    "--chdir": "the job runs in its job directory",
    "--open-mode": "the log is opened in append mode",
    "--parsable": "set by jupyter-tiers",
    "--wrap": "the cell body is the script",
    "--array": "array jobs are not supported yet",
    "--job-name": "use --name",
    "--nodes": "use --nodes",
    "--ntasks-per-node": "use --ntasks-per-node",
    "--export": "use --env K=V",
}


@dataclass(frozen=True)
class RenderedJob:
    """The files of one job directory: name -> (content, mode)."""

    files: dict[str, tuple[str, int]]

    @property
    def script(self) -> str:
        """The sbatch script (no secrets: env values live in env.sh)."""
        return self.files["job.sbatch"][0]


def _need(field: str, value: str | None, pattern: re.Pattern[str], allowed: str) -> None:
    if value is None:
        return
    if not pattern.match(value):
        raise SpecError(field, f"{value!r} is not allowed; {allowed}")


def _positive(field: str, value: int | None, upper: int = 1_000_000) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise SpecError(field, f"must be a whole number from 1 to {upper}, got {value!r}")


def validate_spec(spec: JobSpec) -> None:
    """Raise SpecError for the first bad field of ``spec``."""
    _need("name", spec.name, _NAME_RE,
          "use letters, digits and . _ + = @ - (at most 128, starting with a letter or digit)")
    _positive("nodes", spec.nodes, 100_000)
    _positive("ntasks_per_node", spec.ntasks_per_node, 4096)
    _positive("cpus_per_task", spec.cpus_per_task, 4096)
    _positive("nproc_per_node", spec.nproc_per_node, 4096)
    if spec.rdzv_port is not None:
        _positive("rdzv_port", spec.rdzv_port, 65535)
    _need("gpus_per_node", spec.gpus_per_node, _GPUS_RE, "use a count like 8 or type:count like a100:8")
    _need("mem", spec.mem, _MEM_RE, "use a size like 4000, 16G or 512M")
    _need("time", spec.time, _TIME_RE,
          "use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")
    for field in ("partition", "account", "qos"):
        _need(field, getattr(spec, field), _LIST_RE,
              "use letters, digits, '.', '_', '-' (comma-separated for several)")
    _need("constraint", spec.constraint, _CONSTRAINT_RE,
          "use Slurm feature syntax: names with & | , [ ] * ( ) ! : (no spaces)")
    _need("switches", spec.switches, _SWITCHES_RE, "use COUNT or COUNT@HH:MM:SS, e.g. 1@10:00")
    if spec.launcher not in LAUNCHERS:
        raise SpecError("launcher", f"{spec.launcher!r} is not allowed; use one of {', '.join(LAUNCHERS)}")
    _need("python", spec.python, _PYTHON_RE, "give an interpreter path or name without spaces")
    for key, value in spec.env:
        if not _ENV_KEY_RE.match(key):
            raise SpecError(f"env {key!r}", "names use letters, digits and '_' and do not start with a digit")
        if "\x00" in value:
            raise SpecError(f"env {key}", "values cannot contain a NUL byte")
    for i, line in enumerate(spec.setup):
        if "\n" in line or "\r" in line or "\x00" in line:
            raise SpecError(f"setup[{i}]", "each setup entry is one line")
    for opt in spec.sbatch_options:
        parse_sbatch_option(opt)
    if "\x00" in spec.script:
        raise SpecError("script", "the cell body cannot contain a NUL byte")


def parse_sbatch_option(opt: str) -> tuple[str, str | None]:
    """Validate one passthrough option ``--key=value`` or ``--flag``; returns (key, value)."""
    name, sep, value = opt.partition("=")
    if not _OPT_NAME_RE.match(name):
        raise SpecError(
            "sbatch option", f"{opt!r} is not allowed; write long options as --key=value or --flag"
        )
    if name in _MANAGED_OPTIONS:
        raise SpecError("sbatch option", f"{name} cannot be passed through: {_MANAGED_OPTIONS[name]}")
    if sep and not _OPT_VALUE_RE.match(value):
        raise SpecError(
            "sbatch option",
            f"value of {name} {value!r} is not allowed; no spaces, quotes or shell characters",
        )
    return name, (value if sep else None)


def _directives(spec: JobSpec) -> list[str]:
    tasks_per_node = 1 if spec.launcher == "torchrun" else spec.ntasks_per_node
    pairs: list[tuple[str, str | None]] = [
        ("--job-name", spec.name),
        ("--nodes", str(spec.nodes)),
        ("--ntasks-per-node", str(tasks_per_node)),
    ]
    optional = [
        ("--gpus-per-node", spec.gpus_per_node),
        ("--cpus-per-task", str(spec.cpus_per_task) if spec.cpus_per_task else None),
        ("--mem", spec.mem),
        ("--time", spec.time),
        ("--partition", spec.partition),
        ("--account", spec.account),
        ("--qos", spec.qos),
        ("--constraint", spec.constraint),
        ("--switches", spec.switches),
    ]
    pairs += [(k, v) for k, v in optional if v is not None]
    lines = [f"#SBATCH {k}={v}" for k, v in pairs]
    if spec.exclusive:
        lines.append("#SBATCH --exclusive")
    lines.append("#SBATCH --requeue" if spec.requeue else "#SBATCH --no-requeue")
    lines += [f"#SBATCH --output={LOG_NAME}", "#SBATCH --open-mode=append"]
    for opt in spec.sbatch_options:
        name, value = parse_sbatch_option(opt)
        lines.append(f"#SBATCH {name}" if value is None else f"#SBATCH {name}={value}")
    return lines


def _program(spec: JobSpec) -> list[str]:
    """argv (already quoted words) that one rank runs, inside the shim."""
    if spec.shell:
        return ["bash", '"$JT_JOB_DIR/main.sh"']
    return [shlex.quote(spec.python), '"$JT_JOB_DIR/main.py"']


def _master_lines(spec: JobSpec) -> list[str]:
    port = str(spec.rdzv_port) if spec.rdzv_port else f"$(( {DEFAULT_RDZV_BASE} + SLURM_JOB_ID % 1000 ))"
    return [
        "# The rendezvous (torchrun's c10d, or env:// for srun) runs on the head node; take its",
        "# address from Slurm, since node names need not resolve where NodeAddr is set.",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'MASTER_ADDR=$(scontrol show node "$head_node" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')',
        'export MASTER_ADDR="${MASTER_ADDR:-$head_node}"',
        f"export MASTER_PORT={port}",
    ]


def _launcher(spec: JobSpec) -> list[str]:
    shim = ["bash", '"$JT_JOB_DIR/rank.sh"']
    if spec.launcher == "srun":
        return [
            f"srun --kill-on-bad-exit=1 --ntasks-per-node={spec.ntasks_per_node} "
            + " ".join(shim + _program(spec)),
        ]
    torchrun = (
        "torchrun"
        if spec.python == "python3"
        else shlex.quote(spec.python) + " -m torch.distributed.run"
    )
    return [
        "srun --kill-on-bad-exit=1 --ntasks-per-node=1 \\",
        f'  {torchrun} --nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node={spec.ranks_per_node} \\',
        '  --rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \\',
        "  --no-python " + " ".join(shim + _program(spec)),
    ]


def render_sbatch(spec: JobSpec) -> str:
    """The sbatch script for ``spec`` (validated). Contains no env values."""
    validate_spec(spec)
    lines = ["#!/bin/bash", *_directives(spec), ""]
    lines += [
        "# Rendered by jupyter-tiers. The job directory is the submit directory.",
        'export JT_JOB_DIR="$SLURM_SUBMIT_DIR"',
        f"export JT_WORLD_SIZE={spec.world_size}",
        "export PYTHONUNBUFFERED=1",
    ]
    if spec.env:
        names = " ".join(k for k, _ in spec.env)
        lines += [f"# env (values in env.sh, mode 600): {names}", 'source "$JT_JOB_DIR/env.sh"']
    if spec.setup:
        lines += ["", "# setup from the profile", *spec.setup]
    lines += ["", *_master_lines(spec), *_launcher(spec), ""]
    return "\n".join(lines)


def render_env(spec: JobSpec) -> str:
    """``export`` lines for env.sh; values are quoted so they reach the job literally."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in spec.env)


RANK_SHIM = r"""#!/bin/bash
# jupyter-tiers rank shim: run one rank's program, prefix its output with the global rank,
# and record start, heartbeat and exit under ranks/<rank> for the notebook's watcher.
rank="${RANK:-${SLURM_PROCID:-0}}"
export RANK="$rank" WORLD_SIZE="${WORLD_SIZE:-${JT_WORLD_SIZE:-${SLURM_NTASKS:-1}}}"
export LOCAL_RANK="${LOCAL_RANK:-${SLURM_LOCALID:-0}}"
state="$JT_JOB_DIR/ranks/$rank"
node="${SLURMD_NODENAME:-$(hostname)}"
printf 'start %s %s\n' "$(date +%s.%N)" "$node" >> "$state"
shim=$$
# The heartbeat ends with the shim, even if the shim is killed outright.
(while sleep "${JT_HEARTBEAT:-10}" && kill -0 "$shim" 2>/dev/null; do touch "$state"; done) \
  >/dev/null 2>&1 &
heartbeat=$!
exec 3>&1
exec > >(exec sed -u "s/^/$rank: /" >&3) 2>&1
prefixer=$!
stopped=""
trap 'stopped=15; kill -TERM "$child" 2>/dev/null' TERM
trap 'stopped=2; kill -INT "$child" 2>/dev/null' INT
# Without job control bash starts background commands with INT and QUIT ignored; undo that
# (POSIX allows it in a subshell) so the INT forwarded above reaches the program.
( trap - INT QUIT; exec "$@" 3>&- ) &
child=$!
# A signal that came before $child was set could not be forwarded by the trap: do it now.
if [ -n "$stopped" ]; then kill -"$stopped" "$child" 2>/dev/null; fi
wait "$child"; code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
kill "$heartbeat" 2>/dev/null
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


def render_job(spec: JobSpec) -> RenderedJob:
    """All files of the job directory for ``spec``."""
    files: dict[str, tuple[str, int]] = {
        "job.sbatch": (render_sbatch(spec), 0o644),
        "rank.sh": (RANK_SHIM, 0o755),
    }
    body = spec.script if spec.script.endswith("\n") else spec.script + "\n"
    files["main.sh" if spec.shell else "main.py"] = (body, 0o644)
    if spec.env:
        files["env.sh"] = (render_env(spec), 0o600)
    return RenderedJob(files=files)
