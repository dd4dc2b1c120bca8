"""Issue 36, item 7: directories other users share. The on-cluster submit (slurm/submit_here.py),
the SSH submit program (commands.SUBMIT_SH) and a job's checkpoint directory (jobdir.checkpoint_lines)
refuse a directory on the way that another user owns or can write (a root-owned sticky directory
such as /tmp excepted), and a checkpoint directory someone else made. The rule is written in
Python (batch/shareddirs.dir_problem) and in bash (UNSAFE_DIRS_SH): both are run over every case
and must say the same. Real directories; those of another user need root (chown)."""

from __future__ import annotations

import io
import itertools
import os
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from jupyter_tiers.batch import jobdir, shareddirs
from jupyter_tiers.core.errors import SubmitError
from jupyter_tiers.core.model import JobSpec
from jupyter_tiers.slurm import commands, submit_here

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's directory needs chown (root)")
OTHER = 65534  # nobody
FILES = {"job.sbatch": ("#!/bin/bash\n", 0o600), "tasks/0/params.json": ("{}", 0o600)}


def test_python_and_bash_say_the_same() -> None:
    me = 1000
    owners = (me, 0, 1001)
    perms = (0o700, 0o755, 0o750, 0o775, 0o757, 0o777, 0o1777, 0o1775, 0o1757, 0o2770, 0o2750, 0o3777)
    cases = [(owner, stat.S_IFDIR | perm, own) for owner, perm, own in
             itertools.product(owners, perms, (False, True))]
    cases += [(owner, stat.S_IFLNK | 0o777, own) for owner in owners for own in (False, True)]
    script = shareddirs.UNSAFE_DIRS_SH + "".join(
        f'jt_dir_verdict {owner} {mode:x} "/a b/c" {me} {"own" if own else ""}; printf "%s\\n" "$JT_WHY"\n'
        for owner, mode, own in cases)
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                          text=True, timeout=60, check=True)
    said = done.stdout.split("\n")[:-1]
    expected = [shareddirs.dir_problem("/a b/c", owner, mode, me, own=own) or ""
                for owner, mode, own in cases]
    assert said == expected
    assert expected.count("") > 10 and len(set(expected)) > 5  # both verdicts, several reasons


def _tree(tmp_path: Path, mode: int, owner: int | None = None) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    if owner is not None:
        os.chown(shared, owner, -1)
    return shared


@pytest.mark.parametrize("mode", [0o775, 0o777, 0o2770], ids=oct)
def test_submit_here_refuses_a_group_or_world_writable_parent(tmp_path: Path, mode: int) -> None:
    shared = _tree(tmp_path, mode)
    with pytest.raises(SubmitError, match=r"writable by group or others, who could swap what is in it"):
        submit_here.write_job_dir(str(shared / "me" / "work" / "job-1"), FILES)
    assert not (shared / "me").exists()  # refused before anything is made under it


@as_root
def test_submit_here_refuses_another_users_directory_and_link(tmp_path: Path) -> None:
    theirs = _tree(tmp_path, 0o755, OTHER)
    with pytest.raises(SubmitError, match=rf"{theirs} belongs to uid {OTHER}, who could swap"):
        submit_here.write_job_dir(str(theirs / "job-1"), FILES)
    mine = tmp_path / "mine"
    mine.mkdir()
    link = tmp_path / "link"
    link.symlink_to(mine)
    os.lchown(link, OTHER, OTHER)
    with pytest.raises(SubmitError, match=rf"{link} is a symbolic link of uid {OTHER}"):
        submit_here.write_job_dir(str(link / "job-1"), FILES)
    assert list(mine.iterdir()) == []


def test_submit_here_takes_a_sticky_root_directory_and_own_links(tmp_path: Path) -> None:
    """/tmp itself is the usual case: root's, sticky, world-writable."""
    if os.geteuid() == 0:
        shared = _tree(tmp_path, 0o1777, 0)
    else:
        shared = Path("/tmp")
        assert os.stat(shared).st_uid == 0 and os.stat(shared).st_mode & stat.S_ISVTX
    work = tmp_path / "real-work"
    work.mkdir(mode=0o700)
    (tmp_path / "work-link").symlink_to(work)
    made = submit_here.write_job_dir(str(tmp_path / "work-link" / "job-1"), FILES)
    assert (work / "job-1" / "tasks" / "0" / "params.json").read_text() == "{}"
    assert stat.S_IMODE(os.stat(work / "job-1").st_mode) == submit_here.DIR_MODE and made.endswith("job-1")
    if os.geteuid() == 0:
        made = submit_here.write_job_dir(str(shared / f"u{os.getpid()}" / "job-1"), FILES)
        assert stat.S_IMODE(os.stat(shared / f"u{os.getpid()}").st_mode) == submit_here.DIR_MODE


def _submit_sh(jobdir: Path, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    sbatch = tmp_path / "bin" / "sbatch"
    sbatch.parent.mkdir(exist_ok=True)
    sbatch.write_text("#!/bin/bash\necho 4242\n")
    sbatch.chmod(0o755)
    packed = _pack()
    env = {**os.environ, "PATH": f"{sbatch.parent}:{os.environ['PATH']}"}
    return subprocess.run(commands.submit_argv(str(jobdir), packed), input=packed, capture_output=True,
                          env=env, timeout=120, check=False)


def _pack() -> bytes:
    """A job directory of one file, as commands.pack_job makes it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("job.sbatch")
        info.size = 12
        tar.addfile(info, io.BytesIO(b"#!/bin/bash\n"))
    return buf.getvalue()


def test_ssh_submit_program_refuses_a_shared_workdir(tmp_path: Path) -> None:
    shared = _tree(tmp_path, 0o777)
    done = _submit_sh(shared / "work" / "job-1", tmp_path)
    assert done.returncode == commands.UNSAFE_WORKDIR_EXIT, done.stderr
    assert f"not submitting from {shared}/work: {shared} (mode 0777) is writable" in done.stderr.decode()
    assert not (shared / "work" / "job-1").exists()
    ok = _submit_sh(tmp_path / "own" / "job-1", tmp_path)
    assert ok.returncode == 0 and ok.stdout.decode().startswith("4242\n"), ok.stderr


def _checkpoint_step(ckpt: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    lines = jobdir.checkpoint_lines(JobSpec(script="x", checkpoint_dir=str(ckpt)))
    script = "\n".join(lines) + '\necho "ranks start in $JT_CHECKPOINT_DIR"\n'
    env = {**os.environ, "JT_JOB_DIR": str(tmp_path), "SLURM_JOB_ID": "7"}
    return subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


@as_root
def test_a_checkpoint_directory_someone_else_made_is_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(mode=0o2750)
    os.chown(ckpt, OTHER, OTHER)
    done = _checkpoint_step(ckpt, tmp_path)
    assert done.returncode == 1 and "ranks start" not in done.stdout
    assert f"not writing checkpoints into {ckpt}: {ckpt} belongs to uid {OTHER}, not to you" in done.stderr


def test_a_checkpoint_directory_under_a_shared_parent_is_refused(tmp_path: Path) -> None:
    shared = _tree(tmp_path, 0o775)
    done = _checkpoint_step(shared / "ckpt", tmp_path)
    assert done.returncode == 1 and "ranks start" not in done.stdout
    assert f"{shared} (mode 0775) is writable by group or others" in done.stderr
    writable = tmp_path / "open-ckpt"
    writable.mkdir()
    writable.chmod(0o2770)
    done = _checkpoint_step(writable, tmp_path)
    assert done.returncode == 1 and f"{writable} (mode 2770) is writable by group or others" in done.stderr


def test_the_users_own_checkpoint_directory_is_made_and_taken(tmp_path: Path) -> None:
    ckpt = tmp_path / "runs" / "ckpt"
    for _ in range(2):  # made, then found
        done = _checkpoint_step(ckpt, tmp_path)
        assert done.returncode == 0 and f"ranks start in {ckpt}" in done.stdout, done.stderr
    assert stat.S_IMODE(os.stat(ckpt).st_mode) == 0o2750
