"""Submit on this machine (a slurm profile without ``host``): the job directory written by this
process and one ``sbatch`` subprocess, instead of the SSH path's tar on stdin unpacked by a bash
program (commands.SUBMIT_SH). Same result, same permissions: a new job directory 0710 (its
missing parents 0710 too, so the user's group may reach the checkpoints but not list them), the
job's files the user's alone, ``ranks/`` made before sbatch, ``.jobid`` holding sbatch's answer.

Over SSH the program's eight forks cost little beside the round trip; here they were most of the
submit (bench/local_slurm.py). No retry protocol is needed: nothing can drop between this process
and its own subprocess.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence

from ..core.errors import SpecError
from .commands import check_options

#: The mode of a new job directory and of the parents it needs (see the module's docstring).
DIR_MODE = 0o710
#: sbatch's umask is the job's (slurmstepd applies it to the log and every file the job makes).
SUBMIT_UMASK = 0o077
JOBID_FILE = ".jobid"

_OPEN_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def expand_home(path: str, home: str) -> str:
    """``~/x`` -> ``HOME/x`` (the workdir rule of commands.check_workdir allows no other ``~``)."""
    if path == "~":
        return home
    if path.startswith("~/"):
        return os.path.join(home, path[2:])
    return path


def _check_part(part: str, what: str) -> str:
    if not part or part in (".", "..") or "/" in part or "\x00" in part:
        raise SpecError(what, f"{part!r} is not a plain file or directory name")
    return part


def _make_parents(path: str) -> None:
    """Every missing directory of ``path`` with DIR_MODE (what ``umask 067; mkdir -p`` makes)."""
    missing = []
    here = path
    while here and not os.path.isdir(here):
        missing.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
            continue
        os.chmod(d, DIR_MODE)  # mkdir's mode passes through this process's umask


def write_job_dir(jobdir: str, files: Mapping[str, tuple[str, int]]) -> str:
    """Make ``jobdir`` (it must not exist: never one someone else prepared) and write ``files``
    (relative name -> (content, mode); ``tasks/3/log`` style names make their directories) each
    as a new file that follows no link, with the user's bits of its mode only. Returns the
    directory's absolute path. OSError (ENOSPC among them) as the file system raises it."""
    jobdir = os.path.abspath(jobdir)
    _check_part(os.path.basename(jobdir), "job directory")
    _make_parents(os.path.dirname(jobdir))
    os.mkdir(jobdir, DIR_MODE)
    os.chmod(jobdir, DIR_MODE)
    made = {""}
    for sub in ("ranks",):
        os.mkdir(os.path.join(jobdir, sub), 0o700)
        made.add(sub)
    for name, (content, mode) in sorted(files.items()):
        parts = [_check_part(p, "job file") for p in name.split("/")]
        for i in range(1, len(parts)):
            rel = "/".join(parts[:i])
            if rel not in made:
                os.mkdir(os.path.join(jobdir, rel), 0o700)
                made.add(rel)
        _write_new(os.path.join(jobdir, *parts), content.encode("utf-8"), mode & 0o700)
    return jobdir


def _write_new(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, _OPEN_NEW, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def note_job_id(jobdir: str, answer: str) -> None:
    """Keep sbatch's answer in ``.jobid`` as the SSH path does (one file, the user's alone)."""
    _write_new(os.path.join(jobdir, JOBID_FILE), answer.encode("utf-8"), 0o600)


def sbatch_here_argv(options: Sequence[str]) -> list[str]:
    """``sbatch --parsable OPTIONS job.sbatch`` (run in the job directory); the options are
    checked as on the SSH path (commands.check_options)."""
    return ["sbatch", "--parsable", *check_options(options), "job.sbatch"]


def is_no_space(exc: OSError) -> bool:
    """Whether an OSError says the disk (or the user's quota) is full."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)

