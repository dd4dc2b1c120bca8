"""The local submit's job directory (slurm/submit_here.py): what the SSH program makes, made by
this process: modes, a new directory only, no link followed, names checked."""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import pytest

from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.slurm import submit_here
from jupyter_tiers.slurm.commands import check_options, submit_argv

FILES = {"job.sbatch": ("#!/bin/bash\n", 0o600), "rank.sh": ("echo hi\n", 0o755),
         "tasks/0/log": ("", 0o644), "tasks/0/params.json": ("{}\n", 0o600)}


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_the_job_directory_and_its_parents_are_0710_and_files_the_users_alone(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = submit_here.write_job_dir(str(tmp_path / "work" / "deep" / "job-1"), FILES)
    finally:
        os.umask(old)
    job = Path(path)
    assert path == str(tmp_path / "work" / "deep" / "job-1")
    assert _mode(job) == 0o710 and _mode(job.parent) == 0o710 and _mode(job.parent.parent) == 0o710
    assert _mode(job / "ranks") == 0o700 and _mode(job / "tasks") == 0o700
    assert _mode(job / "rank.sh") == 0o700 and _mode(job / "job.sbatch") == 0o600
    assert _mode(job / "tasks" / "0" / "log") == 0o600
    assert (job / "rank.sh").read_text() == "echo hi\n"


def test_an_existing_parent_keeps_its_mode(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir(mode=0o755)
    submit_here.write_job_dir(str(tmp_path / "work" / "job"), FILES)
    assert _mode(tmp_path / "work") == 0o755


def test_an_existing_job_directory_is_never_used(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    with pytest.raises(FileExistsError):
        submit_here.write_job_dir(str(tmp_path / "job"), FILES)


def test_a_link_in_place_of_the_job_directory_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "job").symlink_to(target)
    with pytest.raises(FileExistsError):
        submit_here.write_job_dir(str(tmp_path / "job"), FILES)
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/abs", "a//b", "./x", "", "a\x00b"])
def test_a_file_name_that_leaves_the_directory_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(SpecError, match="not a plain file or directory name"):
        submit_here.write_job_dir(str(tmp_path / "job"), {name: ("x", 0o600)})
    assert not (tmp_path / "x").exists()


def test_note_job_id_writes_a_new_file_only(tmp_path: Path) -> None:
    submit_here.note_job_id(str(tmp_path), "42\n")
    assert (tmp_path / ".jobid").read_text() == "42\n" and _mode(tmp_path / ".jobid") == 0o600
    with pytest.raises(FileExistsError):
        submit_here.note_job_id(str(tmp_path), "43\n")


def test_home_is_expanded_only_at_the_front() -> None:
    assert submit_here.expand_home("~/jobs", "/home/u") == "/home/u/jobs"
    assert submit_here.expand_home("~", "/home/u") == "/home/u"
    assert submit_here.expand_home("/abs/~/x", "/home/u") == "/abs/~/x"


def test_sbatch_argv_checks_options_as_the_ssh_path_does() -> None:
    assert submit_here.sbatch_here_argv(["--time=00:10:00", "--nodes=2"]) == [
        "sbatch", "--parsable", "--time=00:10:00", "--nodes=2", "job.sbatch"]
    with pytest.raises(SpecError, match="not an sbatch option word"):
        submit_here.sbatch_here_argv(["--time=1\n#SBATCH --x"])
    with pytest.raises(SpecError):
        submit_argv("/w/j", b"", ["-x"])


def test_no_space_and_quota_are_recognised() -> None:
    import errno

    assert submit_here.is_no_space(OSError(errno.ENOSPC, "full"))
    assert submit_here.is_no_space(OSError(errno.EDQUOT, "quota"))
    assert not submit_here.is_no_space(OSError(errno.EACCES, "denied"))


def test_fuzz_file_names_are_written_inside_or_refused(tmp_path: Path) -> None:
    rng = random.Random(25_6)
    alphabet = ["a", "b", ".", "..", "/", "", "\x00", "-", " ", "~", "é"]
    for i in range(300):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        root = tmp_path / f"case{i}"
        try:
            path = submit_here.write_job_dir(str(root), {name: ("x", 0o600)})
        except SpecError:
            continue
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            continue  # e.g. "ranks" itself, or a file name reused as a directory
        for dirpath, _, files in os.walk(path):
            for f in files:
                assert os.path.realpath(os.path.join(dirpath, f)).startswith(path + "/")
    assert check_options([]) == []
