"""The BatchTier contract (jupyter_tiers/engine/tier.py), written once and run on every batch backend
(conftest.py: ``slurm`` on the fake cluster, ``slurm_here`` on the real test cluster through
the local transport, ``local`` with real supervisors).

Each test states one promise of a public verb, as the docstrings of BatchTier and Job give it:
the states a job reaches, what its log, files and status say, the errors users see (words
included), and what is safe to do twice. Where a backend declares it cannot (CAPABILITIES), the
test asserts the declared refusal instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.batch.history import make_query
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.errors import JobNotFound, SpecError, TiersError, Unsupported
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase
from jupyter_tiers.engine.handles import Job
from tests.contract.conftest import GUARD, BatchBackend
from tests.helpers import wait_for

# Prints, writes a file beside itself and a checkpoint, and ends well.
GOOD = """\
import os, pathlib
print("hello contract", flush=True)
pathlib.Path("result.txt").write_text("42\\n")
ckpt = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"], "step-1")
ckpt.write_text("weights\\n")
print("done", flush=True)
"""
FAILS = "import sys\nprint('about to fail', flush=True)\nsys.exit(3)\n"
SLEEPS = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"


def run_to_end(batch: BatchBackend, script: str, name: str) -> tuple[Job, JobStatus]:
    job = batch.tier.submit(batch.tier.make_spec(script, name=name))
    status = job.wait(timeout=GUARD)
    assert status.state.terminal, f"{name} did not end: {status}"
    return job, status


@pytest.fixture(scope="module")
def finished(batch: BatchBackend) -> tuple[Job, JobStatus]:
    """One job of GOOD run to its end (shared by the tests that only read it)."""
    return run_to_end(batch, GOOD, "contract-good")


# --- submit / list / attach ----------------------------------------------------------------
def test_submit_records_the_job_and_attach_finds_it(batch: BatchBackend,
                                                    finished: tuple[Job, JobStatus]) -> None:
    job, _ = finished
    assert job.record.tier == batch.tier.backend == batch.name.split("_")[0]  # as the registry records it
    assert job.record.profile == batch.tier.name and job.record.world_size == 1
    listed = batch.tier.registry.list(limit=100, profile=batch.tier.name, kind="job")
    assert job.key in [r.key for r in listed]
    again = batch.tier.attach(job.id)
    assert isinstance(again, Job) and again.key == job.key and again.name == "contract-good"
    assert "contract-good" in again.script  # what was submitted, as text
    assert batch.tier.attach(job.key).key == job.key


def test_attach_of_an_unknown_job_names_it(batch: BatchBackend) -> None:
    with pytest.raises(JobNotFound, match="no job '999999' in the registry"):
        batch.tier.attach("999999")


def test_make_spec_refuses_an_unknown_option_naming_the_known_ones(batch: BatchBackend) -> None:
    with pytest.raises(TiersError, match=r"nodez: unknown option; known: .*nodes"):
        batch.tier.make_spec("print(1)", nodez=2)


def test_submit_refuses_a_bad_value_naming_it_and_records_nothing(batch: BatchBackend) -> None:
    before = len(batch.tier.registry.list(limit=1000, profile=batch.tier.name))
    with pytest.raises(SpecError, match="nodes"):
        batch.tier.submit(batch.tier.make_spec("print(1)", name="contract-bad", nodes=0))
    assert len(batch.tier.registry.list(limit=1000, profile=batch.tier.name)) == before


# --- status --------------------------------------------------------------------------------
def test_a_job_completes_with_its_rank_exited_and_the_state_recorded(
        batch: BatchBackend, finished: tuple[Job, JobStatus]) -> None:
    job, status = finished
    assert status.state is JobState.COMPLETED, job.logs()
    assert status.exit_code in (0, None) and status.world_size == 1
    assert [r.phase for r in status.ranks] == [RankPhase.EXITED]
    assert batch.tier.registry.get(job.key).state == "COMPLETED"
    assert job.status().state is JobState.COMPLETED  # asked again: still the same


def test_a_failing_job_ends_failed_with_the_exit_code_of_its_rank(batch: BatchBackend) -> None:
    job, status = run_to_end(batch, FAILS, "contract-fails")
    assert status.state is JobState.FAILED
    assert [(r.phase, r.exit_code) for r in status.ranks] == [(RankPhase.FAILED, 3)]
    assert status.first_failure is not None and status.first_failure.rank == 0
    assert "0: about to fail" in job.logs()


def test_status_of_several_jobs_is_one_call_keyed_by_id(batch: BatchBackend,
                                                       finished: tuple[Job, JobStatus]) -> None:
    job, _ = finished
    other = batch.tier.submit(batch.tier.make_spec("print('other')", name="contract-other"))
    got = batch.tier.status([job.record, other.record])
    assert set(got) == {job.id, other.id}
    assert got[job.id].state is JobState.COMPLETED
    assert got[other.id].job_id == other.id
    assert other.wait(timeout=GUARD).state is JobState.COMPLETED


# --- logs ----------------------------------------------------------------------------------
def test_logs_are_rank_prefixed_and_a_rank_filter_drops_the_prefix(finished: tuple[Job, JobStatus]) -> None:
    job, _ = finished
    merged = job.logs().splitlines()
    assert merged.index("0: hello contract") < merged.index("0: done")
    assert job.logs(rank=0).splitlines() == ["hello contract", "done"]
    assert job.logs(rank=1) == ""  # no such rank: nothing, not an error
    assert job.logs(tail=1).splitlines() == [merged[-1]]
    assert job.logs(tail=0) == ""
    assert job.logs(rank=0, tail=1) == "done\n"
    assert "".join(job.iter_logs()) == job.logs()
    size = job.tier.log_size(job.record)
    assert size == len(job.logs().encode()) and job.tier.read_log(job.record, size) == b""


def test_follow_yields_every_line_until_the_job_ends(batch: BatchBackend) -> None:
    script = "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.3)\n"
    job = batch.tier.submit(batch.tier.make_spec(script, name="contract-follow"))
    lines = [(ln.rank, ln.text) for ln in job.follow(timeout=GUARD)]
    assert [x for x in lines if x[0] == 0] == [(0, "line 0"), (0, "line 1"), (0, "line 2")]
    assert job.status().state is JobState.COMPLETED
    size = job.tier.log_size(job.record)
    assert list(job.follow(offset=size, timeout=GUARD)) == []  # ended: nothing more to give


# --- cancel --------------------------------------------------------------------------------
def test_cancel_stops_a_running_job_and_is_safe_twice(batch: BatchBackend) -> None:
    job = batch.tier.submit(batch.tier.make_spec(SLEEPS, name="contract-sleeps"))
    wait_for(lambda: "0: started" in job.logs(), "the job to start")
    assert job.status().state is JobState.RUNNING
    assert job.wait(timeout=0.3).state is JobState.RUNNING  # a wait that times out: the last status
    job.cancel()
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.CANCELLED
    job.cancel()  # already ended: nothing to do, no error
    assert job.status().state is JobState.CANCELLED
    assert batch.tier.registry.get(job.key).state == "CANCELLED"
    assert job.stop() == f"cancel requested for job {job.id} (contract-sleeps)"


def test_cancel_of_a_job_the_backend_never_had_is_a_no_op(batch: BatchBackend, tmp_path: Path) -> None:
    ghost = JobRecord(profile=batch.tier.name, tier=batch.tier.backend, job_id="999999", name="ghost",
                      jobdir=str(tmp_path / "never"))
    batch.tier.cancel(ghost)  # scancel: nothing to do; locally: no job directory


def test_cancel_of_a_completed_job_changes_nothing(finished: tuple[Job, JobStatus]) -> None:
    job, _ = finished
    job.cancel()
    assert job.status().state is JobState.COMPLETED


# --- stacks --------------------------------------------------------------------------------
# Even ranks block in one function, odd ranks in another; each says it is there with a file.
TWO_PLACES = """\
import os, time
rank = int(os.environ["RANK"])
here = os.environ["JT_JOB_DIR"]
def wait_in_a():
    open(os.path.join(here, f"up-{rank}"), "w").close()
    while not os.path.exists(os.path.join(here, "stop")):
        time.sleep(0.05)
def wait_in_b():
    open(os.path.join(here, f"up-{rank}"), "w").close()
    while not os.path.exists(os.path.join(here, "stop")):
        time.sleep(0.05)
(wait_in_a if rank % 2 == 0 else wait_in_b)()
"""


def test_stacks_of_a_running_job_are_grouped_by_place(batch: BatchBackend) -> None:
    job = batch.tier.submit(batch.tier.make_spec(TWO_PLACES, name="contract-stacks", ntasks_per_node=2))
    here = Path(job.record.jobdir)
    try:
        wait_for(lambda: all((here / f"up-{r}").exists() for r in (0, 1)), "both ranks in place", GUARD)
        stacks = job.stacks(timeout=GUARD)
        assert [g.ranks for g in stacks.groups] == [(0,), (1,)], str(stacks)
        # the cell's lines as the user sees them (the magic line is line 1): the call, then the
        # loop of the function (its while or its sleep)
        for group, func, lines in ((stacks.groups[0], "wait_in_a", (7, 8)),
                                   (stacks.groups[1], "wait_in_b", (11, 12))):
            (thread,) = group.threads
            assert (thread.frames[0].cell_line, thread.frames[0].func) == (13, "<module>"), str(stacks)
            assert thread.frames[1].func == func and thread.frames[1].cell_line in lines, str(stacks)
        text = str(stacks)
        assert "rank 0 (" in text and "\nrank 1 (" in text and "cell line 13, in <module>" in text
        assert "runpy" not in text and not stacks.missing
    finally:
        (here / "stop").write_text("")
    assert job.wait(timeout=GUARD).state is JobState.COMPLETED, job.logs()
    after = job.stacks(timeout=GUARD)
    assert not after.groups and [why for _, _, why in after.missing] == ["exited 0", "exited 0"]
    assert "no rank is running" in str(after)


# --- files ---------------------------------------------------------------------------------
def test_files_lists_the_job_and_checkpoint_directories(finished: tuple[Job, JobStatus]) -> None:
    job, _ = finished
    names = {f.name: f.size for f in job.files()}
    assert names["result.txt"] == 3 and names["checkpoints/step-1"] == 8
    assert [f.name for f in job.files("*.txt")] == ["result.txt"]
    assert job.files("nothing-*") == []


def test_download_fetches_matching_files_and_refuses_when_none_match(
        finished: tuple[Job, JobStatus], tmp_path: Path) -> None:
    job, _ = finished
    paths = job.download("step-*", str(tmp_path))
    assert [Path(p).read_text() for p in paths] == ["weights\n"]
    assert [Path(p).read_text() for p in job.download("result.txt", str(tmp_path / "a"))] == ["42\n"]
    with pytest.raises(TiersError, match=r"no file matches 'nothing-\*'; job.files\(\) lists them"):
        job.download("nothing-*", str(tmp_path))


def test_upload_without_checkpoint_to_says_there_is_nothing_to_upload(
        finished: tuple[Job, JobStatus]) -> None:
    job, _ = finished
    with pytest.raises(TiersError, match="was submitted without --checkpoint-to; nothing to upload"):
        job.upload()


# --- history, output_tail, login: declared capabilities ------------------------------------
def test_history_lists_our_job_or_refuses_without_accounting(batch: BatchBackend,
                                                            finished: tuple[Job, JobStatus]) -> None:
    job, _ = finished
    if not batch.can("history"):
        with pytest.raises(Unsupported, match="job history comes from Slurm accounting"):
            batch.tier.history(days=1)
        return
    # Every lane submits as root, so the window is asked with a limit far above their count; and
    # for a moment after a job ends slurmdbd leaves it out of a time-window query (no Eligible
    # time yet), so the query is repeated until it lists the job (a bound, not a timed assertion).
    def listed() -> list:
        return [r for r in batch.tier.history(make_query(days=1, limit=10_000)) if r.job_id == job.id]

    mine = wait_for(listed, f"sacct's last day to list job {job.id}", timeout=180, interval=1.0)[0]
    assert mine.ours and mine.key == job.key and mine.state == "COMPLETED" and mine.name == "contract-good"
    assert [r.job_id for r in batch.tier.history(job=job.id)] == [job.id]


def test_output_tail_reads_a_history_job_or_refuses(batch: BatchBackend,
                                                   finished: tuple[Job, JobStatus]) -> None:
    job, _ = finished
    if not batch.can("history"):
        rows: list[object] = [object()]
        with pytest.raises(Unsupported, match="job history comes from Slurm accounting"):
            batch.tier.output_tail(rows[0], 5)  # type: ignore[arg-type]  # refused before it is read
        return
    row = batch.tier.history(job=job.id)[0]
    path, text = batch.tier.output_tail(row, 1)
    assert path == f"{job.record.jobdir}/{Path(path).name}" and text is not None
    assert text.splitlines() == [job.logs().splitlines()[-1]]


def test_login_connects_or_says_only_slurm_logs_in(batch: BatchBackend) -> None:
    if not batch.can("login"):
        with pytest.raises(Unsupported, match="only Slurm profiles log in"):
            batch.tier.login()
        return
    assert batch.tier.login().startswith(f"{batch.tier.name} ")
