"""Plain data shared by every tier: job specs, states, per-rank status and log lines.

Everything here is immutable and does no I/O: frozen dataclasses whose collections are tuples,
enums, and NamedTuples for the per-line log values (a fast log makes a million a second). So
renderers, parsers, widgets and tests can pass these values around freely
(tests/unit/test_layout.py checks it).
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
    # Slurm states without a member of their own, read as the nearest one (the Slurm tier shows
    # the word itself next to it: slurm/parse.py slurm_state). A word nobody knows is UNKNOWN.
    "RD": "PENDING", "RESV_DEL_HOLD": "PENDING",  # held: its reservation was deleted
    "RH": "PENDING", "REQUEUE_HOLD": "PENDING",  # requeued and held
    "RF": "PENDING", "REQUEUE_FED": "PENDING",  # requeued by its federation
    "SE": "PENDING", "SPECIAL_EXIT": "PENDING",  # requeued and held after a special exit code
    "RS": "RUNNING", "RESIZING": "RUNNING",
    "SO": "COMPLETING", "STAGE_OUT": "COMPLETING",  # its burst buffer is staged out
    "ST": "SUSPENDED", "STOPPED": "SUSPENDED",  # SIGSTOPped, resources kept
    "RV": "CANCELLED", "REVOKED": "CANCELLED",  # a federation sibling that ran elsewhere
    "EXPEDITING": "REQUEUED",  # 25.11: on its way back by an expedited requeue
}


class WorkKind(str, enum.Enum):
    """The two kinds of work: a training job (run by a BatchTier, handled as a Job) or a service
    (run by a ServeTier, handled as a Service). The values are the registry's ``kind`` column and
    the REST ``kind`` field; a ``str`` so ``kind == "job"`` and JSON keep working."""

    JOB = "job"
    SERVICE = "service"

    def __str__(self) -> str:  # "job", not "WorkKind.JOB", in f-strings and printed tables
        return str(self.value)


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
class RankUsage:
    """What one rank's processes used at one moment, as its rank shim sampled it (batch/usage.py).

    ``cpu_pct`` is the CPU of the rank's process tree since the shim's previous sample (100 = one
    core); ``cpu_s`` its CPU seconds so far; ``rss_kib`` the tree's resident memory. The GPU
    fields are None on a node without ``nvidia-smi`` (or when the rank's processes hold no GPU):
    ``gpu_util`` is the mean utilisation of the GPUs its processes use (None where the GPU cannot
    say, e.g. a MIG instance), ``gpu_mem_mib`` the GPU memory its processes hold.
    """

    at: float
    cpu_s: float
    cpu_pct: float
    rss_kib: int
    gpu_util: float | None = None
    gpu_mem_mib: float | None = None
    gpus: tuple[str, ...] = ()  # the GPUs (index on the node) its processes use
    pids: tuple[int, ...] = ()


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
    attempt: int = 0  # SLURM_RESTART_COUNT of the run this state belongs to (requeue)
    usage: RankUsage | None = None  # the shim's latest sample of the rank's resource use


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
    checkpoint: str | None = None  # the newest entry of the job's checkpoint dir (same round trip)
    # A NODE_FAIL job's nodes that the scheduler gave up, each with why ("down: Not responding").
    failed_nodes: tuple[tuple[str, str], ...] = ()


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
    checkpoint: str | None = None  # newest file or dir in $JT_CHECKPOINT_DIR (full path)
    restarts: int = 0  # times the job was requeued (preempted, node failure, scontrol requeue)
    straggler: str | None = None  # "rank 3 (node2) 38 % slower than the median for 2 min"
    stalled: str | None = None  # "no progress on any rank for 7 min: Stacks?" (batch/hang.py)

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
    signal: str | None = None  # "USR1@120": sent that long before the time limit (signals.py)
    launcher: str = "srun"
    nproc_per_node: int | None = None
    python: str = "python3"
    shell: bool = False
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # values may be secrets
    setup: tuple[str, ...] = ()
    sbatch_options: tuple[str, ...] = ()
    rdzv_port: int | None = None
    checkpoint_dir: str | None = None  # JT_CHECKPOINT_DIR; None: {workdir}/{name}/{job_id}/checkpoints
    checkpoint_to: str | None = None  # store | s3://BUCKET/PREFIX (checkpoint_upload.py)
    metrics: tuple[tuple[str, str], ...] = ()  # custom metric patterns (KEY, REGEX): metrics.py
    array: str | None = None  # Slurm array syntax, e.g. "0-15%4" (arrays.py)
    sweep: str | None = None  # a parameter grid, e.g. "lr=1e-4,3e-4 bs=32,64" (arrays.py)
    sync: tuple[str, ...] = ()  # --sync: paths of the notebook's directory the ranks get (sync.py)
    metadata: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def ranks_per_node(self) -> int:
        if self.launcher == "torchrun":
            return self.nproc_per_node or self.ntasks_per_node
        return self.ntasks_per_node

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node


# --- serving ---------------------------------------------------------------------------------

SERVE_STRATEGIES = ("rolling", "bluegreen")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")


@dataclass(frozen=True)
class ServeSpec:
    """A long-running service: what to run, how many replicas, and how to reach it.

    ``body`` is the cell body. With ``shell=False`` it is a Python program run by ``python`` in
    every replica; with ``shell=True`` it is a shell command line (``vllm serve ... --port 8000``).
    ``env`` values reach the pods through a Secret the tier manages, never inline in a manifest;
    ``secret_env`` maps names to existing ``secret/key`` references. ``autoscale`` is
    ``(min, max, cpu_percent)``; ``patch`` is merged over the generated objects, keyed by kind.
    """

    body: str
    name: str = "notebook-svc"
    image: str | None = None
    replicas: int = 1
    gpus: int = 0
    cpu: str | None = None
    memory: str | None = None
    # /dev/shm of each pod (a memory-backed emptyDir): None the tier's default, "0" none
    shm_size: str | None = None
    port: int = 8000
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # values may be secrets
    secret_env: tuple[tuple[str, str], ...] = ()
    readiness: str | None = None  # HTTP path of the readiness probe; None: TCP on the port
    autoscale: tuple[int, int, int] | None = None
    strategy: str = "rolling"
    canary: int | None = None  # percent of the replicas that run this cell beside the live revision
    shell: bool = False
    python: str = "python3"
    image_pull_policy: str | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[tuple[tuple[str, str], ...], ...] = ()  # each toleration as sorted pairs
    patch: str | None = None  # JSON text of {Kind: partial object}, merged over the generated ones
    model_path: str | None = None  # the served checkpoint as the server sees it (JT_MODEL_PATH)
    model_source: str | None = None  # the job it came from: "profile/job_id (name)"
    model_uri: str | None = None  # s3:// object or prefix an init container copies to /models (k8s/fetch.py)
    sync: tuple[str, ...] = ()  # --sync: paths of the notebook's directory the pods get (sync.py)
    ingress: tuple[str, ...] = ()  # --ingress HOST[/PATH]: rules of an Ingress (Kubernetes only)
    tls_secret: str | None = None  # --tls-secret: the Ingress's TLS Secret for those hosts
    service_type: str | None = None  # --service-type; None: the profile's service_type
    metadata: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # e.g. notebook path


class ServiceState(str, enum.Enum):
    """Where a service stands. Unlike a job's, no state is final except DELETED: a failed
    rollout can be fixed by the next apply."""

    DEPLOYING = "DEPLOYING"  # a rollout is in progress
    READY = "READY"  # every desired replica is updated and available
    DEGRADED = "DEGRADED"  # rolled out, but fewer replicas available than desired
    FAILED = "FAILED"  # the rollout cannot progress (crash loop, image, unschedulable, deadline)
    SCALED_DOWN = "SCALED_DOWN"  # zero replicas desired
    DELETED = "DELETED"
    UNKNOWN = "UNKNOWN"

    @property
    def terminal(self) -> bool:
        return self is ServiceState.DELETED

    @property
    def settled(self) -> bool:
        """True when waiting for readiness can stop (ready, failed or gone)."""
        return self in (ServiceState.READY, ServiceState.FAILED, ServiceState.DELETED,
                        ServiceState.SCALED_DOWN)


@dataclass(frozen=True)
class PodInfo:
    """One replica as the cluster reports it."""

    name: str
    phase: str = "Pending"  # Pending | Running | Succeeded | Failed | Unknown | Terminating
    ready: bool = False
    restarts: int = 0
    node: str | None = None
    started_at: float | None = None  # epoch seconds (creation time of the pod)
    reason: str | None = None  # why not ready: ErrImagePull, Unschedulable, CrashLoopBackOff, ...
    message: str | None = None  # the scheduler's or kubelet's words
    exit_code: int | None = None  # of the last terminated container
    revision: str | None = None  # the pod-template hash: which rollout this pod belongs to
    track: str = ""  # while a canary runs: "stable" or "canary" (TRACKS); "" otherwise


@dataclass(frozen=True)
class EventInfo:
    """A Kubernetes Event about the service or one of its pods."""

    type: str  # Normal | Warning
    reason: str
    message: str
    object: str  # "Pod/llama-svc-7c9f-x2"
    count: int = 1
    at: float | None = None


#: The revisions a request, Try it or a load test can go to while a canary runs (``track=``):
#: the stable one's pods, the canary's, or (None, "both") any ready pod of either.
TRACKS = ("stable", "canary")


@dataclass(frozen=True)
class CanaryStatus:
    """The canary revision of a service (``--canary PERCENT``), beside the stable one."""

    percent: int
    desired: int = 0
    ready: int = 0
    restarts: int = 0
    state: ServiceState = ServiceState.DEPLOYING
    reason: str | None = None
    pods: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServiceStatus:
    """Everything known about a service at one moment. ``canary`` is set while a canary
    revision runs beside the stable one; the counts then describe the stable one, and ``pods``
    holds both revisions' pods, each marked with its ``track``."""

    name: str
    state: ServiceState
    desired: int = 0
    updated: int = 0
    ready: int = 0
    available: int = 0
    revision: str | None = None
    endpoint: str | None = None
    created_at: float | None = None
    pods: tuple[PodInfo, ...] = ()
    events: tuple[EventInfo, ...] = ()  # recent Warning events, newest last
    reason: str | None = None  # why FAILED / DEGRADED / DEPLOYING, one line
    api_reachable: bool = True
    message: str | None = None  # last problem seen while watching (API unreachable, 403, ...)
    canary: CanaryStatus | None = None


class PodLogLine(NamedTuple):
    """One line of a service's merged log: which pod wrote it, and the kubelet's timestamp
    (RFC 3339 with nanoseconds), which is how a reopened stream knows where it stopped.
    ``restart``: the container restart it came from (0 the first run; None unknown); a restart
    begins with a marker line ``— restart N —`` (requeue.restart_marker) of that pod."""

    text: str
    pod: str
    at: str = ""
    restart: int | None = None
