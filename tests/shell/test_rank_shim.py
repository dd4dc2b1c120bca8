"""The rank shim (jobdir.py RANK_SHIM) run for real with bash, and its files read back with
the rank-state query (slurm/commands.py RANKS_SH) and parse_rank_files."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from jupyter_tiers.batch.jobdir import RANK_SHIM, parse_rank_file, parse_rank_files
from jupyter_tiers.core.model import RankPhase
from jupyter_tiers.slurm.commands import BASH, RANKS_SH, ranks_argv

TS = r"\d+\.\d+"
HANG_GUARD = 60  # seconds; only keeps a broken shim from hanging the test run


def _default_signals() -> None:
    # The shim must be able to trap INT/TERM even when pytest runs in the background.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture()
def jobdir(tmp_path: Path) -> Path:
    (tmp_path / "ranks").mkdir()
    (tmp_path / "rank.sh").write_text(RANK_SHIM, encoding="utf-8")
    return tmp_path


def _env(jobdir: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(jobdir),
        "JT_JOB_DIR": str(jobdir),
        "SLURMD_NODENAME": "node7",
        "JT_HEARTBEAT": "1",
    }
    env.update(extra)
    return env


def _popen(jobdir: Path, argv: Sequence[str], **extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["bash", str(jobdir / "rank.sh"), *argv],
        env=_env(jobdir, **extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_signals,
        start_new_session=True,  # its own process group, so a hung shim can be cleaned up whole
    )


def _finish(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    try:
        return proc.communicate(timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise


def _run(jobdir: Path, argv: Sequence[str], **extra: str) -> tuple[int, str, str]:
    proc = _popen(jobdir, argv, **extra)
    out, err = _finish(proc)
    return proc.returncode, out.decode(), err.decode()


def _rank_lines(jobdir: Path, rank: int) -> list[str]:
    return (jobdir / "ranks" / str(rank)).read_text().splitlines()


def _query(*jobdirs: Path) -> str:
    argv = ranks_argv([str(d) for d in jobdirs])
    assert argv[:5] == [*BASH, RANKS_SH]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_GUARD, check=True)
    return out.stdout


def _start_and_wait_ready(jobdir: Path, argv: Sequence[str], rank: int) -> subprocess.Popen[bytes]:
    """Start the shim around a child that prints "ready" and then waits; return once it printed."""
    proc = _popen(jobdir, argv, RANK=str(rank))
    assert proc.stdout is not None
    first = proc.stdout.readline().decode()
    assert first == f"{rank}: ready\n"
    return proc


# --- output prefixing and exit recording ------------------------------------------------------


def test_output_is_prefixed_and_exit_0_recorded(jobdir: Path) -> None:
    code, out, err = _run(jobdir, ["sh", "-c", "echo a; echo b >&2; exit 0"], RANK="3")
    assert code == 0
    assert out.splitlines() == ["3: a", "3: b"]
    assert err == ""
    lines = _rank_lines(jobdir, 3)
    assert len(lines) == 2
    assert re.fullmatch(rf"start {TS} node7 0", lines[0]), lines[0]
    assert re.fullmatch(rf"exit 0 {TS}", lines[1]), lines[1]
    assert float(lines[0].split()[1]) <= float(lines[1].split()[2])


def test_exit_7_recorded_and_returned(jobdir: Path) -> None:
    code, out, _ = _run(jobdir, ["sh", "-c", "echo oops; exit 7"], RANK="3")
    assert code == 7
    assert out == "3: oops\n"
    lines = _rank_lines(jobdir, 3)
    assert re.fullmatch(rf"start {TS} node7 0", lines[0])
    assert re.fullmatch(rf"exit 7 {TS}", lines[1]), lines[1]


def test_output_without_trailing_newline_and_many_lines(jobdir: Path) -> None:
    code, out, _ = _run(
        jobdir, ["sh", "-c", "i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done; printf tail"],
        RANK="12",
    )
    assert code == 0
    assert out.splitlines() == [f"12: line{i}" for i in range(200)] + ["12: tail"]


def test_sigterm_to_shim_stops_child_and_records_signal(jobdir: Path) -> None:
    proc = _start_and_wait_ready(jobdir, ["sh", "-c", "echo ready; exec sleep 300"], rank=3)
    proc.send_signal(signal.SIGTERM)
    out, _ = _finish(proc)
    assert proc.returncode == 128 + 15
    assert out == b""
    lines = _rank_lines(jobdir, 3)
    assert re.fullmatch(rf"start {TS} node7 0", lines[0])
    assert re.fullmatch(rf"signal 15 {TS}", lines[-1]), lines[-1]
    assert len(lines) == 2


def test_signal_at_program_start_is_still_forwarded(jobdir: Path) -> None:
    # The program signals the shim at once, sometimes before the shim has recorded its pid (a race
    # this loop catches now and then without the early-signal check in the shim);
    # the signal must still reach the program (here it exits 3 on TERM; otherwise it ends with 0).
    program = (
        'trap "echo got TERM; exit 3" TERM; kill -TERM $PPID; '
        "i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; exit 0"
    )
    for _ in range(20):
        code, out, _ = _run(jobdir, ["sh", "-c", program], RANK="1")
        assert (code, out) == (3, "1: got TERM\n")
        assert re.fullmatch(rf"signal 15 {TS}", _rank_lines(jobdir, 1)[-1])


def test_sigint_to_shim_reaches_child(jobdir: Path) -> None:
    # Without job control bash starts background commands with SIGINT ignored; the shim must
    # undo that, or forwarding INT does nothing and the rank is recorded as stopped while its
    # program runs on.
    code, out, _ = _run(
        jobdir,
        [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"],
        RANK="0",
    )
    assert (code, out) == (0, "0: False\n")

    proc = _start_and_wait_ready(jobdir, ["sh", "-c", "echo ready; exec sleep 300"], rank=4)
    proc.send_signal(signal.SIGINT)
    _finish(proc)
    assert proc.returncode == 128 + 2
    assert re.fullmatch(rf"signal 2 {TS}", _rank_lines(jobdir, 4)[-1])


def test_child_dying_of_its_own_signal_is_recorded_as_killed(jobdir: Path) -> None:
    # An abort, segfault or OOM kill nobody asked for: a failure, unlike a stop from outside.
    code, _, _ = _run(jobdir, ["sh", "-c", "kill -KILL $$"], RANK="2")
    assert code == 128 + 9
    assert re.fullmatch(rf"killed 9 {TS}", _rank_lines(jobdir, 2)[-1])
    code, _, _ = _run(jobdir, ["python3", "-c", "import os; os.abort()"], RANK="3")
    assert code == 128 + 6
    assert re.fullmatch(rf"killed 6 {TS}", _rank_lines(jobdir, 3)[-1])
    state = parse_rank_file(3, (jobdir / "ranks" / "3").read_text())
    assert state.phase is RankPhase.FAILED and state.signal == 6 and state.exit_code is None


# --- environment given to the child ----------------------------------------------------------

PRINT_ENV = 'echo "$RANK $WORLD_SIZE $LOCAL_RANK"'


def test_rank_env_from_slurm_when_rank_unset(jobdir: Path) -> None:
    code, out, _ = _run(
        jobdir, ["sh", "-c", PRINT_ENV], SLURM_PROCID="5", SLURM_NTASKS="8", SLURM_LOCALID="1"
    )
    assert code == 0
    assert out == "5: 5 8 1\n"
    assert (jobdir / "ranks" / "5").exists()
    assert not (jobdir / "ranks" / "0").exists()


def test_rank_env_from_torchrun_wins_over_slurm(jobdir: Path) -> None:
    code, out, _ = _run(
        jobdir,
        ["sh", "-c", PRINT_ENV],
        RANK="3",
        WORLD_SIZE="4",
        LOCAL_RANK="1",
        SLURM_PROCID="0",
        SLURM_NTASKS="2",
        SLURM_LOCALID="0",
    )
    assert (code, out) == (0, "3: 3 4 1\n")
    assert (jobdir / "ranks" / "3").exists()


def test_world_size_from_jt_world_size_then_defaults(jobdir: Path) -> None:
    _, out, _ = _run(jobdir, ["sh", "-c", PRINT_ENV], SLURM_PROCID="1", JT_WORLD_SIZE="16", SLURM_NTASKS="2")
    assert out == "1: 1 16 0\n"
    _, out, _ = _run(jobdir, ["sh", "-c", PRINT_ENV])
    assert out == "0: 0 1 0\n"


def test_arguments_are_passed_verbatim(jobdir: Path) -> None:
    odd = "a b; $(touch pwned) 'q' \"d\""
    _, out, _ = _run(jobdir, ["printf", "%s\n", odd], RANK="0")
    assert out == f"0: {odd}\n"
    assert not (jobdir / "pwned").exists()


# --- read back with RANKS_SH and parse_rank_files ---------------------------------------------


def test_rank_files_round_trip_through_query_and_parser(
    jobdir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert _run(jobdir, ["sh", "-c", "exit 0"], RANK="0")[0] == 0
    assert _run(jobdir, ["sh", "-c", "exit 7"], RANK="1")[0] == 7
    proc = _start_and_wait_ready(jobdir, ["sh", "-c", "echo ready; exec sleep 300"], rank=2)
    proc.send_signal(signal.SIGTERM)
    _finish(proc)
    # rank 3 is still running: only a start line
    (jobdir / "ranks" / "3").write_text(f"start {time.time():.6f} node8\n")

    empty = tmp_path_factory.mktemp("empty")  # a job whose ranks did not start yet
    text = _query(jobdir, empty)
    lines = text.splitlines()
    assert lines[0] == f"@@ {jobdir}"
    assert f"@@ {empty}" in lines
    assert any(re.fullmatch(rf"{re.escape(str(jobdir))}/ranks/1:exit 7 {TS}", ln) for ln in lines)
    assert any(re.fullmatch(rf"% 1 {TS}", ln) for ln in lines)

    parsed = parse_rank_files(text)
    assert set(parsed) == {str(jobdir), str(empty)}
    assert parsed[str(empty)] == {}
    ranks = parsed[str(jobdir)]
    assert sorted(ranks) == [0, 1, 2, 3]

    r0, r1, r2, r3 = (ranks[i] for i in range(4))
    assert (r0.phase, r0.exit_code, r0.signal, r0.node) == (RankPhase.EXITED, 0, None, "node7")
    assert (r1.phase, r1.exit_code, r1.node) == (RankPhase.FAILED, 7, "node7")
    assert (r2.phase, r2.signal, r2.exit_code) == (RankPhase.STOPPED, 15, None)
    assert (r3.phase, r3.node, r3.ended_at) == (RankPhase.RUNNING, "node8", None)
    for r in (r0, r1, r2):
        assert r.started_at is not None and r.ended_at is not None
        assert r.started_at <= r.ended_at
        assert r.phase.done
    for r in (r0, r1, r2, r3):
        assert r.heartbeat_at is not None  # from the file's mtime
    assert not r3.phase.done


def test_requeued_rank_starts_again(jobdir: Path) -> None:
    assert _run(jobdir, ["sh", "-c", "exit 7"], RANK="0")[0] == 7
    assert parse_rank_files(_query(jobdir))[str(jobdir)][0].phase is RankPhase.FAILED
    # After a requeue the shim appends a new start: the earlier end no longer counts.
    proc = _start_and_wait_ready(jobdir, ["sh", "-c", "echo ready; exec sleep 300"], rank=0)
    try:
        state = parse_rank_files(_query(jobdir))[str(jobdir)][0]
        assert state.phase is RankPhase.RUNNING
        assert state.exit_code is None and state.ended_at is None
        assert len(_rank_lines(jobdir, 0)) == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        _finish(proc)
    assert _run(jobdir, ["true"], RANK="0")[0] == 0
    assert parse_rank_files(_query(jobdir))[str(jobdir)][0].phase is RankPhase.EXITED


def test_missing_program_is_exit_127(jobdir: Path) -> None:
    code, out, _ = _run(jobdir, ["/nonexistent/program"], RANK="6")
    assert code == 127
    assert out.startswith("6: ")  # bash's error message, prefixed like any rank output
    assert re.fullmatch(rf"exit 127 {TS}", _rank_lines(jobdir, 6)[-1])


def test_child_terminated_from_outside_is_recorded_as_stopped(jobdir: Path) -> None:
    # Slurm's fail-stop signals the program too; it may die before the shim's own trap runs.
    code, _, _ = _run(jobdir, ["sh", "-c", "kill -TERM $$"], RANK="4")
    assert code == 128 + 15
    assert re.fullmatch(rf"signal 15 {TS}", _rank_lines(jobdir, 4)[-1])
