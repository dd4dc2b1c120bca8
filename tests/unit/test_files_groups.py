"""Issue 29 §11: the Files tab lists the job's own outputs first and jupyter-tiers' plumbing
(``.jobid``, ``.submit.lock``, ``rank.sh``, ``job.sbatch``, ...) apart, last. Every file the tiers
write into a job directory is classified as ours (checked against the writers themselves)."""

from __future__ import annotations

import random

from jupyter_tiers.batch import arrays
from jupyter_tiers.batch.jobdir import CELL_FILES, OWN_FILES, is_own_file, job_files
from jupyter_tiers.core.model import JobSpec
from jupyter_tiers.data.files import GROUPS, FileInfo, file_group, in_display_order
from jupyter_tiers.local import jobstate
from jupyter_tiers.local.array_supervisor import ARRAY_FILE
from jupyter_tiers.local.tier import SYNC_DIR
from jupyter_tiers.slurm.commands import SUBMIT_SH


def test_groups_of_typical_names() -> None:
    assert file_group("loss.png") == "output"
    assert file_group("out/metrics.csv") == "output"
    assert file_group("checkpoints/step-100.pt") == "checkpoints"
    assert file_group("job.log") == "log"
    assert file_group("tasks/3/job.log") == "log"
    for ours in (".jobid", ".submit.lock", "rank.sh", "job.sbatch", "env.sh",
                 "tasks/3/params.json", "code/train.py", "usage/0", "usage/gpu-node1", "ranks/3"):
        assert file_group(ours) == "tiers", ours
    # Issue 41 item 11: the user's cell is the user's, listed with the outputs.
    for cell in ("main.py", "main.sh", "tasks/3/cell.py"):
        assert file_group(cell) == "output", cell
    # The job's own files that merely share a base name with ours elsewhere are the job's.
    assert file_group("out/main.py") == "output"
    assert file_group("results/job.log") == "output"
    assert file_group("checkpoints") == "output"  # a file named so, not the directory


def test_display_order_puts_outputs_first_and_ours_last() -> None:
    names = [".jobid", "rank.sh", "job.log", "z.csv", "checkpoints/c.pt", "a.png", "job.sbatch",
             ".submit.lock", "main.py"]
    ordered = [f.name for f in in_display_order(FileInfo(n, 1, 0.0) for n in names)]
    assert ordered == ["a.png", "main.py", "z.csv", "checkpoints/c.pt", "job.log", ".jobid",
                       ".submit.lock", "job.sbatch", "rank.sh"]


def test_every_file_the_tiers_write_is_ours() -> None:
    spec = JobSpec(name="t", script="print(1)\n", env=(("K", "v"),))
    written = set(job_files(spec))  # rank.sh, main.py, env.sh
    written |= set(job_files(JobSpec(name="t", script="echo 1\n", shell=True)))  # main.sh
    written |= {"job.sbatch"}  # slurm/render.py
    written |= {w for w in (".jobid", ".submit.lock", ".upload.tar") if w in SUBMIT_SH}
    assert {".jobid", ".submit.lock", ".upload.tar"} <= written
    written |= {jobstate.STATE_FILE, jobstate.PLAN_FILE, jobstate.BATCH_FILE, jobstate.PID_FILE,
                jobstate.CANCEL_FILE, jobstate.SUPERVISOR_LOG, jobstate.ENV_DUMP}
    written |= {arrays.PARAMS_FILE, arrays.CELL_FILE, ARRAY_FILE}
    assert written <= OWN_FILES, written - OWN_FILES
    for name in written - CELL_FILES:
        assert is_own_file(name) and file_group(name) == "tiers", name
    assert file_group(f"{SYNC_DIR}/notebook.ipynb") == "tiers"
    assert file_group(f"{arrays.TASKS_DIR}/0/{arrays.PARAMS_FILE}") == "tiers"


def test_fuzz_file_group_is_total_and_stable() -> None:
    rng = random.Random(29_11)
    alphabet = "ab./_-cj1" + "".join(sorted({c for n in OWN_FILES for c in n}))
    for _ in range(3000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
        group = file_group(name)
        assert group in GROUPS
        assert group == file_group(name)
        if group == "tiers":
            assert is_own_file(name)
    files = [FileInfo("".join(rng.choice(alphabet) for _ in range(8)), 1, 0.0) for _ in range(200)]
    ordered = in_display_order(files)
    assert sorted(ordered) == sorted(files)
    ranks = [GROUPS.index(file_group(f.name)) for f in ordered]
    assert ranks == sorted(ranks)
