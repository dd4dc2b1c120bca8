"""Submit on this machine (a slurm profile without ``host``): the job directory written by this
process and one ``sbatch`` subprocess, instead of the SSH path's tar on stdin unpacked by a bash
program (commands.SUBMIT_SH). Same result, same permissions: a new job directory 0710 (its
missing parents 0710 too, so the user's group may reach the checkpoints but not list them), the
job's files the user's alone, ``ranks/`` made before sbatch, ``.jobid`` holding sbatch's answer.

The way there is checked first (:func:`open_checked_dir`): from ``/`` to the workdir, one
directory at a time by file descriptor (``O_DIRECTORY | O_NOFOLLOW``, then ``dir_fd=``), each
must pass batch/shareddirs.py's rule (the user's or root's, writable by nobody else but a
root-owned sticky directory like ``/tmp``; a symbolic link on the way the user's or root's), so
nobody else can swap the directory sbatch then runs in. The job directory and its files are made
through those descriptors.

Over SSH the program's eight forks cost little beside the round trip; here they were most of the
submit (bench/local_slurm.py). No retry protocol is needed: nothing can drop between this process
and its own subprocess.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping, Sequence

from ..batch.shareddirs import dir_problem
from ..core.errors import SpecError, SubmitError
from .commands import check_options

#: The mode of a new job directory and of the parents it needs (see the module's docstring).
DIR_MODE = 0o710
#: sbatch's umask is the job's (slurmstepd applies it to the log and every file the job makes).
SUBMIT_UMASK = 0o077
JOBID_FILE = ".jobid"

_OPEN_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_MAX_LINKS = 40  # as the kernel's path walk


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


class UnsafeDirectory(SubmitError):
    """A directory on the way to the workdir someone else could swap (the message says which)."""


def open_checked_dir(path: str, *, create_mode: int | None = None, me: int | None = None) -> int:
    """A descriptor (O_DIRECTORY) of the absolute ``path``, reached from ``/`` one component at a
    time: each directory opened with O_NOFOLLOW under its checked parent and judged by
    shareddirs.dir_problem on what was opened (fstat); a symbolic link judged as a link, then its
    target walked the same way. A missing directory is made with ``create_mode`` (None: the
    FileNotFoundError). UnsafeDirectory names the first directory refused; ``me``: the uid the
    directories must serve (default this process's)."""
    me = os.geteuid() if me is None else me
    pending = [part for part in reversed(path.split("/")) if part]
    fd = os.open("/", _OPEN_DIR)
    where, links = "/", 0
    try:
        _judge(fd, where, me)
        while pending:
            part = pending.pop()
            if part == ".":
                continue
            if part == "..":
                child, where_next = "..", os.path.dirname(where)
            else:
                child, where_next = part, os.path.join(where, part)
            made = False
            try:
                info = os.stat(child, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if create_mode is None:
                    raise
                try:
                    os.mkdir(child, create_mode, dir_fd=fd)
                    made = True
                except FileExistsError:
                    pass
                info = os.stat(child, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                problem = dir_problem(where_next, info.st_uid, info.st_mode, me)
                if problem:
                    raise UnsafeDirectory(problem)
                links += 1
                if links > _MAX_LINKS:
                    raise UnsafeDirectory(f"{path}: more than {_MAX_LINKS} symbolic links (a loop?)")
                target = os.readlink(child, dir_fd=fd)
                pending.extend(p for p in reversed(target.split("/")) if p)
                if target.startswith("/"):
                    os.close(fd)
                    fd = os.open("/", _OPEN_DIR)
                    where = "/"
                continue
            sub = os.open(child, _OPEN_DIR, dir_fd=fd)  # ELOOP/ENOTDIR if swapped since the stat
            os.close(fd)
            fd, where = sub, where_next
            if made:
                os.fchmod(fd, create_mode or 0)  # mkdir's mode passes through the umask
            _judge(fd, where, me)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _judge(fd: int, where: str, me: int) -> None:
    info = os.fstat(fd)
    problem = dir_problem(where, info.st_uid, info.st_mode, me)
    if problem:
        raise UnsafeDirectory(problem)


def write_job_dir(jobdir: str, files: Mapping[str, tuple[str, int]], *, me: int | None = None) -> str:
    """Make ``jobdir`` (it must not exist: never one someone else prepared) and write ``files``
    (relative name -> (content, mode); ``tasks/3/log`` style names make their directories) each
    as a new file that follows no link, with the user's bits of its mode only, all through
    directory descriptors under a workdir :func:`open_checked_dir` accepted. Returns the
    directory's absolute path. UnsafeDirectory (a SubmitError) for a workdir others could swap,
    with what to do; else OSError (ENOSPC among them) as the file system raises it."""
    jobdir = os.path.abspath(jobdir)
    name = _check_part(os.path.basename(jobdir), "job directory")
    workdir = os.path.dirname(jobdir)
    try:
        parent = open_checked_dir(workdir, create_mode=DIR_MODE, me=me)
    except UnsafeDirectory as exc:
        raise UnsafeDirectory(f"not submitting from {workdir}: {exc}; set the profile's workdir to a "
                              "directory of your own that only you can write (or have the shared "
                              "directory made root's and sticky, chmod +t)") from None
    try:
        os.mkdir(name, DIR_MODE, dir_fd=parent)
        top = os.open(name, _OPEN_DIR, dir_fd=parent)
    finally:
        os.close(parent)
    dirs = {"": top}
    try:
        os.fchmod(top, DIR_MODE)
        for sub in ("ranks",):
            os.mkdir(sub, 0o700, dir_fd=top)
            dirs[sub] = os.open(sub, _OPEN_DIR, dir_fd=top)
        for rel, (content, mode) in sorted(files.items()):
            parts = [_check_part(p, "job file") for p in rel.split("/")]
            here = top
            for i in range(1, len(parts)):
                key = "/".join(parts[:i])
                if key not in dirs:
                    os.mkdir(parts[i - 1], 0o700, dir_fd=here)
                    dirs[key] = os.open(parts[i - 1], _OPEN_DIR, dir_fd=here)
                here = dirs[key]
            _write_new(parts[-1], content.encode("utf-8"), mode & 0o700, dir_fd=here)
    finally:
        for fd in dirs.values():
            os.close(fd)
    return jobdir


def _write_new(path: str, data: bytes, mode: int, dir_fd: int | None = None) -> None:
    fd = os.open(path, _OPEN_NEW, mode, dir_fd=dir_fd)
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

