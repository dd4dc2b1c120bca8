"""What a job used of what it asked for (batch/efficiency.py): the line, the node's memory peak
from samples taken at different moments, the accounting record winning where it answers, the
hint only for a job that asked for far more, and sacct's text read without raising."""

from __future__ import annotations

import random

from jupyter_tiers.batch.efficiency import (
    Accounting,
    compute_efficiency,
    cores_asked,
    duration_words,
    job_efficiency,
    parse_accounting,
    parse_cpu_time,
    parse_sacct_mem,
)
from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.batch.usage import UsageSeries, parse_gpu_snapshots
from jupyter_tiers.core.model import JobState, JobStatus, RankUsage

GIB_KIB = 1 << 20


def series(per_rank: dict[int, list[tuple[float, float, float]]], nodes: dict[int, str]) -> UsageSeries:
    """rank -> [(at, cpu_s, rss GiB)]."""
    return UsageSeries(ranks={r: [RankUsage(at=at, cpu_s=cpu, cpu_pct=0.0, rss_kib=int(gib * GIB_KIB))
                                  for at, cpu, gib in samples] for r, samples in per_rank.items()},
                       nodes=dict(nodes))


def test_the_line_reads_like_seff() -> None:
    elapsed = 2 * 3600 + 10 * 60  # 2 h 10 min
    # 16 cores over 2 nodes; the ranks' CPU seconds add up to 38 % of 16 x elapsed
    cpu_each = 0.38 * 16 * elapsed / 4
    s = series({r: [(100.0, cpu_each / 2, 0.5), (100.0 + elapsed, cpu_each, 1.05)] for r in range(4)},
               {0: "node1", 1: "node1", 2: "node2", 3: "node2"})
    e = compute_efficiency(s, elapsed_s=elapsed, nodes=2, cores=16, mem_asked_bytes=16 << 30)
    assert e is not None
    assert e.line == "CPU 38 % of 16 cores over 2 h 10 min; memory peak 2.1 of 16 GB per node"
    assert round(e.cpu_pct or 0) == 38 and e.source == "samples"
    assert e.hint == "asked for far more than it used: --mem=4G would leave room"
    assert str(e) == e.line + " — " + e.hint


def test_a_nodes_peak_is_its_ranks_at_one_time_not_their_peaks_summed() -> None:
    # rank 0 peaks at t=10 (3 GiB) while rank 1 is low, rank 1 peaks at t=20 while rank 0 is low
    s = series({0: [(0, 1, 1.0), (10, 2, 3.0), (20, 3, 1.0)], 1: [(5, 1, 1.0), (15, 2, 1.0), (25, 3, 3.0)]},
               {0: "n1", 1: "n1"})
    e = compute_efficiency(s, elapsed_s=30, nodes=1, cores=2, mem_asked_bytes=None)
    assert e is not None and e.mem_peak_bytes == 4 << 30  # 3 + 1, never 3 + 3
    assert e.line == "CPU 10 % of 2 cores over 30 s; memory peak 4 GB"


def test_accounting_wins_where_it_answers() -> None:
    s = series({0: [(0, 10, 1.0), (60, 50, 1.0)]}, {0: "n1"})
    acct = Accounting(total_cpu_s=1800.0, alloc_cpus=8, req_mem_bytes=32 << 30, elapsed_s=600.0)
    e = compute_efficiency(s, elapsed_s=590, nodes=1, cores=1, mem_asked_bytes=None, accounting=acct)
    assert e is not None and e.source == "accounting"
    assert e.line == "CPU 38 % of 8 cores over 10 min; memory peak 1 of 32 GB per node"
    assert e.hint == "asked for far more than it used: --mem=2G would leave room"


def test_a_busy_job_and_a_short_one_get_no_hint() -> None:
    busy = series({0: [(0, 0, 14.0), (3600, 3500, 14.0)]}, {0: "n1"})
    e = compute_efficiency(busy, elapsed_s=3600, nodes=1, cores=1, mem_asked_bytes=16 << 30)
    assert e is not None and e.hint is None
    short = series({0: [(0, 0, 0.1), (60, 1, 0.1)]}, {0: "n1"})
    e = compute_efficiency(short, elapsed_s=60, nodes=1, cores=16, mem_asked_bytes=64 << 30)
    assert e is not None and e.hint is None and (e.cpu_pct or 0) < 1
    idle = series({0: [(0, 0, 0.1), (3600, 3600, 0.1)]}, {0: "n1"})
    e = compute_efficiency(idle, elapsed_s=3600, nodes=1, cores=16, mem_asked_bytes=None)
    assert e is not None and e.hint == "asked for far more than it used: about 1 of 16 cores would do"


def test_nothing_sampled_is_none_and_gpu_shows_only_where_sampled() -> None:
    assert compute_efficiency(UsageSeries(), elapsed_s=30, nodes=1, cores=1, mem_asked_bytes=None) is None
    s = series({0: [(0, 1, 1.0), (10, 2, 1.0)]}, {0: "g1"})
    s.ranks[0] = [RankUsage(at=u.at, cpu_s=u.cpu_s, cpu_pct=0, rss_kib=u.rss_kib, pids=(7,))
                  for u in s.ranks[0]]
    s.gpus["g1"] = parse_gpu_snapshots(
        "ts 0\ngpu 0, GPU-a, 70, 1000, 80000, Disabled\napp 7, GPU-a, 30000\n"
        "ts 10\ngpu 0, GPU-a, 90, 1000, 80000, Disabled\napp 7, GPU-a, 31000\n")
    e = compute_efficiency(s, elapsed_s=10, nodes=1, cores=1, mem_asked_bytes=None)
    assert e is not None and e.line.endswith("; GPU 80 % busy, memory peak 30.3 GB")
    assert "GPU" not in compute_efficiency(series({0: [(0, 1, 1.0)]}, {0: "n"}), elapsed_s=10, nodes=1,
                                           cores=1, mem_asked_bytes=None).line  # type: ignore[union-attr]


def test_cores_asked_follow_what_sbatch_asks() -> None:
    assert cores_asked({"nodes": 2, "ntasks_per_node": 4, "cpus_per_task": 8}) == 64
    assert cores_asked({"nodes": 2, "ntasks_per_node": 4, "launcher": "torchrun", "cpus_per_task": 16}) == 32
    assert cores_asked({"nodes": "x"}) is None
    s = series({0: [(0, 0, 1.0), (100, 50, 1.0)], 1: [(0, 0, 1.0), (100, 50, 1.0)]},
               {0: "local0", 1: "local0"})
    e = job_efficiency({"nodes": 1, "ntasks_per_node": 2, "mem": "8G"}, "local", 2, 100, s)
    assert e is not None and e.line == "CPU 50 % of 2 cores over 1 min 40 s; memory peak 2 of 8 GB per node"


def test_sacct_text() -> None:
    assert parse_cpu_time("1-02:03:04.500") == 93784.5 and parse_cpu_time("05:06.250") == 306.25
    assert parse_cpu_time("n/a") is None
    assert parse_sacct_mem("16G") == 16 << 30 and parse_sacct_mem("4000M") == 4000 << 20
    assert parse_sacct_mem("4000Mc", cpus_per_node=4) == 16000 << 20 and parse_sacct_mem("4000Mc") is None
    text = ("812|02:10:00|16|16G||7800\n812.batch|00:00:01|8||2048K|7800\n"
            "812.0|02:09:59|16||2202009K|7790\n999|00:00:01|1|1G||5\n")
    acct = parse_accounting(text, "812", nodes=2)
    assert acct == Accounting(total_cpu_s=7800.0, alloc_cpus=16, req_mem_bytes=16 << 30,
                              max_rss_bytes=2202009 << 10, elapsed_s=7800.0)
    assert parse_accounting("", "812") is None


def test_sacct_parsers_take_any_text() -> None:
    rng = random.Random(37)
    pieces = ["812", "812.0", "|", "16G", "4000Mc", "02:10:00", "1-", "K", "n/a", "\n", "9" * 40, "x|y"]
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 60)))
        parse_accounting(text, "812", nodes=rng.randint(0, 3))
        parse_cpu_time(text)
        parse_sacct_mem(text, rng.choice([None, 2.0]))


def test_the_summary_line_ends_with_what_it_used() -> None:
    done = JobStatus(job_id="42", state=JobState.COMPLETED, elapsed_s=42, nodelist="node[1-2]")
    used = "CPU 38 % of 16 cores over 42 s; memory peak 2.1 of 16 GB per node"
    assert summary_line(done, metric=("loss", 0.0123), used=used) == (
        f"job 42 COMPLETED in 00:00:42 on node[1-2] — loss 0.0123 — {used}")
    running = JobStatus(job_id="42", state=JobState.RUNNING, elapsed_s=42)
    assert used not in summary_line(running, used=used)
    assert duration_words(7800) == "2 h 10 min" and duration_words(95) == "1 min 35 s"


def test_a_summary_says_what_a_job_used_only_after_a_minute() -> None:
    from jupyter_tiers.batch.efficiency import SUMMARY_MIN_ELAPSED_S, Efficiency

    short = Efficiency(elapsed_s=13.0, cores=2, cpu_s=6.0, nodes=1, mem_peak_bytes=300 << 20,
                       mem_asked_bytes=None)
    assert short.for_summary is None and str(short).startswith("CPU ")
    from dataclasses import replace

    long = replace(short, elapsed_s=SUMMARY_MIN_ELAPSED_S)
    assert long.for_summary == str(long)
