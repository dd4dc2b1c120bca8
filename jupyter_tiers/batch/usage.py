"""Per-rank resource use: the rank shim's samples and the nodes' GPU queries (pure, no I/O).

Every heartbeat the rank shim (``jobdir.RANK_SHIM``) samples its program's process tree from /proc
and writes one line to ``ranks/<rank>.u`` (the latest sample, which the rank-state query reads
with the rank files) and appends it to ``usage/<rank>`` (the series ``job.usage()`` reads)::

    usage TS CPU_S CPU_PCT RSS_KIB PID,PID,...

(``CPU_S`` the tree's CPU seconds so far, ``CPU_PCT`` its CPU since the previous sample, 100 =
one core). Where ``nvidia-smi`` exists, one rank per node and beat refreshes the node's GPU
snapshot ``.gpu/<node>`` (the others reuse it: one query per node per beat, never one per
rank) and appends it to ``usage/gpu-<node>``::

    ts TS
    gpu INDEX, UUID, UTIL, MEM_USED_MIB, MEM_TOTAL_MIB, MIG_MODE     (--query-gpu, csv, nounits)
    app PID, GPU_UUID, USED_MEMORY_MIB                               (--query-compute-apps)

A rank's GPU use is the join of its pids with the snapshot's processes. On a node without
``nvidia-smi`` there is no snapshot and the GPU fields stay None: nothing else changes. Nothing
here asks the scheduler: the samples ride along with the rank-state query the watcher makes
anyway (``ranks/*``), and ``job.usage()`` reads ``usage/`` in one command.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.model import RankState, RankUsage

USAGE_SUFFIX = ".u"
USAGE_DIR = "usage"
GPU_DIR = ".gpu"
GPU_SERIES_PREFIX = "gpu-"
#: The nvidia-smi queries the shim runs (their fields in this order; csv,noheader,nounits).
GPU_QUERY = "index,uuid,utilization.gpu,memory.used,memory.total,mig.mode.current"
APPS_QUERY = "pid,gpu_uuid,used_memory"
#: job.usage() reads at most this many of each rank's latest samples (a day at one a beat of 10 s).
USAGE_MAX_SAMPLES = 8640
_MAX_PIDS = 4096  # a usage line names at most this many processes


@dataclass(frozen=True)
class Gpu:
    """One GPU of a node's snapshot (None: the GPU could not say, ``[N/A]``)."""

    index: str
    uuid: str
    util: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    mig: bool = False


@dataclass(frozen=True)
class GpuSnapshot:
    """One ``nvidia-smi`` query of a node: its GPUs and the processes holding them."""

    at: float
    gpus: tuple[Gpu, ...] = ()
    apps: tuple[tuple[int, str, float | None], ...] = ()  # (pid, gpu uuid, used memory MiB)


def _num(text: str) -> float | None:
    """A number of nvidia-smi's csv (``[N/A]``, ``[Not Supported]``, ``N/A``: None)."""
    try:
        value = float(text.strip().split()[0]) if text.strip() else None
    except (ValueError, IndexError):
        return None
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value


def parse_usage_words(words: Sequence[str]) -> RankUsage | None:
    """The words of one ``usage`` line -> RankUsage (None when the line is not one)."""
    if len(words) < 5 or words[0] != "usage":
        return None
    at, cpu_s, cpu_pct, rss = (_num(w) for w in words[1:5])
    if at is None or cpu_s is None or cpu_pct is None or rss is None:
        return None
    pids: list[int] = []
    if len(words) > 5:
        for p in words[5].split(",")[:_MAX_PIDS]:
            if p.isdigit():
                pids.append(int(p))
    return RankUsage(at=at, cpu_s=cpu_s, cpu_pct=cpu_pct, rss_kib=int(rss), pids=tuple(pids))


def parse_gpu_snapshots(text: str) -> list[GpuSnapshot]:
    """A node's GPU snapshot (``.gpu/<node>``) or series (``usage/gpu-<node>``) -> snapshots, in
    the order written. Lines that are not understood are skipped; a snapshot without its ``ts``
    line is dropped."""
    out: list[GpuSnapshot] = []
    at: float | None = None
    gpus: list[Gpu] = []
    apps: list[tuple[int, str, float | None]] = []

    def close() -> None:
        if at is not None:
            out.append(GpuSnapshot(at=at, gpus=tuple(gpus), apps=tuple(apps)))

    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "ts":
            close()
            at, gpus, apps = _num(rest), [], []
            continue
        cols = [c.strip() for c in rest.split(",")]
        if kind == "gpu" and len(cols) >= 5 and cols[1]:
            mig = len(cols) > 5 and cols[5].lower() == "enabled"
            gpus.append(Gpu(index=cols[0], uuid=cols[1], util=None if mig else _num(cols[2]),
                            mem_used_mib=_num(cols[3]), mem_total_mib=_num(cols[4]), mig=mig))
        elif kind == "app" and len(cols) >= 3 and cols[0].isdigit() and cols[1]:
            apps.append((int(cols[0]), cols[1], _num(cols[2])))
    close()
    return out


def gpu_use(snapshot: GpuSnapshot, pids: Iterable[int]) -> tuple[float | None, float | None, tuple[str, ...]]:
    """What the processes ``pids`` use of a node's GPUs: (mean utilisation of the GPUs they
    hold, GPU memory they hold in MiB, those GPUs' indexes). (None, None, ()) when they hold
    none. Several processes on one GPU add their memory; a GPU shared with another rank counts
    whole for each (nvidia-smi has no per-process utilisation in this query)."""
    mine = set(pids)
    by_uuid = {g.uuid: g for g in snapshot.gpus}
    held: dict[str, Gpu | None] = {}
    mem = 0.0
    any_mem = False
    for pid, uuid, used in snapshot.apps:
        if pid not in mine:
            continue
        held.setdefault(uuid, by_uuid.get(uuid))
        if used is not None:
            mem += used
            any_mem = True
    if not held:
        return None, None, ()
    utils = [g.util for g in held.values() if g is not None and g.util is not None]
    util = sum(utils) / len(utils) if utils else None
    names = tuple(sorted((g.index if g is not None else u) for u, g in held.items()))
    return util, (mem if any_mem else None), names


def with_gpu(usage: RankUsage, snapshot: GpuSnapshot | None) -> RankUsage:
    """``usage`` with its GPU fields from the node's snapshot (unchanged without one)."""
    if snapshot is None:
        return usage
    util, mem, names = gpu_use(snapshot, usage.pids)
    return replace(usage, gpu_util=util, gpu_mem_mib=mem, gpus=names)


def join_gpus(ranks: Mapping[int, RankState], gpu_texts: Mapping[str, str]) -> dict[int, RankState]:
    """The ranks with their usage's GPU fields from their node's latest snapshot (``gpu_texts``:
    node -> the text of its ``.gpu/<node>``); ranks on a node without one are unchanged."""
    latest = {node: snaps[-1] for node, text in gpu_texts.items() if (snaps := parse_gpu_snapshots(text))}
    out = dict(ranks)
    for rank, state in ranks.items():
        snap = latest.get(state.node or "")
        if state.usage is not None and snap is not None:
            out[rank] = replace(state, usage=with_gpu(state.usage, snap))
    return out


def nearest(snapshots: Sequence[GpuSnapshot], at: float, within: float = 60.0) -> GpuSnapshot | None:
    """The snapshot (sorted by time) nearest to ``at``, if one is ``within`` seconds of it."""
    times = [s.at for s in snapshots]
    i = bisect.bisect_left(times, at)
    best: GpuSnapshot | None = None
    for j in (i - 1, i):
        if 0 <= j < len(snapshots) and abs(snapshots[j].at - at) <= within and (
                best is None or abs(snapshots[j].at - at) < abs(best.at - at)):
            best = snapshots[j]
    return best


@dataclass
class UsageSeries:
    """A job's usage series as read back from ``usage/``: rank -> samples, node -> snapshots."""

    ranks: dict[int, list[RankUsage]] = field(default_factory=dict)
    nodes: dict[int, str] = field(default_factory=dict)  # rank -> node
    gpus: dict[str, list[GpuSnapshot]] = field(default_factory=dict)


def parse_usage_dump(text: str) -> UsageSeries:
    """The usage query's output -> UsageSeries. The query prints ``@@ NAME`` before each file of
    ``usage/`` (``R`` a rank's series, ``gpu-NODE`` a node's snapshots) and ``@node R NODE``
    lines (from the rank files' ``start`` lines). Arbitrary text never raises."""
    series = UsageSeries()
    name: str | None = None
    chunks: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("@@ "):
            name = line[3:].strip()
            chunks.setdefault(name, [])
            continue
        if line.startswith("@node "):
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit():
                series.nodes[int(parts[1])] = parts[2]
            continue
        if name is not None:
            chunks[name].append(line)
    for key, lines in chunks.items():
        if key.isdigit():
            samples = [u for u in (parse_usage_words(ln.split()) for ln in lines) if u is not None]
            series.ranks[int(key)] = sorted(samples, key=lambda u: u.at)
        elif key.startswith(GPU_SERIES_PREFIX) and len(key) > len(GPU_SERIES_PREFIX):
            snaps = parse_gpu_snapshots("\n".join(lines))
            series.gpus[key[len(GPU_SERIES_PREFIX):]] = sorted(snaps, key=lambda s: s.at)
    return series


USAGE_COLUMNS = ("time", "rank", "node", "cpu_pct", "cpu_s", "rss_mib", "gpu_util", "gpu_mem_mib")


def usage_rows(series: UsageSeries, within: float = 60.0) -> list[dict[str, Any]]:
    """One row per rank sample, in time order: the columns of USAGE_COLUMNS (GPU columns None
    on a node without GPU snapshots)."""
    rows: list[dict[str, Any]] = []
    for rank, samples in series.ranks.items():
        node = series.nodes.get(rank)
        snaps = series.gpus.get(node or "", [])
        for u in samples:
            g = with_gpu(u, nearest(snaps, u.at, within)) if snaps else u
            rows.append({"time": u.at, "rank": rank, "node": node, "cpu_pct": g.cpu_pct,
                         "cpu_s": g.cpu_s, "rss_mib": round(g.rss_kib / 1024, 1),
                         "gpu_util": g.gpu_util, "gpu_mem_mib": g.gpu_mem_mib})
    rows.sort(key=lambda r: (r["time"], r["rank"]))
    return rows


def to_usage_frame(rows: list[dict[str, Any]]) -> Any:
    """A pandas DataFrame of ``rows`` (``time`` as UTC datetimes) when pandas is installed,
    otherwise the rows themselves (as ``Job.metrics()`` does)."""
    frame = rows_frame(rows, USAGE_COLUMNS)
    if isinstance(frame, list):
        return frame
    import importlib

    pd: Any = importlib.import_module("pandas")
    frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
    return frame


def rows_frame(rows: list[dict[str, Any]], columns: Sequence[str]) -> Any:
    """A pandas DataFrame of ``rows`` with ``columns`` when pandas is installed, else the rows."""
    import importlib

    try:
        # Optional (not a dependency): imported by name so nothing requires it.
        pd: Any = importlib.import_module("pandas")
    except ImportError:
        return rows
    return pd.DataFrame(rows, columns=list(columns))


def usage_cell(usage: RankUsage | None) -> list[Any] | None:
    """The grid's compact form of a rank's latest sample: [cpu %, RSS MiB, GPU util %, GPU MiB]
    (None where unknown), or None without a sample."""
    if usage is None:
        return None
    return [round(usage.cpu_pct, 1), round(usage.rss_kib / 1024, 1),
            None if usage.gpu_util is None else round(usage.gpu_util, 1),
            None if usage.gpu_mem_mib is None else round(usage.gpu_mem_mib, 1)]


def node_totals(ranks: Iterable[RankState]) -> dict[str, dict[str, float | None]]:
    """Per node, the sum of its ranks' latest samples: ``cpu_pct``, ``rss_mib`` and, where any
    rank has them, ``gpu_mem_mib`` and the mean ``gpu_util`` of the node's GPUs in use (a GPU
    shared by two ranks counts once). Ranks without a sample or a node are left out."""
    out: dict[str, dict[str, float | None]] = {}
    gpu_utils: dict[str, dict[str, float]] = {}
    for r in ranks:
        u = r.usage
        if u is None or not r.node:
            continue
        t = out.setdefault(r.node, {"cpu_pct": 0.0, "rss_mib": 0.0, "gpu_util": None, "gpu_mem_mib": None})
        t["cpu_pct"] = round((t["cpu_pct"] or 0.0) + u.cpu_pct, 1)
        t["rss_mib"] = round((t["rss_mib"] or 0.0) + u.rss_kib / 1024, 1)
        if u.gpu_mem_mib is not None:
            t["gpu_mem_mib"] = round((t["gpu_mem_mib"] or 0.0) + u.gpu_mem_mib, 1)
        if u.gpu_util is not None:
            for g in u.gpus or ("?",):
                gpu_utils.setdefault(r.node, {})[g] = u.gpu_util
    for node, utils in gpu_utils.items():
        out[node]["gpu_util"] = round(sum(utils.values()) / len(utils), 1)
    return out
