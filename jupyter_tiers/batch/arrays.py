"""Job arrays and sweeps (pure: no I/O).

``--array 0-15%4`` is Slurm's array syntax: comma-separated items ``N``, ``N-M`` or ``N-M:STEP``,
then an optional ``%LIMIT`` (at most LIMIT tasks run at once). ``--sweep "lr=1e-4,3e-4 bs=32,64"``
is a cartesian grid: one task per combination (the first name varies slowest), tasks numbered
0..n-1; ``--array %4`` beside it only sets the limit. Task ``i`` gets its parameters as JSON in
``JT_PARAMS`` (``{"task": i}`` for a plain array) and, in a Python body, as a ``params`` dict.

An array is one registry record (``job_id`` the array's id, ``spec`` holding ``array`` and
``sweep``); its tasks are records derived from it (:func:`task_records`): ``job_id`` ``ID_i``
(Slurm's own name for a task) and ``jobdir`` ``JOBDIR/tasks/i``, a complete job directory each
(rank files, ``job.log``), so everything a job has (ranks, logs, cancel, metrics) works per task.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.detail import entries, with_entries
from ..core.errors import SpecError
from ..core.model import JobSpec, JobState, JobStatus, WorkKind
from ..core.record import JobRecord, RecordStore
from ..core.timefmt import format_elapsed
from .metrics import format_value
from .status import merge_status

MAX_TASKS = 10_000
MAX_INDEX = 4_000_000  # Slurm's MaxArraySize cannot exceed 4000001
TASKS_DIR = "tasks"
PARAMS_FILE = "params.json"
CELL_FILE = "cell.py"

_ITEM_RE = re.compile(r"(\d{1,7})(?:-(\d{1,7})(?::(\d{1,7}))?)?", re.ASCII)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_VALUE_RE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
_TASK_REF_RE = re.compile(r"(.*?)(\d{1,20})_(\d{1,7})", re.ASCII)

ARRAY_ALLOWED = ("use Slurm's array syntax: indices N, ranges N-M or N-M:STEP, comma-separated, "
                 f"then %LIMIT for at most LIMIT at once (e.g. 0-15%4, 1,3,5, 0-30:10); "
                 f"indices 0 to {MAX_INDEX}, at most {MAX_TASKS} tasks")
SWEEP_ALLOWED = ("write NAME=V1,V2 ... separated by spaces (e.g. \"lr=1e-4,3e-4 bs=32,64\"): names "
                 "are Python identifiers, values letters, digits and . _ + - (numbers become "
                 f"numbers); at most {MAX_TASKS} combinations")

# A Python body runs through this launcher: the cell (cell.py) runs in this module, as __main__
# (so what it defines pickles as from a script), with its task's parameters in ``params``.
PY_LAUNCHER = '''# jupyter-tiers array task: run the cell (cell.py) as __main__ with this task's `params`.
import json as _jt_json, os as _jt_os, sys as _jt_sys
__file__ = _jt_os.path.join(_jt_os.environ["JT_JOB_DIR"], "cell.py")
_jt_sys.argv[0] = __file__
params = _jt_json.loads(_jt_os.environ.get("JT_PARAMS") or "{}")
with open(__file__, encoding="utf-8") as _jt_file:
    _jt_code = compile(_jt_file.read(), __file__, "exec")
del _jt_file, _jt_json, _jt_os, _jt_sys
exec(_jt_code)
'''


@dataclass(frozen=True)
class ArrayPlan:
    """The tasks of an array: their indices, parameters and labels, and the concurrency limit."""

    indices: tuple[int, ...]
    params: tuple[dict[str, Any], ...]
    labels: tuple[str, ...]  # "lr=3e-4 bs=64" (as typed), or "task 3"
    limit: int | None = None
    sweep: bool = False

    @property
    def slurm_spec(self) -> str:
        """The ``#SBATCH --array=`` value."""
        return compress_indices(self.indices) + (f"%{self.limit}" if self.limit else "")

    def __len__(self) -> int:
        return len(self.indices)

    def label(self, index: int) -> str:
        return self.labels[self.indices.index(index)]

    def params_of(self, index: int) -> dict[str, Any]:
        return self.params[self.indices.index(index)]


def compress_indices(indices: Sequence[int]) -> str:
    """Sorted, distinct indices -> ``0-3,7,9-10`` (an array's --array, a group's ranks)."""
    parts: list[str] = []
    start = prev = None
    for i in indices:
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def _bad(field: str, value: Any, allowed: str) -> SpecError:
    shown = repr(value[:60]) + ("..." if len(value) > 60 else "") if isinstance(value, str) \
        else type(value).__name__
    return SpecError(field, f"{shown} is not allowed; {allowed}")


def parse_array(text: Any) -> tuple[tuple[int, ...], int | None]:
    """``0-15%4`` -> (indices, limit). ``%4`` alone gives no indices (a sweep's limit)."""
    if not isinstance(text, str) or not text or len(text) > 4096:
        raise _bad("array", text, ARRAY_ALLOWED)
    body, pct, limit_text = text.partition("%")
    limit = None
    if pct:
        if not limit_text.isascii() or not limit_text.isdigit() or len(limit_text) > 7 \
                or int(limit_text) < 1:
            raise _bad("array", text, ARRAY_ALLOWED)
        limit = int(limit_text)
    if not body:
        if limit is None:
            raise _bad("array", text, ARRAY_ALLOWED)
        return (), limit
    found: set[int] = set()
    for item in body.split(","):
        m = _ITEM_RE.fullmatch(item)
        if not m:
            raise _bad("array", text, ARRAY_ALLOWED)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) is not None else 1
        if hi > MAX_INDEX or lo > hi or step < 1:
            raise SpecError("array", f"{item!r}: a range goes from low to high with a step of 1 or "
                            f"more, indices 0 to {MAX_INDEX}")
        if (hi - lo) // step + 1 + len(found) > MAX_TASKS * 2:
            raise SpecError("array", f"{text[:60]!r} has more than {MAX_TASKS} tasks")
        found.update(range(lo, hi + 1, step))
    if len(found) > MAX_TASKS:
        raise SpecError("array", f"{text[:60]!r} has {len(found)} tasks; at most {MAX_TASKS}")
    return tuple(sorted(found)), limit


def _value(token: str) -> Any:
    """A sweep value: an int or a finite float when it reads as one, else the text."""
    try:
        return int(token)
    except ValueError:
        pass
    try:
        number = float(token)
    except ValueError:
        return token
    return number if math.isfinite(number) else token


def parse_sweep(text: Any) -> tuple[tuple[str, ...], tuple[dict[str, Any], ...], tuple[str, ...]]:
    """``"lr=1e-4,3e-4 bs=32,64"`` -> (names, params per task, labels), the first name slowest."""
    if not isinstance(text, str) or not text.strip() or len(text) > 8192:
        raise _bad("sweep", text, SWEEP_ALLOWED)
    names: list[str] = []
    columns: list[list[tuple[str, Any]]] = []
    for word in text.split():
        name, eq, values = word.partition("=")
        if not eq or not _NAME_RE.fullmatch(name) or not values:
            raise _bad("sweep", word, SWEEP_ALLOWED)
        if name in names:
            raise SpecError("sweep", f"{name} is given twice; give each name once with all its values")
        if name == "task":
            raise SpecError("sweep", "'task' is the task's own number; use another name")
        tokens = values.split(",")
        if any(not _VALUE_RE.fullmatch(t) for t in tokens):
            raise _bad("sweep", word, SWEEP_ALLOWED)
        if len(set(tokens)) != len(tokens):
            raise SpecError("sweep", f"{name} lists a value twice")
        names.append(name)
        columns.append([(t, _value(t)) for t in tokens])
    total = math.prod(len(c) for c in columns)
    if total > MAX_TASKS:
        raise SpecError("sweep", f"{total} combinations; at most {MAX_TASKS}")
    params, labels = [], []
    for combo in itertools.product(*columns):
        params.append({n: v for n, (_, v) in zip(names, combo, strict=True)})
        labels.append(" ".join(f"{n}={t}" for n, (t, _) in zip(names, combo, strict=True)))
    return tuple(names), tuple(params), tuple(labels)


def plan_array(array: str | None, sweep: str | None) -> ArrayPlan | None:
    """The tasks of ``--array``/``--sweep`` (None when neither is given); SpecError when bad."""
    if array is None and sweep is None:
        return None
    indices: tuple[int, ...] = ()
    limit = None
    if array is not None:
        indices, limit = parse_array(array)
    if sweep is None:
        if not indices:
            raise SpecError("array", f"{array!r} sets only a limit; give indices (e.g. 0-15%4), "
                            "or use it beside --sweep")
        return ArrayPlan(indices, tuple({"task": i} for i in indices),
                         tuple(f"task {i}" for i in indices), limit)
    if indices:
        raise SpecError("array", "with --sweep the grid numbers the tasks; give only a limit "
                        "such as --array %4")
    _names, params, labels = parse_sweep(sweep)
    return ArrayPlan(tuple(range(len(params))), params, labels, limit, sweep=True)


def plan_of(spec: JobSpec | Mapping[str, Any]) -> ArrayPlan | None:
    """The plan of a JobSpec or of a record's stored spec dict (None: not an array)."""
    if isinstance(spec, Mapping):
        array, sweep = spec.get("array"), spec.get("sweep")
    else:
        array, sweep = spec.array, spec.sweep
    if array is None and sweep is None:
        return None
    return plan_array(array, sweep)


def is_array(record: JobRecord) -> bool:
    """Whether a registry record is a whole array (its derived task records are not)."""
    spec = getattr(record, "spec", None)
    return (isinstance(spec, Mapping) and getattr(record, "kind", WorkKind.JOB) == WorkKind.JOB
            and "_" not in str(getattr(record, "job_id", ""))
            and bool(spec.get("array") or spec.get("sweep")))


def task_dir(jobdir: str, index: int) -> str:
    return f"{jobdir}/{TASKS_DIR}/{index}"


def params_json(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=False)


def task_files(spec: JobSpec, files: Mapping[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """A task's code files from a job's: a Python body becomes ``cell.py`` run by PY_LAUNCHER."""
    out = dict(files)
    if not spec.shell and "main.py" in out:
        out[CELL_FILE] = out.pop("main.py")
        out["main.py"] = (PY_LAUNCHER, 0o600)
    return out


def task_records(record: JobRecord) -> list[JobRecord]:
    """The task records of an array record (derived, not stored): ``ID_i`` in ``tasks/i``."""
    plan = plan_of(record.spec)
    if plan is None:
        return []
    return [replace(record, job_id=f"{record.job_id}_{i}", jobdir=task_dir(record.jobdir, i),
                    detail=None) for i in plan.indices]


def split_task_ref(ref: str) -> tuple[str, int] | None:
    """``51_7`` (or ``hpc/51_7``) -> (``51`` / ``hpc/51``, 7); None when it is not one."""
    m = _TASK_REF_RE.fullmatch(ref)
    if not m:
        return None
    return m.group(1) + m.group(2), int(m.group(3))


def task_index(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[1])


def expand_arrays(records: Sequence[JobRecord]) -> list[JobRecord]:
    """``records`` with each whole array replaced by its task records (for one batched query)."""
    out: list[JobRecord] = []
    for rec in records:
        out.extend(task_records(rec) if is_array(rec) else [rec])
    return out


def merge_array_status(record: JobRecord, sched: Mapping[str, Any] | None, ranks: Mapping[str, Any] | None,
                       previous: Mapping[str, JobStatus]) -> tuple[JobStatus, dict[str, JobStatus]]:
    """An array record's status from its tasks' scheduler and rank views (status.merge_status
    per task, over each task's previous status), and the tasks' statuses."""
    tasks = {}
    for t in task_records(record):
        tasks[t.job_id] = merge_status(
            t.job_id, sched.get(t.job_id) if sched is not None else None,
            ranks.get(t.job_id) if ranks is not None else None, t.world_size, previous.get(t.job_id))
    return aggregate_status(record.job_id, {task_index(k): v for k, v in tasks.items()}), tasks


# --- the array's state --------------------------------------------------------------------------

_FAILED = frozenset({JobState.FAILED, JobState.TIMEOUT, JobState.NODE_FAIL, JobState.OUT_OF_MEMORY,
                     JobState.BOOT_FAIL, JobState.DEADLINE})
_ORDER = ("RUNNING", "PENDING", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")


def array_state(states: Sequence[JobState]) -> JobState:
    """One state for the whole array: running while any task may still run, then FAILED if any
    task failed, CANCELLED if any was cancelled (or preempted), else COMPLETED."""
    if not states:
        return JobState.UNKNOWN
    if not all(s.terminal for s in states):
        live = [s for s in states if not s.terminal]
        if any(s in (JobState.RUNNING, JobState.COMPLETING) for s in live) or any(
                s.terminal for s in states):
            return JobState.RUNNING
        return live[0]
    if any(s in _FAILED for s in states):
        return JobState.FAILED
    if any(s is not JobState.COMPLETED for s in states):
        return JobState.CANCELLED
    return JobState.COMPLETED


def state_counts(states: Sequence[JobState]) -> list[tuple[str, int]]:
    """(state, count) in a stable order: running, pending, completed, failed, ... then others."""
    counts: dict[str, int] = {}
    for s in states:
        counts[s.value] = counts.get(s.value, 0) + 1
    ordered = [(k, counts.pop(k)) for k in _ORDER if k in counts]
    return ordered + sorted(counts.items())


def counts_text(states: Sequence[JobState]) -> str:
    """``16 tasks: 14 COMPLETED, 1 FAILED, 1 CANCELLED``."""
    n = len(states)
    parts = ", ".join(f"{c} {s}" for s, c in state_counts(states))
    return f"{n} task{'s' if n != 1 else ''}: {parts}"


def counts_detail(states: Sequence[JobState]) -> str:
    """The array record's registry ``detail``: JSON with the counts line."""
    return json.dumps({"tasks": counts_text(states)})  # as counts_json(counts_text(states))


def with_counts(detail: str | None, counts: str) -> str:
    """An array record's ``detail`` with its counts line replaced, its other entries (the tasks'
    checkpoint uploads) kept."""
    return with_entries(detail, tasks=counts)


def record_counts(registry: RecordStore, key: str, state: str, counts: str) -> None:
    """Record an array's state and counts line, keeping the rest of its ``detail``."""
    registry.update(key, state=state)
    registry.change_detail(key, lambda detail: with_counts(detail, counts))


def counts_json(counts: str | None) -> str | None:
    """The registry ``detail`` of an array from its counts line (None: nothing to record)."""
    return json.dumps({"tasks": counts}) if counts else None


def detail_counts(detail: str | None) -> str | None:
    """The counts line of an array record's ``detail``, if recorded."""
    value = entries(detail).get("tasks")
    return value if isinstance(value, str) else None


def aggregate_status(array_id: str, tasks: Mapping[int, JobStatus]) -> JobStatus:
    """The array as one JobStatus: its state, the longest elapsed time, the counts as reason."""
    statuses = list(tasks.values())
    states = [s.state for s in statuses]
    elapsed = [s.elapsed_s for s in statuses if s.elapsed_s is not None]
    return JobStatus(job_id=array_id, state=array_state(states), reason=counts_text(states),
                     elapsed_s=max(elapsed) if elapsed else None)


def _lower_is_better(key: str) -> bool:
    return not any(word in key for word in ("acc", "tokens/s", "it/s", "f1", "auc"))


def best_task(metrics: Mapping[int, tuple[str, float]]) -> tuple[int, str, float] | None:
    """(task, key, value) of the best main-metric value among tasks reporting the most common
    main key: lowest for losses, highest for accuracies and rates."""
    finite = {i: m for i, m in metrics.items() if math.isfinite(m[1])}
    if not finite:
        return None
    keys = [k for k, _ in finite.values()]
    key = max(sorted(set(keys)), key=keys.count)
    cands = [(i, v) for i, (k, v) in finite.items() if k == key]
    pick = min if _lower_is_better(key) else max
    i, v = pick(cands, key=lambda c: (c[1], c[0]) if pick is min else (c[1], -c[0]))
    return i, key, v


def array_summary(array_id: str, plan: ArrayPlan, tasks: Mapping[int, JobStatus], *,
                  failures: Mapping[int, str] | None = None,
                  metrics: Mapping[int, tuple[str, float]] | None = None) -> str:
    """``array 51 (16 tasks) 14 COMPLETED, 1 FAILED (task 7: rank 0 exit 1 — ValueError: x),
    1 CANCELLED; best loss 0.0123 at lr=3e-4 bs=64``. ``failures``: task -> what went wrong
    (first failed rank and error line); ``metrics``: task -> main metric's last value."""
    failures = failures or {}
    n = len(plan)
    groups: dict[str, list[int]] = {}
    for i in plan.indices:
        st = tasks.get(i)
        groups.setdefault(st.state.value if st else "UNKNOWN", []).append(i)
    parts = []
    for state, _count in state_counts([JobState.parse(s) for s, ids in groups.items() for _ in ids]):
        ids = groups[state]
        text = f"{len(ids)} {state}"
        if state in {s.value for s in _FAILED}:
            first = ids[0]
            why = failures.get(first)
            text += f" (task {first}" + (f": {why}" if why else "") + ")"
        parts.append(text)
    line = f"array {array_id} ({n} task{'s' if n != 1 else ''}) " + ", ".join(parts)
    best = best_task(dict(metrics or {}))
    if best is not None:
        i, key, value = best
        where = plan.label(i) if plan.sweep else f"task {i}"
        line += f"; best {key} {format_value(value)} at {where}"
    return line


def format_tasks(plan: ArrayPlan, tasks: Mapping[int, JobStatus],
                 metrics: Mapping[int, tuple[str, float]] | None = None) -> str:
    """A fixed-width table, one row per task: TASK, PARAMS, STATE, ELAPSED, EXIT, METRIC."""
    metrics = metrics or {}
    rows = [("TASK", "PARAMS", "STATE", "ELAPSED", "EXIT", "METRIC")]
    for i, label in zip(plan.indices, plan.labels, strict=True):
        st = tasks.get(i)
        exit_text = "-"
        if st is not None and (st.state is JobState.COMPLETED or st.state in _FAILED):
            first = st.first_failure
            if first is not None:
                exit_text = f"rank {first.rank}: {first.exit_code if first.exit_code is not None else 'sig'}"
            elif st.exit_code is not None:
                exit_text = str(st.exit_code)
        m = metrics.get(i)
        rows.append((str(i), label if plan.sweep else "-", st.state.value if st else "UNKNOWN",
                     format_elapsed(st.elapsed_s) if st and st.elapsed_s is not None else "-",
                     exit_text, f"{m[0]} {format_value(m[1])}" if m else "-"))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)
