"""Stacks, grouped (batch/stacks.py): faulthandler's text parsed, the cell's frames shown as the
cell's lines, our own frames hidden, ranks with identical stacks grouped, and the rank shim's
side run for real with bash and this Python (no tier, no supervisor)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jupyter_tiers.batch.jobdir import OWN_FILES, RANK_SHIM, is_own_file, job_files
from jupyter_tiers.batch.stacks import (
    BOOT_FILE,
    Answer,
    build_stacks,
    check_request_id,
    hostlist,
    parse_answers,
    parse_dump,
    rank_ranges,
    rank_threads,
    request_id,
)
from jupyter_tiers.core.model import JobSpec, RankPhase, RankState
from tests.helpers import wait_for

JOB = "/home/u/jobs/train-1"
BOOT = f"{JOB}/{BOOT_FILE}"
THREADING = "/usr/lib/python3.11/threading.py"


def dump(main_frames: list[tuple[str, int, str]], *others: list[tuple[str, int, str]],
         ident: str = "0x00007f0000000001") -> str:
    """faulthandler's text (3.11's format): other threads first, the current one last; frames
    given outermost first, printed innermost first."""
    blocks = []
    for i, frames in enumerate(others):
        lines = [f"Thread 0x00007f00000000a{i} (most recent call first):"]
        lines += [f'  File "{f}", line {n} in {fn}' for f, n, fn in reversed(frames)]
        blocks.append("\n".join(lines))
    lines = [f"Current thread {ident} (most recent call first):"]
    lines += [f'  File "{f}", line {n} in {fn}' for f, n, fn in reversed(main_frames)]
    blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def main_stack(*cell: tuple[int, str]) -> list[tuple[str, int, str]]:
    return [(BOOT, 37, "<module>"), ("<frozen runpy>", 291, "run_path"),
            ("<frozen runpy>", 98, "_run_module_code"), ("<frozen runpy>", 88, "_run_code"),
            *((f"{JOB}/main.py", n, fn) for n, fn in cell)]


WORKER = [(THREADING, 1002, "_bootstrap"), (THREADING, 1045, "_bootstrap_inner"),
          (THREADING, 982, "run"), (f"{JOB}/main.py", 3, "loader")]
CELL = "import time\ndef a():\n    time.sleep(9)\ndef b():\n    time.sleep(9)\na() if 1 else b()\n"


def test_parse_dump_reads_threads_and_frames_innermost_first() -> None:
    threads = parse_dump(dump(main_stack((6, "<module>"), (3, "a")), WORKER))
    assert [t.current for t in threads] == [False, True]
    assert threads[1].frames[0].func == "a" and threads[1].frames[0].line == 3
    assert threads[0].frames[-1].file == THREADING


def test_the_cell_is_shown_as_its_lines_and_our_frames_are_hidden() -> None:
    threads = rank_threads(dump(main_stack((6, "<module>"), (3, "a")), WORKER), CELL.split("\n"))
    main, worker = threads
    assert main.main and not worker.main
    assert [(f.cell_line, f.func, f.source) for f in main.frames] == [
        (7, "<module>", "a() if 1 else b()"), (4, "a", "time.sleep(9)")]  # the magic line is line 1
    assert worker.frames[0].file == THREADING and worker.frames[-1].cell_line == 4


def test_an_array_task_hides_its_launcher_and_maps_cell_py() -> None:
    frames = [(BOOT, 37, "<module>"), ("/usr/lib/python3.11/runpy.py", 291, "run_path"),
              (f"{JOB}/main.py", 9, "<module>"), (f"{JOB}/cell.py", 2, "<module>")]
    (main,) = rank_threads(dump(frames))
    assert [(f.cell_line, f.func) for f in main.frames] == [(3, "<module>")]


def _ranks(nodes: dict[int, str], phase: RankPhase = RankPhase.RUNNING) -> dict[int, RankState]:
    return {r: RankState(rank=r, phase=phase, node=n) for r, n in nodes.items()}


def test_ranks_with_the_same_stack_are_one_group_and_the_rest_say_why() -> None:
    world = 8
    nodes = {r: f"node{r // 2 + 1}" for r in range(world)}
    ranks = _ranks(nodes)
    ranks[7] = RankState(rank=7, phase=RankPhase.EXITED, exit_code=0, node="node4")
    in_a = dump(main_stack((6, "<module>"), (3, "a")))
    in_b = dump(main_stack((6, "<module>"), (5, "b")), ident="0x00007f00000000ff")
    answers = {r: Answer(at=100.0 + r / 10, node=nodes[r], dump=in_b if r == 3 else in_a)
               for r in range(5)}
    answers[5] = Answer(at=100.5, node="node3", why="no Python stack to take: this rank's program "
                        "is not a Python cell")
    stacks = build_stacks("12", world, ranks, answers, asked=range(7), cell_text=CELL, waited_s=20)
    assert [g.ranks for g in stacks.groups] == [(0, 1, 2, 4), (3,)]
    text = str(stacks)
    assert "ranks 0-2,4 (4) on node[1-3]\n  cell line 7, in <module>:  a() if 1 else b()\n" \
           "  cell line 4, in a:  time.sleep(9)\n" in text
    assert "\nrank 3 (node2)\n  cell line 7, in <module>:  a() if 1 else b()\n  cell line 6, in b:" in text
    assert "rank 5 (node3): no Python stack to take" in text
    assert "rank 6 (node4): did not answer within 20 s" in text
    assert "rank 7 (node4): exited 0" in text
    assert "taken within 0.4 s of each other" in text
    assert "<frozen runpy>" not in text and BOOT_FILE not in text


def test_no_running_rank_is_said_so() -> None:
    ranks = _ranks({0: "n1"}, RankPhase.WAITING)
    stacks = build_stacks("5", 2, ranks, {}, asked=(), cell_text=None, waited_s=20)
    assert str(stacks).splitlines()[0] == "job 5: no rank is running, so there is no stack to take"
    assert "ranks 0-1 (2) on n1: not started" in str(stacks)


def test_answers_are_taken_only_for_their_request_and_only_when_ended() -> None:
    text = ("@@ 0\nrequest OLD 1.0 n1\nThread 0x1 (most recent call first):\nend OLD\n"
            "request NEW 2.5 n1\nCurrent thread 0x2 (most recent call first):\n"
            '  File "x.py", line 1 in f\nend NEW\n'
            "@@ 1\nrequest NEW 2.6 n2\nnone its program has exited\nend NEW\n"
            "@@ 2\nrequest NEW 2.7 n2\nCurrent thread 0x3 (most recent call first):\n"
            "@@cell\nprint(1)\n@@ 3\n")
    answers, cell = parse_answers(text, "NEW")
    assert set(answers) == {0, 1}  # rank 2 has not finished answering
    assert answers[0].at == 2.5 and answers[0].node == "n1" and "x.py" in answers[0].dump
    assert answers[1].why == "its program has exited"
    assert cell == "print(1)\n@@ 3\n"  # everything after @@cell is the cell


def test_request_ids_are_plain_words() -> None:
    rid = request_id(1700000000.25)
    assert check_request_id(rid) == rid and " " not in rid
    with pytest.raises(ValueError):
        check_request_id("1; rm -rf /")


def test_hostlist_and_rank_ranges() -> None:
    assert rank_ranges([4, 0, 1, 2, 7, 8]) == "0-2,4,7-8"
    assert hostlist([f"node{i}" for i in range(1, 33)]) == "node[1-32]"
    assert hostlist(["node2", "gpu7", "login"]) == "gpu7,login,node2"


def test_the_parsers_take_any_text_without_raising() -> None:
    """Seeded fuzz: pieces of real dumps and answers, cut and shuffled, never raise."""
    rng = random.Random(37)
    pieces = [*dump(main_stack((6, "<module>"), (3, "a")), WORKER).splitlines(),
              "@@ 0", "@@ x", "@@cell", "request R 1 n", "end R", "none why", "request", "end",
                 "  File \"", '  File "a", line ??? in f', "Stack (most recent call first):",
                 "  ...", "Thread 0xZZ (most recent call first):", "\x00\udcff", "  File " + '"' * 5000]
    for _ in range(400):
        text = "\n".join(rng.choice(pieces)[: rng.randint(0, 120)] for _ in range(rng.randint(0, 40)))
        answers, _ = parse_answers(text, "R")
        for answer in answers.values():
            rank_threads(answer.dump, text.split("\n"))
        parse_dump(text)
    # one long line of many quotes and digits is read in linear time (no backtracking blow-up)
    parse_dump("  File \"" + "\", line 1" * 20000)


def test_the_boot_is_written_for_a_python_cell_only_and_is_ours() -> None:
    assert BOOT_FILE in job_files(JobSpec(script="print(1)"))
    assert BOOT_FILE not in job_files(JobSpec(script="echo hi", shell=True))
    assert BOOT_FILE in OWN_FILES and is_own_file("stacks/0")


# --- the shim's side, run for real -------------------------------------------------------------

BODY = textwrap.dedent("""\
    import os, threading, time
    stop = os.path.join(os.environ["JT_JOB_DIR"], "stop")
    def in_a_thread():
        while not os.path.exists(stop):
            time.sleep(0.05)
    def blocked_here():
        open(os.path.join(os.environ["JT_JOB_DIR"], "up"), "w").close()
        while not os.path.exists(stop):
            time.sleep(0.05)
    threading.Thread(target=in_a_thread, daemon=True).start()
    blocked_here()
    """)


def _start_rank(jobdir: Path, body: str, shell: bool = False) -> subprocess.Popen[bytes]:
    (jobdir / "ranks").mkdir(parents=True)
    for name, (text, mode) in job_files(JobSpec(script=body, shell=shell)).items():
        (jobdir / name).write_text(text)
        os.chmod(jobdir / name, mode)
    program = ["bash", str(jobdir / "main.sh")] if shell else [sys.executable, str(jobdir / "main.py")]
    env = {**os.environ, "JT_JOB_DIR": str(jobdir), "RANK": "0", "JT_USAGE": "0", "JT_STACKS_POLL": "0.2"}
    return subprocess.Popen(["bash", str(jobdir / "rank.sh"), *program], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _ask(jobdir: Path, rid: str) -> Answer:
    (jobdir / "stacks" / "request").write_text(rid + "\n")

    def answered() -> Answer | None:
        text = "@@ 0\n" + (jobdir / "stacks" / "0").read_text() if (jobdir / "stacks" / "0").exists() else ""
        return parse_answers(text, rid)[0].get(0)

    return wait_for(answered, "rank 0's answer", 60)


def test_the_shim_answers_with_every_thread_and_the_cell_lines(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    proc = _start_rank(jobdir, BODY)
    try:
        wait_for(lambda: (jobdir / "up").exists(), "the cell to start", 60)
        answer = _ask(jobdir, request_id(time.time()))
        assert answer.why is None, answer
        threads = rank_threads(answer.dump, BODY.split("\n"))
        main = next(t for t in threads if t.main)
        assert (main.frames[0].cell_line, main.frames[0].func) == (12, "<module>")
        assert main.frames[1].func == "blocked_here" and main.frames[1].cell_line in (9, 10)
        assert any(f.func == "in_a_thread" and f.cell_line in (5, 6) for t in threads for f in t.frames)
        assert len(threads) == 2
        again = request_id(time.time())
        second = _ask(jobdir, again)  # asked again: a new dump, and the file keeps only it
        assert second.why is None and len(rank_threads(second.dump)) == 2
        assert (jobdir / "stacks" / "0").read_text().startswith(f"request {again} ")
    finally:
        (jobdir / "stop").write_text("")
        out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, out
    assert (jobdir / "ranks" / "0").read_text().splitlines()[-1].startswith("exit 0 ")


def test_the_program_keeps_its_argv_and_traceback(tmp_path: Path) -> None:
    body = "import sys\nprint('argv', sys.argv[1:], __name__, sys.argv[0].endswith('/main.py'))\n" \
           "def f():\n    raise ValueError('boom')\nf()\n"
    proc = _start_rank(tmp_path / "job", body)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 1
    assert "0: argv [] __main__ True" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("0:   File")]
    assert [ln.split(", in ")[-1] for ln in lines] == ["<module>", "f"], out  # no boot, no runpy
    assert BOOT_FILE not in out and "runpy" not in out


def test_a_shell_cell_says_it_has_no_python_stack(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    body = 'touch "$JT_JOB_DIR/up"; while [ ! -e "$JT_JOB_DIR/stop" ]; do sleep 0.1; done'
    proc = _start_rank(jobdir, body, shell=True)
    try:
        wait_for(lambda: (jobdir / "up").exists(), "the cell to start", 60)
        answer = _ask(jobdir, request_id(time.time()))
        assert answer.why == "no Python stack to take: this rank's program is not a Python cell"
    finally:
        (jobdir / "stop").write_text("")
        proc.communicate(timeout=120)
    assert proc.returncode == 0


def test_a_program_that_took_the_signal_away_is_not_signalled(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    body = BODY.replace("import os, threading, time",
                        "import os, signal, threading, time\n"
                        "signal.signal(signal.SIGRTMAX - 3, signal.SIG_DFL)")
    proc = _start_rank(jobdir, body)
    try:
        wait_for(lambda: (jobdir / "up").exists(), "the cell to start", 60)
        answer = _ask(jobdir, request_id(time.time()))
        assert answer.why is not None and "no longer handles the stack signal" in answer.why
    finally:
        (jobdir / "stop").write_text("")
        proc.communicate(timeout=120)
    assert proc.returncode == 0  # not killed by the signal's default action


def test_the_rank_shim_passes_shellcheck() -> None:
    if not any(os.access(os.path.join(p, "shellcheck"), os.X_OK) for p in os.environ["PATH"].split(":")):
        pytest.skip("shellcheck is not installed")
    result = subprocess.run(["shellcheck", "-s", "bash", "-"], input=RANK_SHIM.encode(),
                            capture_output=True, check=False)
    assert result.returncode == 0, result.stdout.decode()[-3000:]
