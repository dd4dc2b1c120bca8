"""``jupyter tiers history`` in a terminal (the installed ``jupyter`` command, a subprocess) on the
real Slurm test cluster: the same table as ``%tiers history`` with a job of ours and one submitted
with plain sbatch over SSH, the foreign job's output read read-only, and bad options refused with a
one-line message and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.test_history import _wait_accounted, plain_sbatch_job  # noqa: F401 (a fixture)

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]

JUPYTER = Path(sys.executable).parent / "jupyter"


def jupyter_tiers(*args: str) -> subprocess.CompletedProcess[str]:
    """``jupyter tiers ARGS`` with this test's tiers.yaml and registry (from the environment)."""
    return subprocess.run([str(JUPYTER), "tiers", *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))


def history_table(ids: set[str], *args: str) -> list[str]:
    """The table's lines once it lists ``ids`` (slurmdbd lists a job that has just ended in a
    time window a second or two after ``sacct -j`` knows it): polled within a bound."""
    deadline = time.monotonic() + 180
    while True:
        done = jupyter_tiers("history", *args)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        if ids <= {ln.split()[0] for ln in lines if ln.split()}:
            return lines
        if time.monotonic() > deadline:
            pytest.fail(f"jupyter tiers history never listed {sorted(ids)}:\n{done.stdout[:2000]}")
        time.sleep(1)


def test_jupyter_tiers_history_in_a_terminal(box: SlurmTier, plain_sbatch_job: tuple[str, str]) -> None:  # noqa: F811
    foreign_id, workdir = plain_sbatch_job
    job = box.submit(box.make_spec("print('hello', flush=True)\n", name="hist-cli", nodes=1))
    assert job.wait(timeout=180).state is JobState.COMPLETED
    _wait_accounted(box, foreign_id)
    _wait_accounted(box, job.id)

    table = history_table({job.id, foreign_id}, "-p", "box", "--days", "1", "--limit", "10000")
    assert table[0].split()[:4] == ["ID", "NAME", "USER", "STATE"]
    mine = next(ln for ln in table if ln.split()[0] == job.id)
    theirs = next(ln for ln in table if ln.split()[0] == foreign_id)
    assert "hist-cli" in mine and " COMPLETED " in mine and mine.split()[-1] == "tiers"
    assert "plain-sbatch" in theirs and " FAILED " in theirs and theirs.split()[-1] == "other"
    assert table[-1].startswith("(FROM other: not submitted by jupyter-tiers")

    # --state (a short code) keeps the failed foreign job and drops ours
    failed = history_table({foreign_id}, "-p", "box", "-d", "1", "-s", "F", "--limit", "10000")
    assert job.id not in {ln.split()[0] for ln in failed if ln.split()}

    # one foreign job: its row and the end of its output, read-only
    one = jupyter_tiers("history", "-p", "box", "--job", foreign_id, "--tail", "5")
    assert one.returncode == 0, one.stderr
    assert f"last 5 lines of {workdir}/slurm-{foreign_id}.out (read-only)" in one.stdout
    assert "hello from plain sbatch" in one.stdout and "step=7 loss=0.125" in one.stdout
    ours = jupyter_tiers("history", "-p", "box", "--job", job.id)
    # (the hint names the notebook's %tiers, in a terminal too)
    assert ours.returncode == 0 and f"%tiers attach {job.key}" in ours.stdout, ours.stdout


def test_usage_names_every_history_option() -> None:
    done = jupyter_tiers("--help")
    line = next(ln for ln in done.stdout.splitlines() if ln.strip().startswith("history "))
    for option in ("-p P", "--days N", "--user U|all", "--state S", "--limit N", "--job ID [--tail N]"):
        assert option in line, (option, line)


@pytest.mark.parametrize(("args", "words"), [
    (["--days", "0"], "days: give a whole number of days from 1 to 366"),
    (["--days", "400"], "days: give a whole number of days from 1 to 366"),
    (["--state", "bogus"], "state: 'bogus' is not a job state"),
    (["--user", "x;id"], "user: 'x;id' is not a user name"),
    (["--job", "12;id"], "job: '12;id' is not a Slurm job id"),
    (["-p", "nowhere"], "nowhere"),
])
def test_bad_options_are_one_line_without_traceback(tiers_yaml: Path, args: list[str], words: str) -> None:
    done = jupyter_tiers("history", *(["-p", "box"] if "-p" not in args else []), *args)
    assert done.returncode != 0 and done.stdout == ""
    message = done.stderr.strip()
    assert words in message and "\n" not in message and "Traceback" not in done.stderr, done.stderr
