"""The Slurm view of a local job: emulated nodes, the environment its steps see, ``--time``.

Node names (``local0``...) and their hostlist, the names of the variables set for the job, per
rank and for torchrun, cleaning the inherited environment of an outer job's or launcher's
variables, parsing a Slurm time limit, and a free port for the rendezvous.

This module imports only the standard library, to start fast.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

NODE_PREFIX = "local"
MASTER_ADDR = "127.0.0.1"

# Variables set for the whole job (the batch step and every rank).
JOB_ENV_NAMES = (
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NAME", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST",
    "SLURM_CLUSTER_NAME", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "JT_JOB_DIR", "JT_WORLD_SIZE",
    "PYTHONUNBUFFERED", "MASTER_ADDR", "MASTER_PORT",
)
# Variables set per rank.
RANK_ENV_NAMES = (
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURMD_NODENAME", "SLURM_STEP_ID",
    "SLURM_STEPID", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
)
TORCHRUN_ENV_NAMES = (
    "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "OMP_NUM_THREADS",
)
# Inherited values that would mislead the job: an outer Slurm job's or torchrun's.
_STRIP_PREFIXES = ("SLURM_", "SLURMD_", "TORCHELASTIC_", "JT_")
_STRIP_NAMES = frozenset(
    {*RANK_ENV_NAMES, *TORCHRUN_ENV_NAMES, "MASTER_ADDR", "MASTER_PORT", "GROUP_WORLD_SIZE"}
) - {"OMP_NUM_THREADS"}
_KEEP_JT = frozenset({"JT_HEARTBEAT"})


def node_names(nodes: int) -> list[str]:
    return [f"{NODE_PREFIX}{i}" for i in range(nodes)]



def nodelist(nodes: int) -> str:
    """Slurm hostlist of the emulated nodes: ``local0`` or ``local[0-3]``."""
    return f"{NODE_PREFIX}0" if nodes == 1 else f"{NODE_PREFIX}[0-{nodes - 1}]"



def parse_time_limit(text: str | None) -> float | None:
    """Slurm ``--time`` (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) -> seconds; 0 = none."""
    if not text:
        return None
    days = 0
    rest = text
    if "-" in text:
        day_text, rest = text.split("-", 1)
        days = int(day_text)
        parts = [int(p) for p in rest.split(":")]
        h, m, s = [*parts, 0, 0][:3]
    else:
        parts = [int(p) for p in rest.split(":")]
        if len(parts) == 1:
            h, m, s = 0, parts[0], 0
        elif len(parts) == 2:
            h, m, s = 0, parts[0], parts[1]
        else:
            h, m, s = parts[:3]
    total = ((days * 24 + h) * 60 + m) * 60 + s
    return float(total) if total > 0 else None



def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((MASTER_ADDR, 0))
        return int(s.getsockname()[1])



def clean_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The submitting process's environment without an outer job's or launcher's variables."""
    env = {}
    for key, value in environ.items():
        if key in _STRIP_NAMES or (key.startswith(_STRIP_PREFIXES) and key not in _KEEP_JT):
            continue
        if key == "MPLBACKEND" and "matplotlib_inline" in value:
            continue  # the kernel's inline backend means nothing outside the kernel
        env[key] = value
    return env

