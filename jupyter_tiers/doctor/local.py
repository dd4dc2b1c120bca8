"""The doctor on a local profile: :func:`probe` (I/O: the workdir, the interpreter, torch, a free
port) returns a :class:`LocalProbe`; :func:`local_checks` judges it (pure)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..config.profiles import Profile
from ..local.slurmenv import MASTER_ADDR
from ..local.tier import local_workdir
from .model import Check, fail, ok, warn

_PY_PROBE = ("import sys\nprint(sys.version.split()[0])\n"
             "try:\n import torch, torch.distributed as d\n"
             " print(torch.__version__, 'gloo' if d.is_gloo_available() else '-')\n"
             "except Exception as e:\n print('-', type(e).__name__)\n")


@dataclass(frozen=True)
class LocalProbe:
    workdir: str
    exists: bool = False
    own: bool = False
    mode: int = 0
    writable: bool = False
    error: str = ""
    python: str = ""
    python_version: str = ""
    python_error: str = ""
    torch: str = ""  # "" when not importable
    torch_note: str = ""
    gloo: bool = False
    port: int = 0  # a port bound on the loopback (0: none could be)
    port_error: str = ""


def probe(profile: Profile) -> LocalProbe:
    workdir = local_workdir(profile)
    exists = own = writable = False
    mode, error = 0, ""
    try:
        info = workdir.stat()
        exists, own, mode = True, info.st_uid == os.getuid(), stat.S_IMODE(info.st_mode)
        fd, name = tempfile.mkstemp(prefix=".jt-doctor.", dir=workdir)  # the one test file
        os.close(fd)
        os.unlink(name)
        writable = True
    except FileNotFoundError:
        parent = next((p for p in workdir.parents if p.exists()), Path("/"))
        writable = os.access(parent, os.W_OK)
        error = f"not there yet; {parent} is {'writable' if writable else 'not writable'}"
    except OSError as exc:
        error = exc.strerror or str(exc)
    python = os.path.expanduser(str(profile.defaults.get("python") or "python3"))
    version = py_error = torch = note = ""
    gloo = False
    try:
        if profile.project_defined:  # a project file's profile runs nothing (issue 26)
            raise OSError("not run: the profile is defined by a project tiers.yaml")
        run = subprocess.run([python, "-c", _PY_PROBE], capture_output=True, text=True, timeout=60,
                             check=False, stdin=subprocess.DEVNULL)
        lines = run.stdout.splitlines()
        if run.returncode == 0 and len(lines) >= 2:
            version = lines[0].strip()[:40]
            first, _, second = lines[1].partition(" ")
            torch, note = ("", second) if first == "-" else (first[:40], "")
            gloo = second.strip() == "gloo"
        else:
            py_error = (run.stderr.strip().splitlines() or ["no output"])[-1][:200]
    except (OSError, subprocess.TimeoutExpired) as exc:
        py_error = str(exc)[:200]
    port, port_error = 0, ""
    try:
        with socket.socket() as sock:
            sock.bind((MASTER_ADDR, 0))
            port = sock.getsockname()[1]
    except OSError as exc:
        port_error = exc.strerror or str(exc)
    return LocalProbe(str(workdir), exists, own, mode, writable, error, python, version, py_error,
                      torch, note, gloo, port, port_error)


def local_checks(p: LocalProbe) -> list[Check]:
    checks: list[Check] = []
    if not p.exists and p.writable:
        checks.append(ok("workdir", f"{p.workdir}: {p.error} (the first job creates it, private)"))
    elif not p.exists:
        checks.append(fail("workdir", f"{p.workdir}: {p.error}",
                           "create it (mkdir -m 700) or set the profile's workdir elsewhere"))
    elif not p.own or p.mode & 0o022:
        owner = "you" if p.own else "another user"
        checks.append(fail("workdir", f"{p.workdir} is not private (owner {owner}, mode {p.mode:04o})",
                           "use a directory of your own that only you can write: chmod go-w it, "
                           "or set the profile's workdir"))
    elif not p.writable:
        checks.append(fail("workdir", f"{p.workdir} is not writable: {p.error}",
                           "fix its permissions or set the profile's workdir"))
    else:
        checks.append(ok("workdir", f"{p.workdir}: private (mode {p.mode:04o}) and writable"))
    if p.python_version:
        checks.append(ok("python", f"{p.python} is Python {p.python_version}"))
    else:
        checks.append(fail("python", f"{p.python} does not run: {p.python_error}",
                           "set defaults.python to an interpreter on this machine"))
    if p.torch:
        checks.append(ok("torch", f"torch {p.torch}" + (" with gloo" if p.gloo else " (no gloo)")))
    elif p.python_version:
        checks.append(warn("torch", f"torch is not importable ({p.torch_note.strip() or 'missing'})",
                           "plain Python jobs run; install torch for distributed training"))
    if p.port:
        checks.append(ok("ports", f"a loopback port can be bound (got {p.port})"))
    else:
        checks.append(fail("ports", f"cannot bind a loopback port: {p.port_error}",
                           "ranks and replicas need loopback ports: check the firewall/sandbox"))
    return checks
