"""What a job used of what it asked for, like ``seff`` (pure, no I/O).

From the rank shims' samples (usage.py: each rank's CPU seconds so far and resident memory, each
heartbeat; a node's GPUs where ``nvidia-smi`` exists) and, on Slurm when accounting answers, the
job's accounting record (``sacct``: TotalCPU, AllocCPUS, ReqMem, MaxRSS, Elapsed)::

    CPU 38 % of 16 cores over 2 h 10 min; memory peak 2.1 of 16 GB per node

with GPU use only where it was sampled, and a short hint when the job asked for far more than it
used. The samples miss at most the last heartbeat's worth of CPU; accounting, where it answers,
gives the CPU time and the allocation as Slurm counted them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .endreason import parse_mem
from .usage import UsageSeries, usage_rows

#: Below this much elapsed time no hint is given (a short job's start-up dominates its use).
HINT_AFTER_S = 300.0
#: A hint when the job used less than this share of what it asked for.
HINT_BELOW = 0.25
_GB = 1 << 30


@dataclass(frozen=True)
class Accounting:
    """The job's accounting record, as far as Slurm gave it (None: not known)."""

    total_cpu_s: float | None = None
    alloc_cpus: int | None = None
    req_mem_bytes: int | None = None  # per node
    max_rss_bytes: int | None = None  # the largest task's
    elapsed_s: float | None = None


#: The shortest run whose summary line says what it used: a few seconds of samples say nothing
#: about how a job fits what it asked (seff is read for long jobs); job.efficiency() has them all.
SUMMARY_MIN_ELAPSED_S = 60.0


@dataclass(frozen=True)
class Efficiency:
    """What the job used of what it asked for (``line`` is what views show)."""

    elapsed_s: float
    cores: int | None  # allocated (accounting) or asked for (the spec)
    cpu_s: float | None
    nodes: int
    mem_peak_bytes: int | None  # the largest node's peak (its ranks' memory at one time)
    mem_asked_bytes: int | None  # per node (--mem)
    gpu_util: float | None = None  # mean utilisation of the GPUs the ranks held, where sampled
    gpu_mem_peak_mib: float | None = None  # the largest rank's GPU memory
    source: str = "samples"  # "samples" or "accounting": where the CPU time came from

    @property
    def cpu_pct(self) -> float | None:
        """CPU time used as a share of the cores' time over the elapsed time (100 = all of it)."""
        if self.cpu_s is None or not self.cores or self.elapsed_s <= 0:
            return None
        return 100.0 * self.cpu_s / (self.cores * self.elapsed_s)

    @property
    def line(self) -> str:
        return efficiency_line(self)

    @property
    def for_summary(self) -> str | None:
        """What a summary line ends with: ``str(self)`` for a run of at least
        :data:`SUMMARY_MIN_ELAPSED_S`, else None."""
        return str(self) if self.elapsed_s >= SUMMARY_MIN_ELAPSED_S else None

    @property
    def hint(self) -> str | None:
        return efficiency_hint(self)

    def __str__(self) -> str:
        hint = self.hint
        return self.line + (f" — {hint}" if hint else "")


def cores_asked(spec: Mapping[str, Any]) -> int | None:
    """The cores a job's spec (a record's stored spec) asked Slurm for: nodes x tasks per node
    (1 under torchrun) x cpus per task (1 unless given)."""
    try:
        nodes = int(spec.get("nodes") or 1)
        tasks = 1 if spec.get("launcher") == "torchrun" else int(spec.get("ntasks_per_node") or 1)
        cpus = int(spec.get("cpus_per_task") or 1)
    except (TypeError, ValueError):
        return None
    return nodes * tasks * cpus if nodes > 0 and tasks > 0 and cpus > 0 else None


def mem_asked(spec: Mapping[str, Any]) -> int | None:
    """``--mem`` of a job's spec in bytes (per node), None when not given."""
    return parse_mem(spec.get("mem")) if spec.get("mem") is not None else None


def compute_efficiency(series: UsageSeries, *, elapsed_s: float | None, nodes: int,
                       cores: int | None, mem_asked_bytes: int | None,
                       accounting: Accounting | None = None) -> Efficiency | None:
    """The job's :class:`Efficiency` from its samples (and its accounting record, which wins for
    the CPU time, the allocation, the memory asked and the elapsed time where it has them).
    None when there is nothing to say (no sample and no accounting, or no elapsed time)."""
    acct = accounting or Accounting()
    samples = [(r, u) for r, us in series.ranks.items() for u in us]
    if not samples and acct.total_cpu_s is None:
        return None
    elapsed = acct.elapsed_s if acct.elapsed_s else elapsed_s
    if not elapsed and samples:
        times = [u.at for _, u in samples]
        elapsed = max(times) - min(times)
    if not elapsed or elapsed <= 0 or not math.isfinite(elapsed):
        return None
    cpu_s: float | None = None
    source = "samples"
    if acct.total_cpu_s is not None:
        cpu_s, source = acct.total_cpu_s, "accounting"
    elif samples:
        cpu_s = sum(max(u.cpu_s for u in us) for us in series.ranks.values() if us)
    peak = _node_peak(series)
    if peak is None and acct.max_rss_bytes is not None:
        peak = acct.max_rss_bytes
    gpu_util, gpu_mem = _gpu(series)
    return Efficiency(elapsed_s=float(elapsed), cores=acct.alloc_cpus or cores, cpu_s=cpu_s,
                      nodes=max(1, nodes), mem_peak_bytes=peak,
                      mem_asked_bytes=acct.req_mem_bytes or mem_asked_bytes,
                      gpu_util=gpu_util, gpu_mem_peak_mib=gpu_mem, source=source)


def _node_peak(series: UsageSeries) -> int | None:
    """The largest node's memory peak: per node, the sum of its ranks' latest samples after each
    sample, at its highest."""
    events: dict[str, list[tuple[float, int, int]]] = {}
    for rank, samples in series.ranks.items():
        node = series.nodes.get(rank, "?")
        for u in samples:
            events.setdefault(node, []).append((u.at, rank, u.rss_kib))
    best: int | None = None
    for node_events in events.values():
        latest: dict[int, int] = {}
        total = 0
        for _, rank, rss in sorted(node_events):
            total += rss - latest.get(rank, 0)
            latest[rank] = rss
            best = total * 1024 if best is None or total * 1024 > best else best
    return best


def _gpu(series: UsageSeries) -> tuple[float | None, float | None]:
    if not series.gpus:
        return None, None
    rows = usage_rows(series)
    utils = [r["gpu_util"] for r in rows if r["gpu_util"] is not None]
    mems = [r["gpu_mem_mib"] for r in rows if r["gpu_mem_mib"] is not None]
    return (sum(utils) / len(utils) if utils else None), (max(mems) if mems else None)


def duration_words(seconds: float) -> str:
    """``7800`` -> ``2 h 10 min``; ``95`` -> ``1 min 35 s``; ``42`` -> ``42 s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60} min"
    if s >= 60:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 and s < 600 else "")
    return f"{s} s"


def _gb(value: float) -> str:
    gb = value / _GB
    text = f"{gb:.1f}" if gb < 100 else f"{gb:.0f}"
    return text.removesuffix(".0")


def efficiency_line(e: Efficiency) -> str:
    """``CPU 38 % of 16 cores over 2 h 10 min; memory peak 2.1 of 16 GB per node`` (GPU use
    where it was sampled)."""
    parts: list[str] = []
    pct = e.cpu_pct
    over = f"over {duration_words(e.elapsed_s)}"
    if pct is not None and e.cores:
        parts.append(f"CPU {pct:.0f} % of {e.cores} core{'s' if e.cores != 1 else ''} {over}")
    elif e.cpu_s is not None:
        parts.append(f"CPU {duration_words(e.cpu_s)} of CPU time {over}")
    if e.mem_peak_bytes is not None:
        per = " per node" if e.nodes > 1 or e.mem_asked_bytes is not None else ""
        if e.mem_asked_bytes:
            parts.append(f"memory peak {_gb(e.mem_peak_bytes)} of {_gb(e.mem_asked_bytes)} GB{per}")
        else:
            parts.append(f"memory peak {_gb(e.mem_peak_bytes)} GB{per}")
    if e.gpu_util is not None or e.gpu_mem_peak_mib is not None:
        gpu = "GPU"
        if e.gpu_util is not None:
            gpu += f" {e.gpu_util:.0f} % busy"
        if e.gpu_mem_peak_mib is not None:
            peak = _gb(e.gpu_mem_peak_mib * (1 << 20))
            gpu += ("," if e.gpu_util is not None else "") + f" memory peak {peak} GB"
        parts.append(gpu)
    return "; ".join(parts)


def efficiency_hint(e: Efficiency) -> str | None:
    """A short hint when the job asked for far more than it used (never for a job shorter than
    HINT_AFTER_S, whose start-up dominates)."""
    if e.elapsed_s < HINT_AFTER_S:
        return None
    said: list[str] = []
    pct = e.cpu_pct
    if pct is not None and e.cores and e.cores >= 4 and pct < HINT_BELOW * 100:
        used = max(1, math.ceil((e.cpu_s or 0) / e.elapsed_s))
        said.append(f"about {used} of {e.cores} cores would do")
    asked, peak = e.mem_asked_bytes, e.mem_peak_bytes
    if asked and asked >= 2 * _GB and peak is not None and peak < HINT_BELOW * asked:
        room = max(1, math.ceil(peak * 1.5 / _GB))
        said.append(f"--mem={room}G would leave room")
    if not said:
        return None
    return "asked for far more than it used: " + "; ".join(said)


# --- sacct --------------------------------------------------------------------------------------

#: sacct's fields for :func:`parse_accounting` (``-P``, the job's allocation row and its steps).
ACCOUNTING_FIELDS = "JobIDRaw,TotalCPU,AllocCPUS,ReqMem,MaxRSS,ElapsedRaw"
_TIME_RE = re.compile(r"(?:(\d{1,5})-)?(?:(\d{1,2}):)?(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?")
_MEM_RE = re.compile(r"(\d{1,15}(?:\.\d{1,6})?)([KMGTP]?)([cn]?)", re.IGNORECASE)
_UNITS = {"": 1 << 20, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def parse_cpu_time(text: str) -> float | None:
    """sacct's TotalCPU (``[D-][HH:]MM:SS[.mmm]``) -> seconds."""
    m = _TIME_RE.fullmatch(text.strip())
    if not m:
        return None
    days, hours, minutes, secs, frac = m.groups()
    value = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + int(secs)
    return value + (float("0." + frac) if frac else 0.0)


def parse_sacct_mem(text: str, cpus_per_node: float | None = None) -> int | None:
    """sacct's ReqMem/MaxRSS (``16G``, ``4000M``, ``2048K``, older ``4000Mc``/``16Gn``; a bare
    number is MB for ReqMem) -> bytes; a per-CPU ``c`` value needs ``cpus_per_node``."""
    m = _MEM_RE.fullmatch(text.strip())
    if not m:
        return None
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if m.group(3).lower() == "c":
        if not cpus_per_node:
            return None
        value *= cpus_per_node
    return int(value)


def parse_accounting(text: str, job_id: str, nodes: int = 1) -> Accounting | None:
    """``sacct -P -o ACCOUNTING_FIELDS`` of one job -> its Accounting: TotalCPU, AllocCPUS, ReqMem
    and ElapsedRaw from the allocation's row, MaxRSS the largest of its steps'. None without the
    allocation's row. Arbitrary text never raises."""
    main: list[str] | None = None
    rss: list[int] = []
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) < 6:
            continue
        if cols[0] == job_id:
            main = cols
        raw = cols[4].strip()
        ours = cols[0] == job_id or cols[0].startswith(job_id + ".")
        if ours and raw[-1:].upper() in ("K", "M", "G", "T"):
            value = parse_sacct_mem(raw)
            if value is not None:
                rss.append(value)
    if main is None:
        return None
    alloc = int(main[2]) if main[2].isdigit() else None
    per_node = alloc / max(1, nodes) if alloc else None
    elapsed = float(main[5]) if main[5].isdigit() else None
    return Accounting(total_cpu_s=parse_cpu_time(main[1]), alloc_cpus=alloc or None,
                      req_mem_bytes=parse_sacct_mem(main[3], per_node) if main[3].strip() else None,
                      max_rss_bytes=max(rss) if rss else None, elapsed_s=elapsed or None)


def job_efficiency(spec: Mapping[str, Any], backend: str, world_size: int, elapsed_s: float | None,
                   series: UsageSeries, accounting: Accounting | None = None) -> Efficiency | None:
    """:func:`compute_efficiency` for a job's stored spec: Slurm's cores are what sbatch asked
    for (:func:`cores_asked`); a local job's, one per rank (times ``cpus_per_task``)."""
    if backend == "slurm":
        cores = cores_asked(spec)
    else:
        try:
            cores = max(1, world_size) * int(spec.get("cpus_per_task") or 1)
        except (TypeError, ValueError):
            cores = None
    try:
        nodes = int(spec.get("nodes") or 1)
    except (TypeError, ValueError):
        nodes = 1
    return compute_efficiency(series, elapsed_s=elapsed_s, nodes=nodes, cores=cores,
                              mem_asked_bytes=mem_asked(spec), accounting=accounting)
