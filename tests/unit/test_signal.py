"""--signal SIG@SECONDS: the parser (with a seeded fuzz), the option, the rendered script, and the
rank-file events of a requeued job."""

from __future__ import annotations

import random
import re
import subprocess

import pytest

from jupyter_tiers.batch.jobdir import RANK_SHIM, parse_rank_file, parse_rank_files
from jupyter_tiers.batch.requeue import marker_restart, restart_lines, restart_marker
from jupyter_tiers.batch.signals import MAX_SECONDS, SIGNALS, canonical_signal, parse_signal
from jupyter_tiers.batch.status import merge_status, summary_line
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobSpec, JobState, JobStatus, RankPhase
from jupyter_tiers.slurm.render import render_sbatch
from jupyter_tiers.spec.options import JOB_OPTIONS, convert_values


@pytest.mark.parametrize(("text", "want"), [
    ("USR1@120", ("USR1", 120)),
    ("B:USR1@120", ("USR1", 120)),
    ("b:sigusr2@0", ("USR2", 0)),
    ("SIGHUP@65535", ("HUP", 65535)),
    ("10@30", ("USR1", 30)),
    ("12", ("USR2", 60)),
    ("URG", ("URG", 60)),
    (" XCPU@5 ", ("XCPU", 5)),
])
def test_parse_accepts(text: str, want: tuple[str, int]) -> None:
    assert parse_signal(text) == want


@pytest.mark.parametrize(("text", "says"), [
    ("TERM@60", "Slurm already sends TERM"),
    ("KILL@60", "cannot be caught"),
    ("9@60", "use SIG@SECONDS"),
    ("USR1@65536", "more than Slurm's 65535"),
    ("USR1@-1", "is not allowed"),
    ("R:USR1@60", "is not allowed"),
    ("USR1@60; rm -rf ~", "is not allowed"),
    ("USR1@60\n", "is not allowed"),
    ("", "is not allowed"),
    ("@60", "is not allowed"),
])
def test_parse_refuses_with_a_short_message(text: str, says: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_signal(text)
    message = str(info.value)
    assert message.startswith("signal: ") and says in message
    assert "\n" not in message and len(message) < 300


def test_parse_refuses_non_text() -> None:
    with pytest.raises(SpecError, match="expected text"):
        parse_signal(60)


_CANON = re.compile(r"(USR1|USR2|HUP|URG|ALRM|XCPU)@\d{1,5}")


def test_fuzz_parse_signal_seeded() -> None:
    """Random words from the grammar's alphabet: every answer is a canonical value within range
    or a one-line SpecError; nothing else escapes, and the canonical form parses to itself."""
    rng = random.Random(1107)
    alphabet = "BRSIGUSR12@:0123456789 -;$`'\"\n\tbsigusrTERMKILLHUPURGALRMXCPU"
    pieces = ["B:", "SIG", "USR1", "USR2", "HUP", "TERM", "@", "10", "65535", "65536", "0", ":", "R:"]
    accepted = 0
    for _ in range(5000):
        if rng.random() < 0.5:
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
        else:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        try:
            value = canonical_signal(text)
        except SpecError as exc:
            assert str(exc).startswith("signal: ") and "\n" not in str(exc)
            continue
        accepted += 1
        assert value is not None and _CANON.fullmatch(value), (text, value)
        name, secs = parse_signal(value)
        assert name in SIGNALS and 0 <= secs <= MAX_SECONDS
        assert canonical_signal(value) == value
    assert accepted > 100  # the generator reaches the valid part of the grammar too


def test_option_converts_and_profile_default_accepted() -> None:
    assert convert_values({"signal": "b:10@90"}, JOB_OPTIONS) == {"signal": "USR1@90"}
    assert convert_values({"signal": "USR2"}, JOB_OPTIONS, from_yaml=True) == {"signal": "USR2@60"}
    with pytest.raises(SpecError, match="signal"):
        convert_values({"signal": "KILL@1"}, JOB_OPTIONS)


def test_render_traps_in_the_batch_shell_and_forwards() -> None:
    script = render_sbatch(JobSpec("print(1)", nodes=2, signal="USR1@120"))
    assert "#SBATCH --signal=B:USR1@120" in script
    assert "trap 'scancel --signal=USR1 \"$SLURM_JOB_ID\" 2>/dev/null || true' USR1" in script
    launch = [ln for ln in script.splitlines() if ln.startswith("srun ")]
    assert len(launch) == 1 and launch[0].endswith(" &")
    assert script.rstrip().endswith('wait "$jt_launcher"; exit $?')
    plain = render_sbatch(JobSpec("print(1)", nodes=2))
    assert "--signal" not in plain and "jt_launcher" not in plain and "JT_SIGNAL" not in plain
    torch = render_sbatch(JobSpec("print(1)", nodes=2, launcher="torchrun", nproc_per_node=2,
                                  signal="USR2@5"))
    assert "bash -c 'trap \"\" USR2; exec \"$@\"' jt-agent torchrun" in torch


def test_render_script_is_valid_bash() -> None:
    for spec in (JobSpec("x", requeue=True, signal="HUP@1"),
                 JobSpec("x", launcher="torchrun", signal="USR1@1", requeue=True)):
        done = subprocess.run(["bash", "-n"], input=render_sbatch(spec), text=True, capture_output=True)
        assert done.returncode == 0, done.stderr
    assert subprocess.run(["bash", "-n"], input=RANK_SHIM, text=True).returncode == 0


def test_signal_and_passthrough_signal_are_not_both_allowed() -> None:
    with pytest.raises(SpecError, match="either --signal or --sbatch"):
        render_sbatch(JobSpec("x", signal="USR1@60", sbatch_options=("--signal=B:USR2@60",)))


# --- requeue: markers, rank events, status -----------------------------------------------------


def test_marker_round_trip_and_lookalikes() -> None:
    assert restart_marker(3) == "— restart 3 —"
    assert marker_restart("— restart 3 —") == 3
    for text in ("restart 3", "— restart x —", "0: — restart 3 —", "— restart 3 — and more"):
        assert marker_restart(text) is None
    assert any("— restart %s —" in line for line in restart_lines("job.log"))


def test_rank_events_across_runs() -> None:
    text = ("start 10.0 node1 0\nsignal 15 20.0\nrequeue 1 30.0\n")
    state = parse_rank_file(0, text)
    assert (state.phase, state.attempt, state.node) == (RankPhase.WAITING, 1, None)
    state = parse_rank_file(0, text + "start 40.0 node3 1\n")
    assert (state.phase, state.attempt, state.node) == (RankPhase.RUNNING, 1, "node3")
    old = parse_rank_file(0, "start 10.0 node1\nexit 0 11.0\n")  # a shim from before runs
    assert (old.phase, old.attempt) == (RankPhase.EXITED, 0)
    many = parse_rank_files("@@ /j\n/j/ranks/0:start 1 n1 0\n/j/ranks/0:requeue 2 5\n"
                            "/j/ranks/0:start 6 n2 2\n")
    assert many["/j"][0].attempt == 2


def test_status_counts_restarts_and_stays_pending_between_runs() -> None:
    running = merge_status("7", None, {0: parse_rank_file(0, "start 1 n1 0\n")}, 1)
    running = merge_status("7", _sched(JobState.RUNNING, "T1"), None, 1, running)
    # scontrol requeue: squeue says PENDING (expected start: the requeue's begin time), the old
    # run's rank file still says running
    pending = merge_status("7", _sched(JobState.PENDING, "T2"), None, 1, running)
    assert pending.state is JobState.PENDING and pending.restarts == 1
    assert pending.ranks[0].phase is RankPhase.WAITING
    # the next run: the batch shell writes "requeue 1", then the rank starts again
    again = merge_status("7", None, {0: parse_rank_file(0, "start 1 n1 0\nrequeue 1 5\nstart 6 n2 1\n")},
                         1, pending)
    assert again.state is JobState.RUNNING and again.restarts == 1
    done = merge_status("7", _sched(JobState.COMPLETED), None, 1, again)
    assert summary_line(done).startswith("job 7 COMPLETED after 1 restart in ")
    failed = JobStatus("8", JobState.FAILED, restarts=2)
    assert summary_line(failed).startswith("job 8 FAILED after 2 restarts")


def test_reattach_learns_restarts_from_the_rank_files() -> None:
    ranks = {0: parse_rank_file(0, "start 1 n1 0\nrequeue 1 5\nstart 6 n2 1\n")}
    status = merge_status("7", _sched(JobState.RUNNING), ranks, 1, None)
    assert status.restarts == 1


def test_no_restart_counted_when_the_rank_files_ran_ahead_of_squeue() -> None:
    pending = merge_status("7", _sched(JobState.PENDING, "T0"), None, 1)
    ahead = merge_status("7", None, {0: parse_rank_file(0, "start 1 n1 0\n")}, 1, pending)
    assert ahead.state is JobState.RUNNING  # the rank files prove it runs
    late = merge_status("7", _sched(JobState.PENDING, "T0"), None, 1, ahead)
    assert late.restarts == 0


def test_a_requeue_nobody_watched_is_told_by_rank_files_read_before_the_scheduler() -> None:
    """A notebook closed while the job was requeued: its rank files (read first) say run 0 had
    started, and the scheduler asked after them says it waits: requeued, not running."""
    run0 = {0: parse_rank_file(0, "start 1 n1 0\n"), 1: parse_rank_file(1, "start 1 n2 0\nexit 143 9\n")}
    for state in (JobState.PENDING, JobState.REQUEUED):
        between = merge_status("7", _sched(state, None), run0, 2, ranks_read_first=True)
        assert (between.state, between.restarts) == (state, 1), between
        assert [(r.phase, r.attempt) for r in between.ranks] == [(RankPhase.WAITING, 1)] * 2
    # Requeued again after run 1 had started (the registry knew of no restart): the second.
    run1 = {0: parse_rank_file(0, "start 1 n1 0\nrequeue 1 5\nstart 6 n2 1\n")}
    assert merge_status("7", _sched(JobState.PENDING), run1, 1, ranks_read_first=True).restarts == 2
    # The run the registry already counted, waiting to start: no new restart.
    waiting = {0: parse_rank_file(0, "start 1 n1 0\nrequeue 1 5\n")}
    assert merge_status("7", _sched(JobState.PENDING), waiting, 1, restarts=1,
                        ranks_read_first=True).restarts == 1
    # PREEMPTED without a requeue is an end, not a wait: no restart, the ranks stopped.
    ended = merge_status("7", _sched(JobState.PREEMPTED), run0, 2, ranks_read_first=True)
    assert (ended.state, ended.restarts) == (JobState.PREEMPTED, 0), ended
    assert [r.phase for r in ended.ranks] == [RankPhase.STOPPED, RankPhase.FAILED]
    # A fresh job: no rank started, so "pending" is only pending.
    fresh = merge_status("7", _sched(JobState.PENDING), {0: parse_rank_file(0, "")}, 1, ranks_read_first=True)
    assert (fresh.state, fresh.restarts) == (JobState.PENDING, 0)
    # Read in the other order the same answer is ambiguous (the job may have started meanwhile):
    # the rank files win and nothing is counted.
    ambiguous = merge_status("7", _sched(JobState.PENDING), run0, 2)
    assert (ambiguous.state, ambiguous.restarts) == (JobState.RUNNING, 0)
    # Counted once when the watcher also saw the run: no second restart from the same answer.
    running = merge_status("7", _sched(JobState.RUNNING, "T1"), run0, 2)
    once = merge_status("7", _sched(JobState.PENDING, "T2"), run0, 2, running, ranks_read_first=True)
    assert once.restarts == 1


def _sched(state: JobState, start: str | None = None):
    from jupyter_tiers.core.model import SchedulerInfo

    return SchedulerInfo(job_id="7", state=state, start_time=start)


def test_registry_records_restarts_and_migrates_a_layout_2_file(tmp_path) -> None:
    import sqlite3

    from jupyter_tiers.config.registry import JobRecord, Registry

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE jobs (key TEXT PRIMARY KEY, kind TEXT NOT NULL DEFAULT 'job', profile TEXT NOT NULL,"
        " tier TEXT NOT NULL, job_id TEXT NOT NULL, name TEXT NOT NULL, jobdir TEXT,"
        " submitted_at REAL NOT NULL, state TEXT NOT NULL, nodelist TEXT,"
        " world_size INTEGER NOT NULL DEFAULT 0, spec TEXT NOT NULL, script TEXT NOT NULL,"
        " updated_at REAL NOT NULL, detail TEXT);"
        "INSERT INTO jobs VALUES ('box/5', 'job', 'box', 'slurm', '5', 'old', '/j', 1, 'RUNNING',"
        " NULL, 1, '{}', '', 1, NULL);"
        "PRAGMA user_version = 2;")
    db.close()
    reg = Registry(path)
    assert reg.get("box/5").restarts == 0 and reg.get("box/5").name == "old"
    reg.update("box/5", state="PENDING", restarts=2)
    reg.update("box/5", state="RUNNING")  # no count given: kept
    assert (reg.get("box/5").state, reg.get("box/5").restarts) == ("RUNNING", 2)
    reg.add(JobRecord(profile="box", tier="slurm", job_id="6", name="new", restarts=1))
    assert reg.get("box/6").restarts == 1
    # a status without the watcher (a reattached kernel between runs) keeps the registry's count
    assert merge_status("5", _sched(JobState.PENDING), None, 1, restarts=2).restarts == 2


def test_squeue_preempted_reads_as_requeued_for_requeue_jobs_only() -> None:
    from jupyter_tiers.batch.requeue import requeue_pending
    from jupyter_tiers.core.model import SchedulerInfo

    found = {"1": SchedulerInfo("1", JobState.PREEMPTED), "2": SchedulerInfo("2", JobState.PREEMPTED),
             "3": SchedulerInfo("3", JobState.RUNNING)}
    out = requeue_pending(found, ["1", "3"])
    assert [out[i].state for i in "123"] == [JobState.REQUEUED, JobState.PREEMPTED, JobState.RUNNING]
    assert not JobState.REQUEUED.terminal and JobState.PREEMPTED.terminal
