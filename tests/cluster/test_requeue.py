"""--signal and --requeue on the real Slurm test cluster: the signal reaches every rank's program
(once), and a job requeued mid-run stays one job with one continuous log, its restart marked."""

from __future__ import annotations

import functools
import io
import textwrap
import threading
from pathlib import Path

import pytest

from jupyter_tiers.batch.requeue import restart_marker
from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase
from jupyter_tiers.faces.widgets.text import TextView
from jupyter_tiers.slurm.tier import SlurmTier
from tests import helpers
from tests.local.test_job_view import RecordingView

pytestmark = pytest.mark.cluster

wait_for = functools.partial(helpers.wait_for, interval=0.5)

# Every rank: note USR1 in a handler, say "ready", wait for it (up to ~5 minutes), then report how
# many times it came (a second delivery would show as 2) and the run it belongs to.
CATCHER = textwrap.dedent(
    """\
    import os, signal, time
    got = []
    signal.signal(signal.SIGUSR1, lambda *a: got.append(time.time()))
    print("ready", flush=True)
    for _ in range(3000):
        if got:
            break
        time.sleep(0.1)
    time.sleep(2)  # a duplicate delivery would land here
    print(f"got USR1 x{len(got)}" if got else "no USR1", flush=True)
    """
)


def _ready(job, world: int) -> bool:
    log = job.logs()
    return all(f"{r}: ready\n" in log for r in range(world))


def _assert_every_rank_got_it_once(job, world: int) -> None:
    for r in range(world):
        lines = job.logs(rank=r).splitlines()
        assert lines == ["ready", "got USR1 x1"], (r, job.logs())


def _send_batch(box: SlurmTier, job_id: str, sig: str = "USR1") -> None:
    # What the --signal timer does: signal the batch shell only (B:), by hand.
    result = box.transport.run(["scancel", "--batch", f"--signal={sig}", job_id], check=False)
    assert result.exit_status == 0, result.stderr


def test_signal_reaches_every_srun_rank_once(box: SlurmTier) -> None:
    job = box.submit(box.make_spec(CATCHER, name="sig-srun", nodes=2, ntasks_per_node=2,
                                   signal="USR1@30"))
    assert "#SBATCH --signal=B:USR1@30" in job.script
    wait_for(lambda: _ready(job, 4), timeout=180)
    _send_batch(box, job.id)
    status = job.wait(timeout=180)
    assert status.state is JobState.COMPLETED, job.logs()
    assert [r.phase for r in status.ranks] == [RankPhase.EXITED] * 4
    _assert_every_rank_got_it_once(job, 4)


def test_signal_reaches_torchrun_ranks_and_the_agent_survives(box: SlurmTier) -> None:
    pytest.importorskip("torch", reason="torch is not installed in the venv: torchrun is missing")
    job = box.submit(box.make_spec(CATCHER, name="sig-torchrun", nodes=2, launcher="torchrun",
                                   nproc_per_node=2, signal="USR1@30"))
    wait_for(lambda: _ready(job, 4), timeout=240)
    _send_batch(box, job.id)
    status = job.wait(timeout=240)
    assert status.state is JobState.COMPLETED, job.logs()
    _assert_every_rank_got_it_once(job, 4)


def test_signal_reaches_a_bash_body(box: SlurmTier) -> None:
    body = textwrap.dedent(
        """\
        n=0
        trap 'n=$((n + 1))' USR2
        echo ready
        for i in $(seq 3000); do [ "$n" -gt 0 ] && break; sleep 0.1; done
        sleep 2
        echo "got USR2 x$n"
        """
    )
    job = box.submit(box.make_spec(body, name="sig-shell", nodes=2, shell=True, signal="USR2@30"))
    wait_for(lambda: _ready(job, 2), timeout=180)
    _send_batch(box, job.id, "USR2")
    status = job.wait(timeout=180)
    assert status.state is JobState.COMPLETED, job.logs()
    for r in range(2):
        lines = job.logs(rank=r).splitlines()
        # slurmstepd signals every process of the step, as Slurm does: the body's foreground
        # `sleep` dies of it and bash says so; the body's own trap ran once.
        assert lines[0] == "ready" and lines[-1] == "got USR2 x1", job.logs()
        assert set(lines[1:-1]) <= {"User defined signal 2"}, job.logs()


def test_signal_timer_before_the_time_limit(box: SlurmTier) -> None:
    """The real timer: a 2-minute limit and USR1@100 — Slurm sends it some 20-80 s in (it checks
    about every 30 s); every rank checkpoints and exits before the limit."""
    job = box.submit(box.make_spec(CATCHER, name="sig-timer", nodes=2, time="00:02:00",
                                   signal="USR1@100"))
    status = job.wait(timeout=300)
    assert status.state is JobState.COMPLETED, job.logs()
    _assert_every_rank_got_it_once(job, 2)


REQUEUED = textwrap.dedent(
    """\
    import os, time
    run = os.environ["JT_RESTART_COUNT"]
    print(f"run {run} slurm {os.environ.get('SLURM_RESTART_COUNT', 'unset')} begins", flush=True)
    if run == "0":
        time.sleep(600)  # requeued before this ends
    print(f"run {run} done", flush=True)
    """
)


def test_requeue_mid_job_keeps_one_job_and_one_log(box: SlurmTier, tmp_path: Path) -> None:
    job = box.submit(box.make_spec(REQUEUED, name="requeue", nodes=2, requeue=True))
    # The notebook's two views of it: the widget (its messages recorded) and the text view.
    view = RecordingView(job)
    printed = io.StringIO()
    text_view = threading.Thread(target=TextView(job, printed).run, kwargs={"timeout": 600},
                                 daemon=True)
    text_view.start()
    seen: list[JobStatus] = []
    lines: list[str] = []
    ended = threading.Event()
    box.watcher.watch(job.record, on_status=seen.append, on_end=lambda s: ended.set(),
                      on_lines=lambda batch: lines.extend(ln.text if ln.rank is None else
                                                          f"{ln.rank}: {ln.text}" for ln in batch))
    wait_for(lambda: all(f"{r}: run 0 slurm unset begins" in lines for r in range(2)), timeout=180)
    # The log follower is not the status watcher: wait until the watcher too has seen run 0 run
    # (it counts a restart as a PENDING after a run; one it never saw run counts when run 1 starts).
    wait_for(lambda: any(s.state is JobState.RUNNING for s in seen), timeout=180)
    # requeuehold: requeued, then held until released below. A plain requeue would start the
    # next run cred_expire+1 s later (31 s here), which a busy machine's reattach could miss.
    result = box.transport.run(["scontrol", "requeuehold", job.id], check=False)
    assert result.exit_status == 0, result.stderr
    # A restarted kernel between the runs: a new tier and registry connection reattaches (the
    # watcher recorded the restart) and its widget follows the rest.
    wait_for(lambda: any(s.state is JobState.PENDING and s.restarts == 1 for s in seen), timeout=180)
    other = SlurmTier(box.profile, Registry(tmp_path / "registry.sqlite"))
    try:
        again = other.attach(job.id)
        between = again.status()
        assert (between.state, between.restarts) == (JobState.PENDING, 1), between
        reattached = RecordingView(again, log_offset=None)
        result = box.transport.run(["scontrol", "release", job.id], check=False)
        assert result.exit_status == 0, result.stderr
        # Slurm holds a requeued job cred_expire+1 s (its begin time) before the next run: 31 s on
        # the test cluster (cluster.sh), 121 s on a default Slurm; the bounds allow the default.
        assert ended.wait(420), [s.state for s in seen]
        assert reattached.wait(timeout=120) is not None
        assert reattached.restarts == 1 and "COMPLETED after 1 restart" in reattached.summary
        texts = [text for _, text, _ in reattached.rows()]
        assert restart_marker(1) in texts and "run 1 done" in texts, texts
        assert again.status().restarts == 1
    finally:
        other.close()
    final = seen[-1]
    assert final.state is JobState.COMPLETED and final.restarts == 1, final
    first_pending = next(i for i, s in enumerate(seen) if s.state is JobState.PENDING and s.restarts)
    assert all(r.phase is RankPhase.WAITING for r in seen[first_pending].ranks)  # the new run's grid
    assert [r.attempt for r in final.ranks] == [1, 1]
    assert [r.phase for r in final.ranks] == [RankPhase.EXITED] * 2
    # One continuous log: run 0's lines, the marker, run 1's lines (live, and read afterwards).
    marker = restart_marker(1)
    for text in (lines, job.logs().splitlines()):
        at = text.index(marker)
        assert {f"{r}: run 0 slurm unset begins" for r in range(2)} <= set(text[:at]), text
        assert {f"{r}: run 1 slurm 1 begins" for r in range(2)} <= set(text[at:]), text
        assert {f"{r}: run 1 done" for r in range(2)} <= set(text[at:]), text
        assert text.count(marker) == 1
    assert summary_line(final).startswith(f"job {job.id} COMPLETED after 1 restart in ")
    assert box.registry.get(job.id).restarts == 1
    # The widget: restart count in the header, the marker as its own (styled) line, the summary.
    assert view.wait(timeout=120) is not None
    assert view.restarts == 1 and view.state == "COMPLETED"
    assert "COMPLETED after 1 restart" in view.summary
    rows = view.rows()
    assert [None, marker, False] in rows
    assert rows.index([None, marker, False]) > rows.index([0, "run 0 slurm unset begins", False])
    text_view.join(120)
    out = printed.getvalue().splitlines()
    assert marker in out and out[-1].startswith(f"job {job.id} COMPLETED after 1 restart in "), out
    states = [ln for ln in out if ln.startswith("[")]
    assert any(ln.startswith("[PENDING") and ", restart 1]" in ln for ln in states), states


@pytest.mark.timeout(1200)  # the bounds below allow for the other lanes' jobs on node3 and node4
def test_preempted_job_comes_back_and_completes(box: SlurmTier) -> None:
    """Real preemption: the cluster in a box's partition "preemptible" (PriorityTier 1,
    PreemptMode=REQUEUE) gives way to a job of the default partition that needs its nodes."""
    nodes = ("--nodelist=node3,node4",)
    job = box.submit(box.make_spec(REQUEUED, name="preemptible", nodes=2, requeue=True,
                                   partition="preemptible", exclusive=True, sbatch_options=nodes))
    seen: list[JobStatus] = []
    ended = threading.Event()
    box.watcher.watch(job.record, on_status=seen.append, on_end=lambda s: ended.set(),
                      follow_logs=False)
    # Both whole nodes must be free of the other lanes' jobs first, and the default partition's
    # jobs go ahead of this one: bounds of minutes, not seconds.
    wait_for(lambda: all(f"{r}: run 0 slurm unset begins\n" in job.logs() for r in range(2)),
             timeout=420, interval=1.0)
    urgent = box.submit(box.make_spec("print('urgent work done')", name="urgent", nodes=2,
                                      partition="debug", exclusive=True, sbatch_options=nodes))
    assert urgent.wait(timeout=420).state is JobState.COMPLETED, urgent.logs()
    assert ended.wait(420), [s.state for s in seen]
    final = seen[-1]
    # (another test's job on these nodes could preempt it once more: at least one restart)
    assert final.state is JobState.COMPLETED and final.restarts >= 1, final
    # The requeued job pends 31 s (BeginTime: cred_expire+1) and run 1 ends at once; a watcher
    # that stalls on a busy machine may see neither (CI on 600235e). The rank files still tell the
    # restart (their "requeue N" and run-N starts), so what it recorded and shows must say so.
    assert box.registry.get(job.id).restarts == final.restarts
    assert [r.attempt for r in final.ranks] == [final.restarts] * 2, final.ranks
    log = job.logs().splitlines()
    at = log.index(restart_marker(1))
    assert {f"{r}: run 0 slurm unset begins" for r in range(2)} <= set(log[:at]), log
    assert {f"{r}: run {final.restarts} done" for r in range(2)} <= set(log[at:]), log
    assert f"job {job.id} COMPLETED after {final.restarts} restart" in summary_line(final)


def test_a_requeue_nobody_watched_shows_as_waiting_with_its_restart(box: SlurmTier) -> None:
    """The notebook was closed while its job was requeued (its watcher never saw the run end): a
    status read afterwards says PENDING after 1 restart, the old run's ranks waiting, not the
    RUNNING its leftover rank files suggest."""
    job = box.submit(box.make_spec(REQUEUED, name="unwatched", nodes=2, requeue=True))
    wait_for(lambda: all(f"{r}: run 0 slurm unset begins\n" in job.logs() for r in range(2)),
             timeout=180)
    assert box._watcher is None  # nobody watched: only one-shot reads below
    result = box.transport.run(["scontrol", "requeuehold", job.id], check=False)
    assert result.exit_status == 0, result.stderr

    said: list[str] = []

    def held() -> bool:  # (squeue -o %T names a requeued and held job REQUEUE_HOLD)
        run = box.transport.run(["squeue", "-h", "-j", job.id, "-o", "%T"], check=False)
        said.append(f"{run.exit_status} {run.stdout!r} {run.stderr!r}")
        return run.stdout.decode().strip() in ("PENDING", "REQUEUE_HOLD")

    try:
        wait_for(held, "squeue to say the job waits", timeout=120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; squeue said {said[-3:]}") from None
    status = job.status()
    assert (status.state, status.restarts) == (JobState.PENDING, 1), status
    assert [(r.phase, r.attempt) for r in status.ranks] == [(RankPhase.WAITING, 1)] * 2
    assert box.registry.get(job.id).restarts == 1  # a later reattach starts from it
    job.cancel()
