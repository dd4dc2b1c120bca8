"""``--model-from`` for a sweep: one task (``51_7``, ``NAME_7``, a task handle) or a whole array
(its best task). The I/O around handoff.py's pure task resolution: the tasks' states (one batched
status query), their checkpoint directories and, for a whole array, the ends of their logs (one
more round trip on Slurm, whatever the number of tasks; read in place on the local tier).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..batch.arrays import is_array, plan_of
from ..core.errors import JobNotFound, TiersError, Unsupported
from ..core.model import WorkKind
from ..data import handoff
from ..data.handoff import Checkpoint, HandoffError
from ..engine.array_job import TAIL_LINES, ArrayJob

if TYPE_CHECKING:
    from ..config.registry import JobRecord, Registry
    from ..engine.tier import BatchTier


@dataclass(frozen=True)
class Resolved:
    """What ``--model-from`` resolved to: the checkpoint, and for an array's task the line the
    serving cell prints first (which task, and why)."""

    checkpoint: Checkpoint
    line: str | None = None


def find_array_task(ref: str, registry: Registry, user_ns: Mapping[str, Any] | None = None
                    ) -> tuple[JobRecord, int | None] | None:
    """(array record, task index or None for the whole array) when ``ref`` names an array or one
    of its tasks: a notebook variable holding an ArrayJob or a task's Job (``job.task(7)``),
    ``51_7`` / ``hpc/51_7`` / ``NAME_7``, or an array's id or name. None: not an array."""
    value = (user_ns or {}).get(ref) if ref.isidentifier() else None
    record = getattr(value, "record", None)
    if record is not None and getattr(record, "kind", None) == WorkKind.JOB:
        if "_" in record.job_id:  # a task handle: its array is the stored record
            base, _, index = record.job_id.rpartition("_")
            array = _stored(registry, f"{record.profile}/{base}")
            if array is not None and is_array(array) and index.isdigit():
                return array, int(index)
            return None
        return (_latest(registry, record), None) if is_array(record) else None
    task = handoff.split_task_ref(ref)
    if task is not None:
        base, index = task
        array = _stored(registry, base) if base.isdigit() or "/" in base else None
        if array is None:
            array = registry.find_named(base, kind=WorkKind.JOB)
        if array is not None and is_array(array):
            return array, index
    try:
        record = handoff.find_job(ref, registry, user_ns)
    except HandoffError:
        return None
    return (record, None) if is_array(record) else None


def _stored(registry: Registry, ref: str) -> JobRecord | None:
    try:
        return registry.get(ref)
    except JobNotFound:
        return None


def _latest(registry: Registry, record: JobRecord) -> JobRecord:
    stored = _stored(registry, record.key)
    return stored if stored is not None else record


def resolve(ref: str, registry: Registry, user_ns: Mapping[str, Any] | None,
            connect: Callable[[str], BatchTier],
            refresh: Callable[[JobRecord], None] | None = None) -> Resolved:
    """``ref`` -> the checkpoint to serve. An array's task or a whole array asks its training
    tier (``connect(profile)``) once for every task's state and checkpoint; anything else is a
    job, resolved by handoff.resolve (``refresh`` as there)."""
    found = find_array_task(ref, registry, user_ns)
    if found is None:
        return Resolved(handoff.resolve(ref, registry, user_ns, refresh=refresh))
    array, index = found
    tier = connect(array.profile)
    job = tier.job(array)
    assert isinstance(job, ArrayJob)  # find_array_task found an array record
    try:
        statuses = job.task_statuses()
    except TiersError as exc:
        raise HandoffError(f"--model-from {ref}: cannot ask {array.profile!r} about array "
                           f"{array.job_id}'s tasks: {_one_line(exc)}") from None
    states = {i: s.state.value for i, s in statuses.items()}
    if index is not None:
        listed, _ = _task_checkpoints(tier, array, ref, 0)
        ckpt = handoff.task_checkpoint(array, index, states.get(index), listed.get(index))
        return Resolved(ckpt, f"model from array {array.job_id} task {index}{_label(array, index)}")

    listed, tails = _task_checkpoints(tier, array, ref, TAIL_LINES)
    _failures, metrics = job.task_results(statuses, tails=tails)
    best = handoff.pick_best_task(array, states, listed, metrics)
    return Resolved(best.checkpoint, best.line)


def _task_checkpoints(tier: BatchTier, array: JobRecord, ref: str, tail_lines: int
                      ) -> tuple[dict[int, tuple[str, str | None]], dict[int, str] | None]:
    try:
        listed, tails = tier.task_checkpoints(array, tail_lines)
    except Unsupported as exc:
        raise HandoffError(f"--model-from {ref}: {exc}") from None
    except TiersError as exc:
        raise HandoffError(f"--model-from {ref}: cannot list array {array.job_id}'s checkpoints: "
                           f"{_one_line(exc)}") from None
    return listed, tails


def _label(array: JobRecord, index: int) -> str:
    plan = plan_of(array.spec)
    if plan is None or not plan.sweep or index not in plan.indices:
        return ""
    return f" ({plan.label(index)})"


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]

