"""failstop.py: which log lines are Slurm's reports of the fail-stop's kills, given the job's first
failed rank; the widget's fold message (viewstate/job.py) and the text view's fold (text.py).
Line shapes are srun's and slurmstepd's (as in tests/unit/test_metrics.py and
test_signal_requeue_view.py)."""

from __future__ import annotations

import random

import pytest

from jupyter_tiers.app.viewstate.job import text_message
from jupyter_tiers.batch.failstop import Failure, fold_text, is_failstop_line, is_stop_report, parse_task_list
from jupyter_tiers.core.model import JobState, JobStatus, LogLine, RankPhase, RankState
from jupyter_tiers.faces.widgets.text import FailStopFold

R137 = Failure(137, "node18")


@pytest.mark.parametrize("line", [
    "srun: error: node3: tasks 24-31: Exited with exit code 143",
    "srun: error: node3: task 24: Exited with exit code 255",
    "srun: error: node3: tasks 24-27,29-31: Killed",
    "srun: error: node7: task 56: Terminated",
    "srun: error: node2: task 1: Exited with exit code 1",  # another node: a consequence too
    "srun: error: node18: tasks 136,138-143: Exited with exit code 143",  # the rank's node, not it
    "slurmstepd: error: *** STEP 12.0 ON node1 CANCELLED AT 2026-12-02T22:08:26 ***",
    "slurmstepd-node4: error: *** STEP 12.0 ON node4 CANCELLED AT 2026-12-02T22:08:26 ***",
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
    "srun: Terminating StepId=12.0",
    "srun: launch/slurm: _step_signal: Terminating StepId=12.0",
    "srun: Force Terminated StepId=12.0",
    "srun: error: Timed out waiting for job step to complete",
])
def test_the_fail_stops_kill_lines(line: str) -> None:
    assert is_failstop_line(line, R137) and is_stop_report(line)


@pytest.mark.parametrize("line", [
    "srun: error: node18: task 137: Exited with exit code 7",  # the failure itself
    "srun: error: node18: tasks 136-143: Exited with exit code 143",  # names the rank
    "srun: error: node18: task 17: Exited with exit code 1",  # torchrun: the failing node's agent
    "srun: error: node18: task 138: Segmentation fault",  # not a kill
    "slurmstepd: error: *** JOB 7 ON node1 CANCELLED AT 2026-12-03T03:28:36 DUE TO JOB REQUEUE ***",
    "slurmstepd: error: *** STEP 12.0 ON node1 CANCELLED AT 2026-12-02T22:08:26 DUE TO TIME LIMIT ***",
    "slurmstepd: error: Detected 1 oom_kill event in StepId=7.0. Some of the step tasks have been "
    "OOM Killed.",
    "srun: error: node3: tasks 9-2: Exited with exit code 143",  # not a task list
    "RuntimeError: srun: error: node3: task 4: Killed",
    "jupyter-tiers: rank 1 failed (exit 3): stopping the others",
])
def test_what_stays(line: str) -> None:
    assert not is_failstop_line(line, R137)


def test_without_the_node_the_task_list_and_the_kill_decide() -> None:
    anywhere = Failure(5)
    assert is_failstop_line("srun: error: node3: tasks 0-3: Exited with exit code 143", anywhere)
    assert not is_failstop_line("srun: error: node3: tasks 4-7: Exited with exit code 143", anywhere)
    assert not is_failstop_line("srun: error: node3: task 0: Exited with exit code 1", anywhere)


def test_task_lists() -> None:
    assert parse_task_list("0-3,5,7-8") == {0, 1, 2, 3, 5, 7, 8}
    assert parse_task_list("137") == {137}
    for bad in ("", "3-1", "a", "1,", "-2", "1-2-3", "0-99999999"):
        assert parse_task_list(bad) is None, bad


def test_the_label_names_the_rank_its_node_and_the_stopped_count() -> None:
    assert R137.label(171) == "171 ranks stopped by fail-stop after rank 137 (node18) failed"
    assert Failure(0).label(1) == "1 rank stopped by fail-stop after rank 0 failed"


LOG = (
    "0: step 30\n"
    "137: Traceback (most recent call last):\n"
    '137:   File "train.py", line 9, in <module>\n'
    "137: RuntimeError: boom\n"
    "srun: error: node18: task 137: Exited with exit code 7\n"
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
    "slurmstepd: error: *** STEP 12.0 ON node1 CANCELLED AT 2026-12-02T22:08:26 ***\n"
    "srun: error: node1: tasks 0-7: Exited with exit code 143\n"
    "3: Traceback (most recent call last):\n"  # another rank's: not a mark
    "srun: error: node18: tasks 136,138-143: Exited with exit code 143\n"
)


def test_the_fold_of_a_block_and_the_widgets_message() -> None:
    fold = fold_text(LOG, R137)
    assert fold.lines == [5, 6, 7, 9] and fold.marks == [1]
    msg = text_message(LOG, reset=True, failure=R137)
    assert (msg["fold"], msg["marks"], msg["reset"]) == ([5, 6, 7, 9], [1], True)
    assert "fold" not in text_message(LOG)  # no failure known: nothing folds


def _status(first: int | None, stopped: int) -> JobStatus:
    ranks = [RankState(i, RankPhase.STOPPED, "node1") for i in range(stopped)]
    if first is not None:
        ranks.append(RankState(first, RankPhase.FAILED, "node18", exit_code=7, ended_at=1.0))
    return JobStatus("12", JobState.FAILED if first is not None else JobState.RUNNING, ranks=tuple(ranks))


def _lines(text: str) -> list[LogLine]:
    from jupyter_tiers.batch.logs import split_log_line

    return [LogLine(t, r) for r, t in (split_log_line(x) for x in text.splitlines())]


def test_the_text_view_holds_stop_reports_until_a_failure_is_known_then_folds_the_kills() -> None:
    fold = FailStopFold()
    lines = _lines(LOG)
    shown = fold.lines(lines[:7])  # no failure known yet: Slurm's reports wait
    assert [ln.text for ln in shown] == ["step 30", "Traceback (most recent call last):",
                                         '  File "train.py", line 9, in <module>', "RuntimeError: boom"]
    assert fold.status(_status(None, 0)) == []
    released = fold.status(_status(137, 9))
    assert [ln.text for ln in released] == ["srun: error: node18: task 137: Exited with exit code 7"]
    assert [ln.text for ln in fold.lines(lines[7:])] == ["Traceback (most recent call last):"]
    assert fold.summary("12") == ("9 ranks stopped by fail-stop after rank 137 (node18) failed "
                                  "(4 Slurm lines not shown; %tiers logs 12 has them)")


def test_without_a_failed_rank_the_text_view_prints_every_held_line() -> None:
    fold = FailStopFold()
    cancel = _lines("slurmstepd: error: *** STEP 12.0 ON node1 CANCELLED AT 2026-12-02T22:08:26 ***\n"
                    "srun: error: node1: tasks 0-7: Exited with exit code 143\n")
    assert fold.lines(cancel) == []
    assert fold.end() == cancel and fold.summary("12") is None


def test_fuzz_the_classifier_never_raises_and_never_folds_the_failures_own_report() -> None:
    rng = random.Random(20261203)
    shapes = [
        "srun: error: {node}: task{s} {tasks}: Exited with exit code {code}",
        "srun: error: {node}: task{s} {tasks}: {sig}",
        "slurmstepd{host}: error: *** STEP {step} ON {node} CANCELLED AT 2026-12-02T22:08:26 ***",
        "srun: Job step aborted: Waiting up to {code} seconds for job step to finish.",
        "srun: Terminating StepId={step}",
        "{rank}: Traceback (most recent call last):",
    ]
    junk = "-,: *01239abnode\t"
    for _ in range(4000):
        failure = Failure(rng.randrange(64), rng.choice([None, "node1", "node2"]))
        tasks = ",".join(rng.choice([str(rng.randrange(64)), f"{rng.randrange(32)}-{rng.randrange(64)}"])
                         for _ in range(rng.randint(1, 3)))
        line = rng.choice(shapes).format(
            node=rng.choice(["node1", "node2", "n-3.x"]), s=rng.choice(["", "s"]), tasks=tasks,
            code=rng.choice([0, 1, 7, 128, 137, 143, 255, 999]),
            sig=rng.choice(["Killed", "Terminated", "Hangup"]),
            host=rng.choice(["", "-node1"]), step=rng.choice(["12.0", "7_3.0", "x"]), rank=failure.rank)
        chars = list(line)
        for _ in range(rng.choice([0, 0, 1, 3])):
            chars[rng.randrange(len(chars))] = rng.choice(junk)
        line = "".join(chars)
        folded = is_failstop_line(line, failure)
        assert not folded or is_stop_report(line), line
        names_it = (f"task {failure.rank}: Exited with exit code 7" in line
                    and (failure.node is None or line.startswith(f"srun: error: {failure.node}: ")))
        assert not (names_it and folded), line
        fold = fold_text(f"{failure.rank}: x\n{line}\n{line}\r\n", failure)
        assert all(0 <= i < 4 for i in fold.lines + fold.marks)
