"""Per-rank resource use (batch/usage.py): the shim's usage lines, nvidia-smi snapshots of
several GPU shapes (tests/unit/data/nvidia_smi), the join by pid, the rank-state query's new
lines (jobdir.parse_rank_files), job.usage()'s rows and the views' cells; seeded fuzz of every
parser."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from jupyter_tiers.app.viewstate.job import node_usage, rank_cells, status_traits
from jupyter_tiers.batch.jobdir import RANK_SHIM, parse_rank_file, parse_rank_files
from jupyter_tiers.batch.usage import (
    APPS_QUERY,
    GPU_QUERY,
    USAGE_COLUMNS,
    GpuSnapshot,
    gpu_use,
    join_gpus,
    nearest,
    node_totals,
    parse_gpu_snapshots,
    parse_usage_dump,
    parse_usage_words,
    to_usage_frame,
    usage_cell,
    usage_rows,
    with_gpu,
)
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState, RankUsage

DATA = Path(__file__).parent / "data" / "nvidia_smi"


def snapshot_text(shape: str, ts: float = 1000.0) -> str:
    """What the shim writes to .gpu/<node> for one recorded shape."""
    gpu = (DATA / shape / "query-gpu.csv").read_text().splitlines()
    apps = (DATA / shape / "query-compute-apps.csv").read_text().splitlines()
    return "".join([f"ts {ts}\n", *(f"gpu {ln}\n" for ln in gpu), *(f"app {ln}\n" for ln in apps)])


# --- usage lines ------------------------------------------------------------------------------


def test_usage_line() -> None:
    u = parse_usage_words(["usage", "1700000000.25", "12.50", "97.3", "524288", "41873,41900,41901"])
    assert u == RankUsage(at=1700000000.25, cpu_s=12.5, cpu_pct=97.3, rss_kib=524288,
                          pids=(41873, 41900, 41901))


@pytest.mark.parametrize("line", [
    "", "usage", "usage 1 2 3", "start 1 node1 0", "usage x 1 2 3 4", "usage 1 nan 2 3 4",
    "usage 1 2 inf 3 4", "usage 1 2 -3 4 5",
])
def test_not_a_usage_line(line: str) -> None:
    assert parse_usage_words(line.split()) is None


def test_usage_line_without_pids_and_with_junk_pids() -> None:
    assert parse_usage_words(["usage", "5", "1", "2", "3"]).pids == ()
    assert parse_usage_words(["usage", "5", "1", "2", "3", "12,x,,-4,7"]).pids == (12, 7)


# --- nvidia-smi snapshots ---------------------------------------------------------------------


def test_queries_the_shim_runs() -> None:
    assert f"--query-gpu={GPU_QUERY} --format=csv,noheader,nounits" in RANK_SHIM
    assert f"--query-compute-apps={APPS_QUERY} --format=csv,noheader,nounits" in RANK_SHIM
    assert "__GPU_QUERY__" not in RANK_SHIM


def test_a100_eight_gpus_one_process_each() -> None:
    (snap,) = parse_gpu_snapshots(snapshot_text("a100_8gpu"))
    assert snap.at == 1000.0
    assert [g.index for g in snap.gpus] == [str(i) for i in range(8)]
    assert snap.gpus[0].util == 97 and snap.gpus[0].mem_total_mib == 81920
    assert len(snap.apps) == 7
    # rank on GPU 3 (nearly idle: data-starved) and on GPU 0
    assert gpu_use(snap, [41876]) == (12.0, 61108.0, ("3",))
    assert gpu_use(snap, [41873, 99999]) == (97.0, 61222.0, ("0",))
    # GPU 7 has no process: nobody's
    assert gpu_use(snap, [1, 2, 3]) == (None, None, ())


def test_h100_several_processes_on_one_gpu() -> None:
    (snap,) = parse_gpu_snapshots(snapshot_text("h100_shared"))
    # a rank whose tree holds the main process and its helper on GPU 0: memory adds up
    util, mem, gpus = gpu_use(snap, [50211, 50230])
    assert (util, mem, gpus) == (88.0, 35150.0 + 512.0, ("0",))
    # the rank on both GPUs: the mean of their utilisation
    util, mem, gpus = gpu_use(snap, [50219, 50212])
    assert util == pytest.approx((88 + 91) / 2) and mem == 34600 + 40400 and gpus == ("0", "1")


def test_mig_gpu_has_no_utilisation_or_process_memory() -> None:
    (snap,) = parse_gpu_snapshots(snapshot_text("a100_mig"))
    assert snap.gpus[0].mig and snap.gpus[0].util is None
    assert not snap.gpus[1].mig and snap.gpus[1].util == 64
    # a rank on a MIG instance: it holds GPU 0, but neither figure is known
    assert gpu_use(snap, [7001]) == (None, None, ("0",))
    assert gpu_use(snap, [7003]) == (64.0, 20220.0, ("1",))


def test_idle_gpu_without_processes() -> None:
    (snap,) = parse_gpu_snapshots(snapshot_text("idle_no_apps"))
    assert snap.apps == () and snap.gpus[0].util == 0 and not snap.gpus[0].mig
    assert gpu_use(snap, [1]) == (None, None, ())


def test_series_of_snapshots_and_nearest() -> None:
    text = snapshot_text("h100_shared", 10) + snapshot_text("a100_8gpu", 20) + "gpu junk\n"
    snaps = parse_gpu_snapshots(text)
    assert [s.at for s in snaps] == [10, 20]
    assert nearest(snaps, 12).at == 10 and nearest(snaps, 16).at == 20
    assert nearest(snaps, 500, within=60) is None and nearest([], 1) is None


def test_lines_before_the_first_ts_are_dropped() -> None:
    """A series read with tail -n starts inside a snapshot: its cut head is not a snapshot."""
    text = "app 1, GPU-x, 5\n" + snapshot_text("h100_shared", 30)
    assert [s.at for s in parse_gpu_snapshots(text)] == [30]


def test_with_gpu_and_without() -> None:
    u = RankUsage(at=1, cpu_s=2, cpu_pct=100, rss_kib=1024, pids=(50212,))
    assert with_gpu(u, None) is u
    (snap,) = parse_gpu_snapshots(snapshot_text("h100_shared"))
    g = with_gpu(u, snap)
    assert (g.gpu_util, g.gpu_mem_mib, g.gpus) == (91.0, 40400.0, ("1",))


# --- the rank-state query's lines -------------------------------------------------------------


def test_rank_files_with_usage_and_gpu_snapshot() -> None:
    d = "/w/job"
    text = "\n".join([
        f"@@ {d}",
        f"{d}/ranks/0:start 100.0 gpu1 0",
        f"{d}/ranks/0.u:usage 160.0 55.0 98.5 2097152 50211,50230",
        f"{d}/ranks/1:start 100.5 gpu1 0",
        f"{d}/ranks/1.u:usage 160.2 12.0 20.0 1048576 50212",
        *(f"{d}/.gpu/gpu1:{ln}" for ln in snapshot_text("h100_shared", 159).splitlines()),
        "% 0 160.1", "% 1 160.3", "% 0.u 160.0",
    ]) + "\n"
    ranks = parse_rank_files(text)[d]
    assert ranks[0].phase is RankPhase.RUNNING and ranks[0].heartbeat_at == 160.1
    assert ranks[0].usage.rss_kib == 2097152 and ranks[0].usage.gpu_util == 88
    assert ranks[0].usage.gpu_mem_mib == 35150 + 512
    assert ranks[1].usage.gpu_util == 91 and ranks[1].usage.gpus == ("1",)


def test_rank_files_without_gpu_keep_cpu_only() -> None:
    d = "/w/job"
    text = f"@@ {d}\n{d}/ranks/3:start 1 node2 0\n{d}/ranks/3.u:usage 9 1.5 50.0 4096 77\n"
    u = parse_rank_files(text)[d][3].usage
    assert u is not None and u.cpu_pct == 50 and u.gpu_util is None and u.gpu_mem_mib is None


def test_usage_before_start_and_junk_usage() -> None:
    d = "/w/j"
    text = f"@@ {d}\n{d}/ranks/2.u:usage 9 1 2 3\n{d}/ranks/x.u:usage 9 1 2 3\n{d}/ranks/4.u:garbage\n"
    ranks = parse_rank_files(text)[d]
    assert set(ranks) == {2} and ranks[2].phase is RankPhase.WAITING and ranks[2].usage is not None


def test_parse_rank_file_with_usage_text() -> None:
    st = parse_rank_file(1, "start 5 n1 0\n", heartbeat_at=9, usage_text="usage 8 1 25 2048 4\n")
    assert st.usage is not None and st.usage.cpu_pct == 25 and st.node == "n1"
    assert parse_rank_file(1, "start 5 n1 0\n").usage is None


def test_join_gpus_only_on_nodes_with_a_snapshot() -> None:
    u = RankUsage(at=1, cpu_s=1, cpu_pct=1, rss_kib=1, pids=(50212,))
    ranks = {0: RankState(rank=0, node="gpu1", usage=u), 1: RankState(rank=1, node="cpu9", usage=u),
             2: RankState(rank=2)}
    out = join_gpus(ranks, {"gpu1": snapshot_text("h100_shared"), "gpuX": "junk"})
    assert out[0].usage.gpu_util == 91 and out[1].usage.gpu_util is None and out[2].usage is None


# --- the usage dump and job.usage()'s rows -----------------------------------------------------


def dump() -> str:
    return "".join([
        "@@ 0\n", "usage 100 1 50 1024 50211\n", "usage 110 6 50 2048 50211\n", "junk\n",
        "@@ 1\n", "usage 105 1 10 512 50212\n",
        "@@ gpu-gpu1\n", snapshot_text("h100_shared", 108),
        "@@ gpu-\n", "ts 1\n",
        "@@ notes\n", "hello\n",
        "@node 0 gpu1\n", "@node 1 gpu1\n", "@node x y\n",
    ])


def test_usage_dump_and_rows() -> None:
    series = parse_usage_dump(dump())
    assert sorted(series.ranks) == [0, 1] and series.nodes == {0: "gpu1", 1: "gpu1"}
    assert list(series.gpus) == ["gpu1"]
    rows = usage_rows(series)
    assert [(r["time"], r["rank"]) for r in rows] == [(100, 0), (105, 1), (110, 0)]
    assert all(set(r) == set(USAGE_COLUMNS) for r in rows)
    assert rows[0]["rss_mib"] == 1.0 and rows[0]["gpu_util"] == 88 and rows[1]["gpu_util"] == 91
    assert rows[2]["cpu_s"] == 6


def test_rows_without_gpus_and_far_snapshots() -> None:
    far = snapshot_text("h100_shared", 900)
    series = parse_usage_dump("@@ 0\nusage 100 1 50 1024 50211\n@@ gpu-n\n" + far + "@node 0 n\n")
    (row,) = usage_rows(series)
    assert row["gpu_util"] is None and row["node"] == "n"


def test_usage_frame_with_pandas_or_rows() -> None:
    rows = usage_rows(parse_usage_dump(dump()))
    frame = to_usage_frame(rows)
    try:
        import pandas as pd
    except ImportError:
        assert frame == rows
        return
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == list(USAGE_COLUMNS)
    assert str(frame["time"].dt.tz) == "UTC" and len(frame) == 3
    assert list(to_usage_frame([]).columns) == list(USAGE_COLUMNS)


# --- the views' cells and node totals ---------------------------------------------------------


def test_cells_and_node_totals() -> None:
    cpu = RankUsage(at=1, cpu_s=1, cpu_pct=97.26, rss_kib=2048 * 1024)
    gpu = RankUsage(at=1, cpu_s=1, cpu_pct=30, rss_kib=1024, gpu_util=80, gpu_mem_mib=1000, gpus=("0",))
    gpu2 = RankUsage(at=1, cpu_s=1, cpu_pct=10, rss_kib=1024, gpu_util=40, gpu_mem_mib=500, gpus=("1",))
    run = RankPhase.RUNNING
    ranks = (RankState(0, run, "n1", usage=cpu), RankState(1, run, "n2", usage=gpu),
             RankState(2, run, "n2", usage=gpu2), RankState(3))
    status = JobStatus(job_id="1", state=JobState.RUNNING, ranks=ranks, straggler="rank 2 (n2) ...")
    cells = rank_cells(status)
    assert cells[0] == ["r", "n1", None, None, [97.3, 2048.0, None, None]]
    assert cells[1][4] == [30, 1.0, 80, 1000] and cells[3][4] is None
    assert usage_cell(None) is None
    assert node_usage(status) == {"n1": [97.3, 2048.0, None, None], "n2": [40.0, 2.0, 60.0, 1500.0]}
    traits = status_traits(status)
    assert traits["straggler"] == "rank 2 (n2) ..." and traits["node_usage"]["n1"][0] == 97.3
    # a GPU shared by two ranks counts once in the node's utilisation
    shared = (RankState(0, node="n", usage=gpu), RankState(1, node="n", usage=gpu))
    assert node_totals(shared)["n"]["gpu_util"] == 80


# --- seeded fuzz ------------------------------------------------------------------------------

_ALPHABET = "usage ts gpu app start 0123456789.,-:/@%[]N/A\n\t x"


def _noise(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(n))


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 12)):
        op = rng.random()
        pos = rng.randrange(len(chars) + 1)
        if op < 0.4 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op < 0.8:
            chars.insert(pos, rng.choice(_ALPHABET))
        else:
            chars[pos:pos] = list(_noise(rng, rng.randint(1, 20)))
    return "".join(chars)


@pytest.mark.parametrize("seed", range(300))
def test_fuzz_parsers_never_raise(seed: int) -> None:
    rng = random.Random(seed)
    shapes = ["a100_8gpu", "a100_mig", "h100_shared", "idle_no_apps"]
    base = rng.choice([dump(), snapshot_text(rng.choice(shapes)),
                       "@@ /d\n/d/ranks/0:start 1 n 0\n/d/ranks/0.u:usage 2 1 3 4 5\n/d/.gpu/n:"
                       + snapshot_text("h100_shared").replace("\n", "\n/d/.gpu/n:") + "\n"])
    text = _mutate(rng, base) if rng.random() < 0.8 else _noise(rng, rng.randint(0, 400))
    for snap in parse_gpu_snapshots(text):
        assert isinstance(snap, GpuSnapshot)
        for g in snap.gpus:
            assert g.util is None or g.util >= 0
        gpu_use(snap, [rng.randint(0, 99999) for _ in range(5)])
    series = parse_usage_dump(text)
    for row in usage_rows(series):
        assert row["cpu_pct"] >= 0 and row["rss_mib"] >= 0
    ranks = parse_rank_files(text)
    for by_rank in ranks.values():
        status = JobStatus(job_id="1", state=JobState.RUNNING, ranks=tuple(by_rank.values()))
        rank_cells(status)
        node_usage(status)
    parse_usage_words(text.split())
