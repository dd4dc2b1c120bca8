"""Pure logic of arrays and sweeps: the parsers (with seeded fuzzing), the plan, the rendered
script, the array's state, counts and summary line, and the magic's short errors."""

from __future__ import annotations

import random
import string

import pytest
from IPython.core.error import UsageError

from jupyter_tiers.batch.arrays import (
    MAX_TASKS,
    array_state,
    array_summary,
    counts_text,
    parse_array,
    parse_sweep,
    plan_array,
    split_task_ref,
)
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobSpec, JobState, JobStatus, RankPhase, RankState
from jupyter_tiers.slurm.commands import check_job_id, squeue_argv
from jupyter_tiers.slurm.parse import parse_sacct, parse_scontrol_jobs, parse_squeue
from jupyter_tiers.slurm.render import render_job


@pytest.mark.parametrize(("text", "indices", "limit"), [
    ("0-15%4", tuple(range(16)), 4),
    ("1,3,5", (1, 3, 5), None),
    ("0-30:10", (0, 10, 20, 30), None),
    ("7", (7,), None),
    ("3,1-2,3", (1, 2, 3), None),
    ("%4", (), 4),
])
def test_array_syntax(text: str, indices: tuple[int, ...], limit: int | None) -> None:
    assert parse_array(text) == (indices, limit)


@pytest.mark.parametrize("text", ["", "%", "%0", "a-b", "5-3", "0-4:0", "1,,2", "0-15%4%2", " 1", "1 ",
                                  "-1", "0-99999999", "0-4000001", "1;rm -rf /", "１", "0-20000"])
def test_bad_array_is_a_spec_error_naming_what_is_allowed(text: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_array(text)
    assert err.value.field == "array"


def test_sweep_is_a_cartesian_grid_first_name_slowest() -> None:
    names, params, labels = parse_sweep("lr=1e-4,3e-4 bs=32,64 opt=adam")
    assert names == ("lr", "bs", "opt")
    assert params == ({"lr": 1e-4, "bs": 32, "opt": "adam"}, {"lr": 1e-4, "bs": 64, "opt": "adam"},
                      {"lr": 3e-4, "bs": 32, "opt": "adam"}, {"lr": 3e-4, "bs": 64, "opt": "adam"})
    assert labels[3] == "lr=3e-4 bs=64 opt=adam"  # as typed


@pytest.mark.parametrize("text", ["", "lr", "lr=", "=1", "lr=1 lr=2", "lr=1,1", "1x=2", "lr=a b=$(x)",
                                  "lr='1'", "task=1", "a=" + ",".join(map(str, range(MAX_TASKS + 1)))])
def test_bad_sweep_is_a_spec_error(text: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_sweep(text)
    assert err.value.field == "sweep"


def test_plan_rules() -> None:
    plan = plan_array("%2", "lr=1,2 bs=3")
    assert plan is not None and plan.indices == (0, 1) and plan.limit == 2 and plan.slurm_spec == "0-1%2"
    plain = plan_array("1,3-5", None)
    assert plain is not None and plain.params_of(4) == {"task": 4} and plain.slurm_spec == "1,3-5"
    assert plan_array(None, None) is None
    with pytest.raises(SpecError, match="sets only a limit"):
        plan_array("%4", None)
    with pytest.raises(SpecError, match="only a limit"):
        plan_array("0-3", "lr=1,2")


@pytest.mark.parametrize("seed", range(5))
def test_fuzzed_array_and_sweep_text_gives_a_plan_or_a_spec_error(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = string.digits * 3 + "-,:%" * 3 + "=_. abz$'\"\\\n\x00é"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        for array, sweep in ((text, None), ("%3", text), (None, text)):
            try:
                plan = plan_array(array, sweep)
            except SpecError as exc:
                assert exc.field in ("array", "sweep") and exc.problem and "\n" not in exc.problem[:200]
                continue
            assert plan is not None and 1 <= len(plan) <= MAX_TASKS
            assert len(plan.params) == len(plan.labels) == len(plan.indices)
            assert list(plan.indices) == sorted(set(plan.indices))
            assert parse_array(plan.slurm_spec)[0] == plan.indices  # the script says the same


@pytest.mark.parametrize("seed", range(3))
def test_fuzzed_magic_lines_give_only_usage_errors(seed: int, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tests import helpers

    helpers.isolate_tiers(tmp_path, monkeypatch)
    ip = helpers.tiers_shell()
    rng = random.Random(seed)
    values = ["0-3", "%2", "0-15%4", "1,,2", "lr=1,2", "lr=1e-4,3e-4 bs=32,64", "x=", "'", "5-1", "%", ""]
    for _ in range(60):
        words = []
        for _ in range(rng.randint(1, 3)):
            words += [rng.choice(["--array", "--sweep"]), helpers.fuzz_word(rng, values)]
        try:
            ip.run_cell_magic("slurm_train", " ".join(words) + " --dry-run", "print(params)\n")
        except UsageError as exc:
            assert str(exc).strip()


def test_rendered_script_and_task_directories() -> None:
    rendered = render_job(JobSpec("print(params)\n", name="sw", sweep="lr=1,2", array="%1"))
    script = rendered.script
    assert "#SBATCH --array=0-1%1" in script and "#SBATCH --output=tasks/%a/job.log" in script
    assert 'export JT_JOB_DIR="$JT_ARRAY_DIR/tasks/$SLURM_ARRAY_TASK_ID"' in script
    assert rendered.files["tasks/1/params.json"][0] == '{"lr": 2}\n'
    assert rendered.files["cell.py"][0] == "print(params)\n"  # the body, verbatim
    assert "exec(_jt_code)" in rendered.files["main.py"][0]
    shell = render_job(JobSpec("echo $JT_PARAMS\n", shell=True, array="0-1"))
    assert "cell.py" not in shell.files and shell.files["main.sh"][0] == "echo $JT_PARAMS\n"
    plain = render_job(JobSpec("print(1)\n")).script
    assert "--array" not in plain and "#SBATCH --output=job.log" in plain


def test_scheduler_output_of_array_tasks() -> None:
    assert "-r" in squeue_argv(["51"])
    assert check_job_id("51_7") == "51_7"
    with pytest.raises(SpecError):
        check_job_id("51_x")
    rows = parse_squeue("51_0|RUNNING|None|2026|0:05|n1|sw|1\n"
                        "51_[1-3%2]|PENDING|JobArrayTaskLimit|N/A|0:00||sw|1\n")
    assert list(rows) == ["51_0"]
    done = parse_sacct("51_3|FAILED|1:0|00:00:07|n2|None|s|e|sw\n"
                       "51_[4-5]|PENDING|0:0|00:00:00|None|x|s|e|sw\n")
    assert list(done) == ["51_3"] and done["51_3"].exit_code == 1
    ctl = parse_scontrol_jobs("JobId=58 ArrayJobId=51 ArrayTaskId=3 JobState=COMPLETED ExitCode=0:0\n")
    assert list(ctl) == ["51_3"]
    assert split_task_ref("51_7") == ("51", 7) and split_task_ref("hpc/51_7") == ("hpc/51", 7)
    assert split_task_ref("51") is None


def _st(state: JobState, failed_rank: int | None = None) -> JobStatus:
    ranks = (RankState(0, RankPhase.FAILED, node="n1", exit_code=1),) if failed_rank is not None else ()
    return JobStatus(job_id="x", state=state, ranks=ranks, elapsed_s=5)


def test_array_state_and_counts() -> None:
    S = JobState
    assert array_state([S.PENDING, S.PENDING]) is S.PENDING
    assert array_state([S.COMPLETED, S.PENDING]) is S.RUNNING
    assert array_state([S.COMPLETED, S.FAILED, S.CANCELLED]) is S.FAILED
    assert array_state([S.COMPLETED, S.CANCELLED]) is S.CANCELLED
    assert array_state([S.COMPLETED] * 3) is S.COMPLETED
    counts = counts_text([S.COMPLETED] * 14 + [S.CANCELLED, S.FAILED])
    assert counts == "16 tasks: 14 COMPLETED, 1 FAILED, 1 CANCELLED"


def test_summary_line_names_the_first_failed_task_and_the_best_value() -> None:
    plan = plan_array(None, "lr=1e-4,3e-4 bs=32,64")
    assert plan is not None
    tasks = {0: _st(JobState.COMPLETED), 1: _st(JobState.FAILED, 0), 2: _st(JobState.COMPLETED),
             3: _st(JobState.CANCELLED)}
    line = array_summary("51", plan, tasks, failures={1: "rank 0 (n1) exit 1 — ValueError: bad"},
                         metrics={0: ("loss", 0.5), 2: ("loss", 0.0123), 3: ("loss", float("nan"))})
    assert line == ("array 51 (4 tasks) 2 COMPLETED, 1 FAILED (task 1: rank 0 (n1) exit 1 — ValueError: "
                    "bad), 1 CANCELLED; best loss 0.0123 at lr=3e-4 bs=32")
    acc = array_summary("51", plan, tasks, metrics={0: ("acc", 0.5), 2: ("acc", 0.9)})
    assert acc.endswith("best acc 0.9 at lr=3e-4 bs=32")
