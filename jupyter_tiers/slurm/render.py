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

import shlex
from dataclasses import dataclass

from ..batch.arrays import PARAMS_FILE, TASKS_DIR, params_json, plan_of, task_files
from ..batch.jobdir import LOG_NAME, checkpoint_lines, job_files
from ..batch.requeue import restart_lines
from ..batch.signals import agent_prefix, forward_lines, signal_directive, wait_lines
from ..core.model import JobSpec
from ..data.sync import shell_lines
from ..spec.jobspec import parse_sbatch_option, validate_spec

DEFAULT_RDZV_BASE = 29500


@dataclass(frozen=True)
class RenderedJob:
    """The files of one job directory: name -> (content, mode), and the sbatch options of its
    ``#SBATCH`` lines, which the submit also passes on sbatch's command line (:func:`sbatch_options`)."""

    files: dict[str, tuple[str, int]]
    options: tuple[str, ...] = ()

    @property
    def script(self) -> str:
        """The sbatch script (no secrets: env values live in env.sh)."""
        return self.files["job.sbatch"][0]


def sbatch_options(spec: JobSpec) -> list[str]:
    """Every sbatch option the magic line and the profile set (``--time=00:10:00``), in the order
    of the script's ``#SBATCH`` lines. The submit passes them on sbatch's command line too: an
    ``SBATCH_*`` variable in the login environment (a site module's ``SBATCH_TIMELIMIT``) beats
    an ``#SBATCH`` line but not a command-line option. Options nobody set stay the site's."""
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
    options = [f"{k}={v}" for k, v in pairs]
    if spec.exclusive:
        options.append("--exclusive")
    options.append("--requeue" if spec.requeue else "--no-requeue")
    if spec.signal:
        options.append(signal_directive(spec.signal).removeprefix("#SBATCH "))
    plan = plan_of(spec)
    if plan is not None:  # each task logs into its own directory (created by the submit)
        options += [f"--array={plan.slurm_spec}", f"--output={TASKS_DIR}/%a/{LOG_NAME}"]
    else:
        options.append(f"--output={LOG_NAME}")
    options.append("--open-mode=append")
    for opt in spec.sbatch_options:
        name, value = parse_sbatch_option(opt)
        options.append(name if value is None else f"{name}={value}")
    return options


def _directives(spec: JobSpec) -> list[str]:
    return [f"#SBATCH {opt}" for opt in sbatch_options(spec)]


def shell_path(path: str) -> str:
    """``path`` as one shell word; a leading ``~/`` still means the home directory (validated
    paths only: jobspec allows "~" nowhere else)."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def _program(spec: JobSpec) -> list[str]:
    """argv (already quoted words) that one rank runs, inside the shim."""
    if spec.shell:
        return ["bash", '"$JT_JOB_DIR/main.sh"']
    return [shell_path(spec.python), '"$JT_JOB_DIR/main.py"']


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
        else shell_path(spec.python) + " -m torch.distributed.run"
    )
    if spec.signal:
        torchrun = agent_prefix(spec.signal) + torchrun
    return [
        "srun --kill-on-bad-exit=1 --ntasks-per-node=1 \\",
        f'  {torchrun} --nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node={spec.ranks_per_node} \\',
        '  --rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \\',
        "  --no-python " + " ".join(shim + _program(spec)),
    ]


def render_sbatch(spec: JobSpec, sync_dir: str | None = None) -> str:
    """The sbatch script for ``spec`` (validated). Contains no env values. ``sync_dir``: the
    snapshot of the synced tree (--sync) the ranks run in (a placeholder when not yet known)."""
    validate_spec(spec)
    lines = ["#!/bin/bash", *_directives(spec), ""]
    lines += [
        "# Rendered by jupyter-tiers. The job directory is the submit directory.",
        "umask 077  # the job's files are the user's alone (the ranks get 027 in rank.sh)",
        'export JT_JOB_DIR="$SLURM_SUBMIT_DIR"',
        f"export JT_WORLD_SIZE={spec.world_size}",
        "export PYTHONUNBUFFERED=1",
        "# Checkpoints go here, on the cluster's shared storage; the notebook records the newest.",
        *checkpoint_lines(spec),
        *_array_task_lines(spec),
    ]
    if spec.env:
        names = " ".join(k for k, _ in spec.env)
        lines += [f"# env (values in env.sh, mode 600): {names}", 'source "$JT_JOB_DIR/env.sh"']
    if spec.requeue:
        lines += ["", *restart_lines(LOG_NAME)]
    if spec.setup:
        lines += ["", "# setup from the profile", *spec.setup]
    launcher = _launcher(spec)
    if spec.signal:
        launcher = ["", *forward_lines(spec.signal), *launcher[:-1], launcher[-1] + " &", *wait_lines()]
    if spec.sync:
        lines += ["", *shell_lines(shell_path(sync_dir) if sync_dir else '"$HOME/SYNCED-AT-SUBMIT"')]
    lines += ["", *_master_lines(spec), *launcher, ""]
    return "\n".join(lines)


def _array_task_lines(spec: JobSpec) -> list[str]:
    """An array task's JT_JOB_DIR is ``tasks/<i>``, given a copy of the code and its params."""
    if plan_of(spec) is None:
        return []
    names = " ".join(f'"$JT_ARRAY_DIR"/{n}' for n in sorted(task_files(spec, job_files(spec))))
    return [
        "# An array task: its own job directory (rank files, log) and its parameters.",
        'export JT_ARRAY_DIR="$SLURM_SUBMIT_DIR"',
        f'export JT_JOB_DIR="$JT_ARRAY_DIR/{TASKS_DIR}/$SLURM_ARRAY_TASK_ID"',
        'mkdir -p -- "$JT_JOB_DIR/ranks"',
        f"cp -p -- {names} \"$JT_JOB_DIR\"/",
        f'JT_PARAMS=$(cat -- "$JT_JOB_DIR/{PARAMS_FILE}")',
        "export JT_PARAMS",
    ]


def render_job(spec: JobSpec, sync_dir: str | None = None) -> RenderedJob:
    """All files of the job directory for ``spec``: the sbatch script and the job-directory
    protocol's files (jobdir.py); for an array, each task's directory with its log and params."""
    files = job_files(spec)
    plan = plan_of(spec)
    if plan is not None:
        files = task_files(spec, files)
        for i, params in zip(plan.indices, plan.params, strict=True):
            files[f"{TASKS_DIR}/{i}/{LOG_NAME}"] = ("", 0o600)
            files[f"{TASKS_DIR}/{i}/{PARAMS_FILE}"] = (params_json(params) + "\n", 0o600)
    return RenderedJob(files={"job.sbatch": (render_sbatch(spec, sync_dir), 0o600), **files},
                       options=tuple(sbatch_options(spec)))
