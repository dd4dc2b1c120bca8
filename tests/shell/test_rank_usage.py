"""The rank shim's resource sampling run for real (bash, this machine's /proc): each beat's usage
line, the rank-state query reading it back, the series job.usage() reads, and the node's GPU
snapshot made by one rank per beat through an ``nvidia-smi`` stand-in on PATH that prints
recorded query outputs (tests/unit/data/nvidia_smi) with the ranks' real pids.

No timed assertions: every wait is on a condition with a generous limit (HANG_GUARD)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_tiers.batch.jobdir import RANK_SHIM, parse_rank_files
from jupyter_tiers.batch.usage import parse_gpu_snapshots, parse_usage_dump, usage_rows
from jupyter_tiers.slurm.commands import ranks_argv, usage_argv

HANG_GUARD = 120.0
DATA = Path(__file__).parents[1] / "unit" / "data" / "nvidia_smi" / "h100_shared"

# Holds ~200 MiB (touched, so resident) and burns CPU until told to stop (file "stop").
EATER = """
import os, sys, time
block = bytearray(200 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    sum(range(20000))
"""
# Sleeps until told to stop: a rank that does nothing.
IDLER = ("import os, sys, time\nprint('ready', flush=True)\n"
         "while not os.path.exists(sys.argv[1]): time.sleep(0.2)\n")


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture()
def jobdir(tmp_path: Path) -> Path:
    (tmp_path / "ranks").mkdir()
    (tmp_path / "rank.sh").write_text(RANK_SHIM, encoding="utf-8")
    return tmp_path


def _start(jobdir: Path, rank: int, code: str, path: str | None = None,
           **extra: str) -> subprocess.Popen[bytes]:
    env = {"PATH": path or os.environ["PATH"], "HOME": str(jobdir), "JT_JOB_DIR": str(jobdir),
           "SLURMD_NODENAME": "node7", "JT_HEARTBEAT": "1", "RANK": str(rank), **extra}
    argv = ["bash", str(jobdir / "rank.sh"), sys.executable, "-c", code, str(jobdir / "stop")]
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=_default_signals, start_new_session=True)


def _wait(what: str, check: Callable[[], object]) -> object:
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


def _stop(jobdir: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    (jobdir / "stop").write_text("")
    for p in procs:
        try:
            p.communicate(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()


def _query(jobdir: Path) -> dict:
    out = subprocess.run(ranks_argv([str(jobdir)]), capture_output=True, text=True, timeout=HANG_GUARD)
    return parse_rank_files(out.stdout)[str(jobdir)]


def _samples(jobdir: Path, rank: int) -> int:
    try:
        return len((jobdir / "usage" / str(rank)).read_text().splitlines())
    except OSError:
        return 0


@pytest.mark.parametrize("walk", ["children", "scan"])
def test_usage_sampled_each_beat_and_read_back(jobdir: Path, walk: str) -> None:
    """Both ways of finding the program's tree: down /proc/PID/task/*/children (builtins only)
    and, for kernels without those files, one scan of every /proc/PID/stat."""
    procs = [_start(jobdir, 0, EATER, JT_USAGE_WALK=walk), _start(jobdir, 1, IDLER, JT_USAGE_WALK=walk)]
    try:
        # two samples of each after the eater holds its memory: a CPU % over a whole beat
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().endswith(b"ready\n")
        base = {r: _samples(jobdir, r) for r in (0, 1)}
        _wait("two more samples of each rank",
              lambda: all(_samples(jobdir, r) >= base[r] + 2 for r in (0, 1)))
        ranks = _query(jobdir)
    finally:
        _stop(jobdir, procs)
    eater, idler = ranks[0].usage, ranks[1].usage
    assert eater is not None and idler is not None
    assert eater.rss_kib > 150 * 1024 > idler.rss_kib  # the 200 MiB block is resident
    assert eater.cpu_s > idler.cpu_s
    assert eater.gpu_util is None and eater.gpu_mem_mib is None  # no nvidia-smi on this PATH
    assert procs[0].pid not in eater.pids and eater.pids  # the program's tree, not the shim
    # the series, read as job.usage() reads it on Slurm
    out = subprocess.run(usage_argv(str(jobdir), 100), capture_output=True, text=True, timeout=HANG_GUARD)
    series = parse_usage_dump(out.stdout)
    assert series.nodes == {0: "node7", 1: "node7"}
    rows = usage_rows(series)
    assert {r["rank"] for r in rows} == {0, 1}
    peak = {k: max(r["rss_mib"] for r in rows if r["rank"] == k) for k in (0, 1)}
    assert peak[0] > 150 > peak[1], peak
    # the series keeps what each beat saw, also after the ranks ended
    assert len([r for r in rows if r["rank"] == 0]) >= 2
    out = subprocess.run(usage_argv(str(jobdir), 1), capture_output=True, text=True, timeout=HANG_GUARD)
    assert len(usage_rows(parse_usage_dump(out.stdout))) == 2  # the last sample of each


# Starts a child that holds ~120 MiB (touched) and waits for it: the memory is the child's.
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import os, sys, time\\n"
    "b = bytearray(120 * 1024 * 1024)\\nfor i in range(0, len(b), 4096): b[i] = 1\\n"
    "print('ready', flush=True)\\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.2)\\n",
    sys.argv[1]])
child.wait()
"""


@pytest.mark.parametrize("walk", ["children", "scan"])
def test_usage_counts_the_programs_children(jobdir: Path, walk: str) -> None:
    procs = [_start(jobdir, 0, PARENT, JT_USAGE_WALK=walk)]
    try:
        assert procs[0].stdout is not None and procs[0].stdout.readline().endswith(b"ready\n")
        base = _samples(jobdir, 0)
        _wait("a sample after the child holds its memory", lambda: _samples(jobdir, 0) >= base + 1)
        usage = _query(jobdir)[0].usage
    finally:
        _stop(jobdir, procs)
    assert usage is not None and len(usage.pids) == 2  # the program and its child
    assert usage.rss_kib > 100 * 1024


def test_sampling_off_with_jt_usage_0(jobdir: Path) -> None:
    procs = [_start(jobdir, 0, IDLER, JT_USAGE="0")]
    try:
        assert procs[0].stdout is not None and procs[0].stdout.readline().endswith(b"ready\n")
        first = (jobdir / "ranks" / "0").stat().st_mtime_ns
        _wait("two heartbeats", lambda: (jobdir / "ranks" / "0").stat().st_mtime_ns > first + 10**9)
        state = _query(jobdir)[0]
    finally:
        _stop(jobdir, procs)
    assert state.usage is None and state.heartbeat_at is not None
    assert not (jobdir / "usage").exists() and not (jobdir / "ranks" / "0.u").exists()


def test_gpu_snapshot_once_per_node_and_beat(jobdir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Four ranks on one node: the node's GPUs are asked about by one rank per beat (never
    once per rank), and every rank's usage gets its share through its pids."""
    bin_dir = tmp_path_factory.mktemp("bin")
    calls = bin_dir / "calls"
    gpu_csv = (DATA / "query-gpu.csv").read_text()
    (bin_dir / "nvidia-smi").write_text(f"""#!/bin/bash
case "$1" in
  --query-gpu=*) echo gpu >> {calls}; printf '%s' '{gpu_csv}' ;;
  --query-compute-apps=*)
    i=0
    for f in "$JT_JOB_DIR"/ranks/.*.pid; do
      read -r p < "$f" || continue
      # ranks alternate between the two GPUs; 1000 MiB each
      u=GPU-e2f3a4b5-c6d7-e8f9-a0b1-c2d3e4f5a6b7
      [ $((i % 2)) = 0 ] && u=GPU-d1e2f3a4-b5c6-d7e8-f9a0-b1c2d3e4f5a6
      echo "$p, $u, 1000"; i=$((i + 1))
    done ;;
esac
""")
    (bin_dir / "nvidia-smi").chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    procs = [_start(jobdir, r, IDLER, path=path) for r in range(4)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().endswith(b"ready\n")
        _wait("three samples of each rank", lambda: all(_samples(jobdir, r) >= 3 for r in range(4)))
        _wait("every rank's GPU share", lambda: all(
            s.usage is not None and s.usage.gpu_mem_mib == 1000 for s in _query(jobdir).values()))
        ranks = _query(jobdir)
        samples = sum(_samples(jobdir, r) for r in range(4))
        queries = len(calls.read_text().splitlines())
    finally:
        _stop(jobdir, procs)
    assert 1 <= queries < samples  # fewer queries than rank beats
    assert {s.usage.gpu_util for s in ranks.values()} <= {88.0, 91.0}
    assert all(len(s.usage.gpus) == 1 for s in ranks.values())
    snaps = parse_gpu_snapshots((jobdir / "usage" / "gpu-node7").read_text())
    assert queries - 1 <= len(snaps) <= queries  # the last may be cut short by the stop
    # never two queries of the node within one beat (JT_HEARTBEAT=1), whichever rank made them
    gaps = [b.at - a.at for a, b in itertools.pairwise(snaps)]
    assert len(snaps) >= 2 and min(gaps) >= 0.9 - 1e-3, gaps
