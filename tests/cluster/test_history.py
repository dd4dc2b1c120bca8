"""Job history and metrics on the real Slurm cluster (accounting by slurmdbd), over the real sshd:
a job submitted by jupyter-tiers and one submitted with plain ``sbatch`` over SSH, both in one
sacct query, told apart, filtered by state, the foreign one's output read read-only; and a
failed job's metrics and first error line from its log."""

from __future__ import annotations

import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.faces import tiers_command
from jupyter_tiers.slurm.history import make_query
from jupyter_tiers.slurm.tier import SlurmTier

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]


def ssh(env: dict[str, str], command: str) -> str:
    """Run a command on the login node with OpenSSH, as a user outside jupyter-tiers would."""
    argv = ["ssh", "-i", env["JT_SSH_KEY"], "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", env["JT_SSH_PORT"],
            f"{env['JT_SSH_USER']}@{env['JT_SSH_HOST']}", command]
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120).stdout


@pytest.fixture
def plain_sbatch_job(cluster_env: dict[str, str]) -> tuple[str, str]:
    """A two-node job submitted with plain sbatch (default output file), failing with exit 3.
    Returns (job id, its working directory)."""
    workdir = f"/var/lib/jupyter-tiers-jobs/history-{uuid.uuid4().hex[:8]}"
    script = textwrap.dedent(
        """\
        #!/bin/bash
        #SBATCH -J plain-sbatch -N 2 -t 5 -p debug --acctg-freq=task=1
        echo "hello from plain sbatch"
        srun -N 2 --ntasks-per-node=1 python3 -c 'b = bytearray(48 << 20); import time; time.sleep(6)'
        echo "step=7 loss=0.125"
        exit 3
        """
    )
    out = ssh(cluster_env, f"(umask 067 && mkdir -p {workdir}) && cd {workdir} && "
                           f"cat > job.sh <<'EOF'\n{script}EOF\n"
                           "sbatch --parsable job.sh")
    job_id = out.strip().split(";")[0]
    assert job_id.isdigit(), out
    yield job_id, workdir
    ssh(cluster_env, f"scancel {job_id}; rm -rf {workdir}")


def _wait_accounted(box: SlurmTier, job_id: str, timeout: float = 180) -> None:
    """Until sacct reports the job ended, also in a time-window query (a bound, not a timed
    assertion): for a moment after a job ends slurmdbd has no Eligible time for it, and
    `sacct -S ... -E now` leaves it out while `sacct -j ID` already lists it."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        rows = box.history(make_query(job=job_id))
        in_window = {r.job_id for r in box.history(make_query(days=1, limit=10_000))}
        if rows and JobState(rows[0].state).terminal and job_id in in_window:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"sacct did not report job {job_id} ended within {timeout} s")
        time.sleep(1)


def test_history_has_ours_and_a_plain_sbatch_job(box: SlurmTier, plain_sbatch_job, tiers_yaml: Path,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    foreign_id, workdir = plain_sbatch_job
    job = box.submit(box.make_spec("print('step=1 loss=0.5', flush=True)\n", name="hist-ours", nodes=2))
    assert job.wait(timeout=180).state is JobState.COMPLETED
    _wait_accounted(box, foreign_id)
    _wait_accounted(box, job.id)  # slurmdbd records a job a moment after slurmctld ends it

    rows = {r.job_id: r for r in box.history(make_query(days=1, limit=10_000))}
    ours, other = rows[job.id], rows[foreign_id]
    assert ours.ours and ours.key == job.key and ours.name == "hist-ours"
    assert ours.state == "COMPLETED" and ours.exit_code == 0 and ours.nodes == 2
    assert not other.ours and other.key == "" and other.name == "plain-sbatch"
    assert other.state == "FAILED" and other.exit_code == 3 and other.nodes == 2
    assert other.workdir == workdir and other.user == "root"
    assert other.elapsed_s is not None and other.elapsed_s >= 2
    # sacct reports MaxRSS per step (sampled every second here, --acctg-freq): the row carries
    # the largest, the srun step's 48 MiB buffer, not the batch shell's few MiB. The step holds it
    # 6 s, so a sampler starved for a few seconds on a busy machine still sees it.
    assert other.max_rss is not None and other.max_rss >= 48 << 20

    failed_only = box.history(make_query(days=1, states="FAILED", limit=10_000))
    assert foreign_id in {r.job_id for r in failed_only} and job.id not in {r.job_id for r in failed_only}

    # The same through %tiers history, with the registry the tier uses.
    monkeypatch.setenv("JUPYTER_TIERS_REGISTRY", str(tmp_path / "registry.sqlite"))
    capsys.readouterr()
    tiers_command.run(["history", "-p", "box", "--days", "1", "--limit", "10000"])
    table = capsys.readouterr().out.splitlines()
    mine = next(ln for ln in table if ln.split()[0] == job.id)
    theirs = next(ln for ln in table if ln.split()[0] == foreign_id)
    assert mine.split()[-1] == "tiers" and theirs.split()[-1] == "other"
    assert " FAILED " in theirs and " 3 " in theirs

    # Read-only look at the foreign job: its row and its output's end.
    tiers_command.run(["history", "-p", "box", "--job", foreign_id, "--tail", "5"])
    shown = capsys.readouterr().out
    assert f"last 5 lines of {workdir}/slurm-{foreign_id}.out (read-only)" in shown
    assert "hello from plain sbatch" in shown and "step=7 loss=0.125" in shown
    tiers_command.run(["history", "-p", "box", "--job", job.id])
    assert f"%tiers attach {job.key}" in capsys.readouterr().out


def test_foreign_output_not_readable_is_said(box: SlurmTier, cluster_env: dict[str, str],
                                             capsys: pytest.CaptureFixture[str], tiers_yaml: Path) -> None:
    out = ssh(cluster_env, "cd /tmp && sbatch --parsable -J elsewhere -o /dev/null --wrap 'true'")
    job_id = out.strip()
    _wait_accounted(box, job_id)
    tiers_command.run(["history", "-p", "box", "--job", job_id])
    shown = capsys.readouterr().out
    assert f"its output is not readable at /tmp/slurm-{job_id}.out" in shown or (
        "its output is not readable at /dev/null" in shown)  # while slurmctld still knows the job


def test_output_path_from_slurmctld_while_it_knows_the_job(box: SlurmTier, cluster_env: dict[str, str],
                                                            capsys: pytest.CaptureFixture[str],
                                                            tiers_yaml: Path) -> None:
    """sbatch -o elsewhere: the exact path comes from scontrol while slurmctld remembers the job."""
    out_path = f"/var/lib/jupyter-tiers-jobs/history-out-{uuid.uuid4().hex[:8]}-%j.txt"
    job_id = ssh(cluster_env, "(umask 067 && mkdir -p /var/lib/jupyter-tiers-jobs) && "
                              f"cd /tmp && sbatch --parsable -J elsewhere2 -o {out_path} "
                              "--wrap 'echo written elsewhere'").strip()
    _wait_accounted(box, job_id)
    tiers_command.run(["history", "-p", "box", "--job", job_id, "--tail", "3"])
    shown = capsys.readouterr().out
    real = out_path.replace("%j", job_id)
    assert f"last 3 lines of {real} (read-only)" in shown and "written elsewhere" in shown
    ssh(cluster_env, f"rm -f {real}")


def test_failed_job_metrics_and_error_line(box: SlurmTier) -> None:
    body = textwrap.dedent(
        """\
        import os, time
        rank = int(os.environ["RANK"])
        for step in range(1, 4):
            print({'loss': round(1.0 / step, 4), 'learning_rate': 1e-4, 'epoch': step / 3}, flush=True)
        if rank == 0:
            open(os.path.join(os.environ["JT_JOB_DIR"], "rank0-printed"), "w").close()
        if rank == 1:
            # Fail only once rank 0 has printed: fail-stop could otherwise stop a slowly
            # started rank 0 before its first line.
            deadline = time.time() + 120
            while not os.path.exists(os.path.join(os.environ["JT_JOB_DIR"], "rank0-printed")) \
                    and time.time() < deadline:
                time.sleep(0.1)
            raise RuntimeError("CUDA error: out of memory")
        time.sleep(120)
        """
    )
    job = box.submit(box.make_spec(body, name="hist-metrics", nodes=2))
    status = job.wait(timeout=180)
    assert status.state is JobState.FAILED
    series = job.metrics()
    values = [y for _, y in series["loss"]] if isinstance(series, dict) else list(series["loss"].dropna())
    assert values == [1.0, 0.5, 0.3333]
    summary = job.summary(status)
    assert "first failure: rank 1" in summary and "last loss 0.3333" in summary
    # The log's error line is recognised (batch/endreason): the summary says why, with the fix.
    # Slurm picks the nodes (a busy cluster may give node3 and node4), so the node is the one the
    # failing rank recorded, not an assumed one.
    failed = status.first_failure
    assert failed is not None and failed.rank == 1 and failed.node
    assert f" — why: rank 1 ({failed.node}) ran out of GPU memory — fix: lower the batch size" in summary
    assert "shard the model (FSDP)" in summary  # then, when sampled, what the job used
