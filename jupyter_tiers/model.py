"""Plain data shared by every tier: job specs, states, per-rank status and log lines.

Everything here is a frozen dataclass or an enum with no I/O, so renderers, parsers, widgets and
tests can pass these values around freely.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple


class JobState(str, enum.Enum):
    """Scheduler-level state of a job (Slurm's names; other tiers map onto them)."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    UNKNOWN = "UNKNOWN"

    @property
    def terminal(self) -> bool:
        """True once the job can no longer change state."""
        return self in _TERMINAL

    @property
    def ok(self) -> bool:
        return self is JobState.COMPLETED

    @classmethod
    def parse(cls, text: str) -> JobState:
        """Map a scheduler's state word ("CANCELLED by 0", "RUNNING", "CD") onto a JobState."""
        word = text.strip().split(" ")[0].rstrip("+").upper() if text.strip() else ""
        word = _SHORT_CODES.get(word, word)
        try:
            return cls(word)
        except ValueError:
            return cls.UNKNOWN


_TERMINAL = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.OUT_OF_MEMORY,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
    }
)

_SHORT_CODES = {
    "PD": "PENDING",
    "CF": "CONFIGURING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "S": "SUSPENDED",
    "RQ": "REQUEUED",
    "CD": "COMPLETED",
    "F": "FAILED",
    "CA": "CANCELLED",
    "TO": "TIMEOUT",
    "NF": "NODE_FAIL",
    "PR": "PREEMPTED",
    "OOM": "OUT_OF_MEMORY",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
}


class RankPhase(str, enum.Enum):
    """What one rank (one process of the job) is doing."""

    WAITING = "waiting"  # not started yet
    RUNNING = "running"
    EXITED = "exited"  # exit code 0
    FAILED = "failed"  # exited by itself with a non-zero code
    STOPPED = "stopped"  # ended by a signal: fail-stop, cancel, time limit

    @property
    def done(self) -> bool:
        return self in (RankPhase.EXITED, RankPhase.FAILED, RankPhase.STOPPED)


@dataclass(frozen=True)
class RankState:
    """State of one rank as recorded by the rank shim in the job directory."""

    rank: int
    phase: RankPhase = RankPhase.WAITING
    node: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    heartbeat_at: float | None = None


@dataclass(frozen=True)
class SchedulerInfo:
    """What the scheduler says about one job (from squeue, sacct or scontrol)."""

    job_id: str
    state: JobState
    reason: str | None = None
    nodelist: str | None = None
    start_time: str | None = None  # actual start, or expected start while pending
    end_time: str | None = None
    elapsed_s: int | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class JobStatus:
    """Everything known about a job at one moment: scheduler view plus per-rank view."""

    job_id: str
    state: JobState
    reason: str | None = None
    nodelist: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    elapsed_s: int | None = None
    exit_code: int | None = None
    ranks: tuple[RankState, ...] = ()
    world_size: int = 0
    controller_reachable: bool = True
    message: str | None = None  # last problem seen while watching (e.g. controller unreachable)

    @property
    def first_failure(self) -> RankState | None:
        """The rank that failed first by itself (non-zero exit), if any."""
        failed = [r for r in self.ranks if r.phase is RankPhase.FAILED]
        if not failed:
            return None
        return min(failed, key=lambda r: (r.ended_at or float("inf"), r.rank))

    def count(self, phase: RankPhase) -> int:
        return sum(1 for r in self.ranks if r.phase is phase)


class LogLine(NamedTuple):
    """One line of a job's merged log. ``rank`` is None for lines not written by a rank.

    A NamedTuple rather than a frozen dataclass: a fast log makes a million of these a second,
    and a tuple is several times cheaper to build.
    """

    text: str
    rank: int | None = None
    end_offset: int = 0  # byte offset just past this line in the job's log file


LAUNCHERS = ("srun", "torchrun")


@dataclass(frozen=True)
class JobSpec:
    """A training job: what to run and the resources to run it on.

    ``script`` is the cell body. With ``shell=False`` it is Python run by ``python`` on every rank;
    with ``shell=True`` it is a bash script. ``env`` values reach the job literally.
    """

    script: str
    name: str = "notebook-job"
    nodes: int = 1
    ntasks_per_node: int = 1
    gpus_per_node: str | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    exclusive: bool = False
    switches: str | None = None
    requeue: bool = False
    launcher: str = "srun"
    nproc_per_node: int | None = None
    python: str = "python3"
    shell: bool = False
    env: tuple[tuple[str, str], ...] = ()
    setup: tuple[str, ...] = ()
    sbatch_options: tuple[str, ...] = ()
    rdzv_port: int | None = None
    metadata: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def ranks_per_node(self) -> int:
        if self.launcher == "torchrun":
            return self.nproc_per_node or self.ntasks_per_node
        return self.ntasks_per_node

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node
