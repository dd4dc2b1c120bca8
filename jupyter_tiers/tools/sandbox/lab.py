"""Teaching labs on the cluster in a box: every student submits as themselves.

``jupyter tiers sandbox add-user NAME`` (root) makes an existing Unix user a lab student:

- first, a refusal if the user's primary group is shared with other users (checkpoints are
  group-readable by design, so they could read them) unless ``--allow-shared-group``, which
  turns it into a warning line;
- a Slurm association (account :data:`LAB_ACCOUNT`) in slurmdbd, so the user may submit (the box
  enforces associations);
- an SSH key pair made *by the user* (``ssh-keygen`` runs as them, so root never writes into a
  directory they control) at :data:`LAB_KEY` in their home, mode 0600;
- its public key in the cluster's root-owned ``authorized_keys.d/NAME``, which the box's sshd
  reads for that login name only: the key logs in as the student, never as anyone else;
- a check that the student logs in as themselves and that ``sbatch --test-only`` accepts them;
- the shared ``sandbox`` profile in ``/etc/jupyter/tiers.yaml`` (no ``user``: ssh logs in as
  whoever runs Jupyter; ``identity_file: ~/.ssh/jupyter_tiers_lab``, ``~`` being theirs), with
  this Python (and a quoted ``source`` of its venv) only if every component of its paths is
  root's and writable by nobody else (:func:`trusted_path_problem`), else ``python3``;
- the shared ``sandbox-serve`` profile next to it, which the lab notebook serves its trained model
  from: a local profile whose ``path_map`` covers every added student's home (the box's job
  directories are on this machine's disk, at the same paths), :func:`lab_serve_profile`.

Everything is idempotent. ``sandbox remove-user NAME`` removes the association and the
authorisation (the student's own key files are theirs and stay).

The pure parts (:func:`check_user_name`, :func:`lab_profile`, :func:`authorized_line`,
:func:`parse_public_key`, :func:`shadow_locked`, :func:`trusted_path_problem` with its
``lstat`` passed in, :func:`group_sharers`) are separated from the commands that run.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import SpecError, TiersError
from ...core.model import JobSpec
from ...spec.jobspec import validate_spec
from .files import cluster_dir, read_cluster_env, write_profile

LAB_ACCOUNT = "jtlab"
LAB_KEY = "~/.ssh/jupyter_tiers_lab"
LAB_PROFILE = "sandbox"
LAB_SERVE_PROFILE = "sandbox-serve"  # examples/teaching_lab.ipynb serves its model from it
SYSTEM_CONFIG = Path("/etc/jupyter/tiers.yaml")
_KEY_NAME = LAB_KEY.removeprefix("~/")
# useradd's default NAME_REGEX (Debian's adduser is stricter still): what a login name may be.
_NAME_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_PUBKEY_RE = re.compile(
    r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)) ([A-Za-z0-9+/]{16,8192}={0,3})")


class LabError(TiersError):
    """A lab command that cannot go on; the message says what was wrong and what to do."""


# --- pure ---------------------------------------------------------------------------------------

def check_user_name(name: Any) -> str:
    """``name`` if it is a login name as useradd accepts by default (lower-case letters, digits,
    ``_`` and ``-``, not starting with a digit or ``-``, at most 32), else a :class:`LabError`."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        shown = repr(name[:40]) if isinstance(name, str) else type(name).__name__
        raise LabError(f"{shown} is not a user name: use lower-case letters, digits, '_' and '-', "
                       "starting with a letter or '_', at most 32 characters")
    if name == "root":
        raise LabError("root is the lab's administrator, not a student: add the students' own users")
    return name


def parse_public_key(text: str) -> tuple[str, str]:
    """(type, base64) of the one OpenSSH public key in ``text``; anything else is a LabError."""
    lines = [line for line in text.splitlines() if line.strip()]
    match = _PUBKEY_RE.match(lines[0].strip()) if len(lines) == 1 else None
    if match is None:
        raise LabError("ssh-keygen did not print one public key (expected 'ssh-ed25519 AAAA...')")
    return match.group(1), match.group(2)


def authorized_line(name: str, key: tuple[str, str]) -> str:
    """The ``authorized_keys.d/NAME`` line: the key, no agent or X11 forwarding, a comment that
    names the lab user."""
    options = "no-agent-forwarding,no-X11-forwarding"
    return f"{options} {key[0]} {key[1]} jupyter-tiers-lab:{check_user_name(name)}\n"


def shadow_locked(shadow_text: str, name: str) -> bool:
    """Whether ``name``'s /etc/shadow password field marks the account locked (``!...``): sshd
    without PAM refuses such accounts even for a key."""
    for line in shadow_text.splitlines():
        fields = line.split(":")
        if len(fields) > 1 and fields[0] == name:
            return fields[1].startswith("!")
    return False


#: The lab profile's keys the sandbox owns: how the students reach the cluster and which Python
#: their jobs run. Written anew each time; every other key an admin set (``status_interval``, a
#: default's value) is kept (:func:`lab_profile`'s ``old``).
LAB_OWNED_KEYS = frozenset({"tier", "description", "host", "port", "user", "identity_file", "known_hosts",
                            "workdir", "setup"})


def lab_profile(env: dict[str, str], python: str, setup: Sequence[str] = (),
                old: Any = None) -> dict[str, Any]:
    """The shared profile for ``/etc/jupyter/tiers.yaml``: no ``user`` (ssh logs in as whoever runs
    Jupyter), the lab key in that user's home, the cluster's known_hosts (readable by all). Of an
    ``old`` profile (the file's, an admin's edits in it), the keys outside
    :data:`LAB_OWNED_KEYS` are kept, and its ``defaults`` but ``python``."""
    kept = {k: v for k, v in old.items() if k not in LAB_OWNED_KEYS} if isinstance(old, dict) else {}
    old_defaults = kept.pop("defaults", None)
    defaults: dict[str, Any] = {"partition": "debug", "time": "00:30:00"}
    if isinstance(old_defaults, dict):
        defaults.update(old_defaults)
    defaults["python"] = python
    profile: dict[str, Any] = {
        "tier": "slurm",
        "description": "teaching lab: the cluster in a box, each student as themselves",
        "host": env["JT_SSH_HOST"],
        "port": int(env["JT_SSH_PORT"]),
        "identity_file": LAB_KEY,
        "known_hosts": env["JT_KNOWN_HOSTS"],
        "workdir": "~/jupyter-tiers",
        "defaults": defaults,
    }
    if setup:
        profile["setup"] = list(setup)
    return {**profile, **kept}


def lab_serve_profile(homes: Iterable[str], old: Any = None) -> dict[str, Any]:
    """The shared ``sandbox-serve`` local profile: its ``path_map`` maps each student's home (where
    their ``~/jupyter-tiers`` job directories are, on the box and on this machine alike) to itself,
    keeping the homes an ``old`` profile already mapped."""
    path_map: dict[str, str] = {}
    if isinstance(old, dict) and isinstance(old.get("path_map"), dict):
        path_map.update({k: v for k, v in old["path_map"].items() if isinstance(k, str)})
    for home in homes:
        path_map[home] = home
    return {
        "tier": "local",
        "description": "teaching lab: serve a model trained on the cluster in a box (same disk)",
        "path_map": dict(sorted(path_map.items())),
    }


# --- this machine -----------------------------------------------------------------------------

# The end of a path the lab hands to every student: a program they run, a file their jobs read
# (the venv's activate script, the standard library) or a directory their jobs import from.
PATH_WANTS = {"exec": 0o005, "read": 0o004, "dir": 0o005}
_MAX_LINKS = 40  # as the kernel's path walk


def trusted_path_problem(path: str | Path, want: str = "exec", *,
                         lstat: Callable[[str], os.stat_result] = os.lstat,
                         readlink: Callable[[str], str] = os.readlink) -> str | None:
    """Why ``path`` may not be written into the students' shared profile, or None.

    Every component from ``/``, and every component of each symbolic link's target (followed by
    hand with ``lstat``, never ``stat``), must belong to root and be writable by nobody else (no
    group or other write bit, sticky or not): otherwise its owner or group could swap what every
    student runs. Each directory must let others enter it; the end must be what ``want`` says: a
    regular file others may run (``exec``) or read (``read``), or a directory they may read
    (``dir``). ``lstat`` and ``readlink`` are parameters for tests.
    """
    if want not in PATH_WANTS:
        raise ValueError(f"want is one of {', '.join(PATH_WANTS)}")
    text = str(path)
    if not text.startswith("/"):
        return f"{text!r} is not an absolute path"
    pending = [part for part in reversed(text.split("/")) if part]
    done, links = "/", 0
    while True:
        try:
            info = lstat(done)
        except OSError as exc:
            return f"{done}: {exc.strerror or exc}"
        if info.st_uid != 0:
            return f"{done} belongs to uid {info.st_uid}, not root"
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > _MAX_LINKS:
                return f"{text}: more than {_MAX_LINKS} symbolic links (a loop?)"
            try:
                target = readlink(done)
            except OSError as exc:
                return f"{done}: {exc.strerror or exc}"
            pending.extend(part for part in reversed(target.split("/")) if part)
            done = "/" if target.startswith("/") else os.path.dirname(done)
            continue
        if info.st_mode & 0o022:
            return f"{done} is writable by its group or others (mode {stat.S_IMODE(info.st_mode):04o})"
        if not pending:
            break
        if not stat.S_ISDIR(info.st_mode):
            return f"{done} is not a directory"
        if not info.st_mode & stat.S_IXOTH:
            return f"other users cannot enter {done} (mode {stat.S_IMODE(info.st_mode):04o})"
        part = pending.pop()
        if part == "..":
            done = os.path.dirname(done)
        elif part != ".":
            done = os.path.join(done, part)
    kind_ok = stat.S_ISDIR(info.st_mode) if want == "dir" else stat.S_ISREG(info.st_mode)
    if not kind_ok:
        return f"{done} is not {'a directory' if want == 'dir' else 'a regular file'}"
    if info.st_mode & PATH_WANTS[want] != PATH_WANTS[want]:
        verb = {"exec": "run", "read": "read", "dir": "list"}[want]
        return f"other users cannot {verb} {done} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def lab_python_paths() -> list[tuple[Path, str]]:
    """What the students' jobs run and read of this Python, with what they need of each: the
    interpreter, its standard library, and in a venv its configuration, activate script and
    site-packages directory (not every file below it)."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    paths = [(Path(sys.executable), "exec"), (Path(sys.base_prefix) / "lib" / version / "os.py", "read")]
    if sys.prefix != sys.base_prefix:
        venv = Path(sys.prefix)
        paths += [(venv / "pyvenv.cfg", "read"), (venv / "bin" / "activate", "read"),
                  (venv / "lib" / version / "site-packages", "dir")]
    return paths


def lab_python(check: Callable[[Path, str], str | None] = trusted_path_problem,
               ) -> tuple[str, list[str], str | None]:
    """(python, setup, note) for the lab profile: this Python (and its venv, the ``source`` line
    quoted) when ``check`` (:func:`trusted_path_problem`) finds nothing wrong with any of
    :func:`lab_python_paths`, else ``python3`` from the nodes' PATH with a note saying why."""
    try:  # the path as a job's --python takes it, or every student's job would be refused
        validate_spec(JobSpec("pass", python=sys.executable))
        problem = None
    except SpecError as exc:
        problem = exc.problem
    for path, want in lab_python_paths():
        problem = problem or check(path, want)
    if problem is not None:
        return "python3", [], (f"{sys.executable} is not safe for every student to use ({problem}), "
                               "so the students' jobs run python3 from the nodes' PATH")
    return sys.executable, venv_setup(sys.prefix) if sys.prefix != sys.base_prefix else [], None


def venv_setup(prefix: str) -> list[str]:
    """The setup line that activates the venv at ``prefix``, as one quoted shell word."""
    return [f"source {shlex.quote(str(Path(prefix) / 'bin' / 'activate'))}"]


def group_sharers(name: str, gid: int, users: Iterable[tuple[str, int, int]],
                  members: Iterable[str]) -> list[str]:
    """The other non-root users who can read what ``name``'s primary group ``gid`` may: those
    whose primary group it is too (``users``: name, uid, gid) and its listed members."""
    users = list(users)
    root = {user for user, uid, _ in users if uid == 0}
    found = {user for user, uid, ugid in users if ugid == gid and uid != 0}
    found.update(members)
    return sorted(found - root - {name})


def shared_group_problem(pw: pwd.struct_passwd) -> str | None:
    """Why ``pw``'s primary group is not theirs alone, or None. A rank's umask is 027 (jobdir.py),
    so checkpoints are group-readable by design: with a shared group, others could read them."""
    try:
        group = grp.getgrgid(pw.pw_gid)
        label, members = f"{group.gr_name} (gid {pw.pw_gid})", list(group.gr_mem)
    except KeyError:
        label, members = f"gid {pw.pw_gid}", []
    users = [(u.pw_name, u.pw_uid, u.pw_gid) for u in pwd.getpwall()]
    sharers = group_sharers(pw.pw_name, pw.pw_gid, users, members)
    if not sharers:
        return None
    shown = ", ".join(sharers[:5]) + (f" and {len(sharers) - 5} more" if len(sharers) > 5 else "")
    return (f"{pw.pw_name}'s primary group {label} is shared with {shown}, who could read "
            f"{pw.pw_name}'s checkpoints (they are group-readable by design)")


# --- commands (root) ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Cluster:
    """The running box as its ``cluster.env`` describes it."""

    env: dict[str, str]

    @property
    def name(self) -> str:
        return self.env.get("JT_CLUSTER_NAME", "jtbox")

    @property
    def authorized_dir(self) -> Path:
        return Path(self.env["JT_CLUSTER_DIR"]) / "ssh" / "authorized_keys.d"

    def slurm_env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": self.env["SLURM_CONF"]}


def load_cluster() -> Cluster:
    """The box's settings, or a LabError saying to bring it up first."""
    path = cluster_dir() / "cluster.env"
    try:
        env = read_cluster_env(path)
    except OSError:
        raise LabError(f"the sandbox cluster is not set up ({path} is missing): "
                       "run 'jupyter tiers sandbox up' first") from None
    missing = [k for k in ("JT_SSH_HOST", "JT_SSH_PORT", "JT_KNOWN_HOSTS", "SLURM_CONF", "JT_CLUSTER_DIR")
               if not env.get(k)]
    if missing:
        raise LabError(f"{path} lacks {', '.join(missing)}: run 'jupyter tiers sandbox up' again")
    return Cluster(env)


def _run(argv: Sequence[str], *, env: dict[str, str] | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), env=env, text=True, capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except FileNotFoundError:
        raise LabError(f"{argv[0]} is not installed (run 'jupyter tiers sandbox up' first)") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(argv[:3])} did not answer within {timeout:.0f}s") from None


def _last(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def _as_user(pw: pwd.struct_passwd, argv: Sequence[str],
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as the user (runuser), with their HOME, in a plain environment."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": pw.pw_dir, "USER": pw.pw_name,
           "LOGNAME": pw.pw_name, "LC_ALL": "C"}
    runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or "runuser"
    return _run([runuser, "-u", pw.pw_name, "--", *argv], env=env, timeout=timeout)


def lookup_user(name: str) -> pwd.struct_passwd:
    """The existing Unix user ``name`` (validated), with a home directory."""
    check_user_name(name)
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise LabError(f"no Unix user {name!r} on this machine: create it first "
                       f"(e.g. useradd -m {name}), then add it to the lab") from None
    if pw.pw_uid == 0:
        raise LabError(f"{name} has uid 0 (root): add the students' own users")
    if not os.path.isabs(pw.pw_dir) or not os.path.isdir(pw.pw_dir):
        raise LabError(f"{name}'s home directory {pw.pw_dir!r} does not exist: the lab key lives "
                       f"there (create it: mkhomedir_helper {name})")
    return pw


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise LabError(f"sandbox {what} must run as root (it changes Slurm accounting and the "
                       f"cluster's sshd keys): try sudo jupyter tiers sandbox {what} NAME")


def _check_unlocked(name: str) -> None:
    try:
        shadow = Path("/etc/shadow").read_text()
    except OSError:
        return
    if shadow_locked(shadow, name):
        raise LabError(f"{name}'s account is locked (its /etc/shadow password starts with '!') and "
                       "the cluster's sshd, which runs without PAM, refuses locked accounts even "
                       f"with a key; unlock it without giving it a password: usermod -p '*' {name}")


def ensure_association(name: str, cluster: Cluster) -> str:
    """The user's association in account LAB_ACCOUNT on the box: 'created' or 'already there'."""
    env = cluster.slurm_env()
    shown = _run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"cluster={cluster.name}",
                  f"user={name}", "format=account"], env=env)
    if shown.returncode != 0:
        raise LabError(f"sacctmgr cannot read the associations: {_last(shown.stderr)}")
    if LAB_ACCOUNT in shown.stdout.split():
        return "already there"
    accounts = _run(["sacctmgr", "-n", "-P", "show", "account", LAB_ACCOUNT, "format=account"], env=env)
    if LAB_ACCOUNT not in accounts.stdout.split():
        made = _run(["sacctmgr", "-i", "add", "account", LAB_ACCOUNT, f"cluster={cluster.name}",
                     "description=jupyter-tiers teaching lab", "organization=lab"], env=env)
        if made.returncode != 0:
            raise LabError(f"sacctmgr add account {LAB_ACCOUNT}: {_last(made.stderr or made.stdout)}")
    added = _run(["sacctmgr", "-i", "add", "user", name, f"account={LAB_ACCOUNT}",
                  f"cluster={cluster.name}"], env=env)
    if added.returncode != 0:
        raise LabError(f"sacctmgr add user {name}: {_last(added.stderr or added.stdout)}")
    return "created"


def ensure_key(pw: pwd.struct_passwd) -> tuple[Path, tuple[str, str], str]:
    """(path, public key, 'created'|'kept'): the lab key pair, made by the user in their ~/.ssh."""
    sshdir = Path(pw.pw_dir) / ".ssh"
    key = sshdir / Path(_KEY_NAME).name
    if sshdir.is_symlink() or key.is_symlink():
        raise LabError(f"{sshdir if sshdir.is_symlink() else key} is a symlink: refusing to use it "
                       "for the lab key (remove it, then add the user again)")
    made = _as_user(pw, ["mkdir", "-p", "-m", "700", str(sshdir)])
    if made.returncode != 0:
        raise LabError(f"cannot create {sshdir} as {pw.pw_name}: {_last(made.stderr)}")
    status = "kept"
    if not os.path.lexists(key):
        gen = _as_user(pw, ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                            f"jupyter-tiers-lab:{pw.pw_name}", "-f", str(key)])
        if gen.returncode != 0:
            raise LabError(f"ssh-keygen as {pw.pw_name} failed: {_last(gen.stderr)}")
        status = "created"
    _as_user(pw, ["chmod", "600", str(key)])
    info = os.lstat(key)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != pw.pw_uid or info.st_mode & 0o777 != 0o600:
        raise LabError(f"{key} must be {pw.pw_name}'s own regular file with mode 0600 "
                       f"(it is uid {info.st_uid}, mode {info.st_mode & 0o7777:o}); "
                       "remove it and add the user again")
    public = _as_user(pw, ["ssh-keygen", "-y", "-f", str(key)])
    if public.returncode != 0:
        raise LabError(f"cannot read the public half of {key} (a passphrase?): {_last(public.stderr)}; "
                       "remove the key and add the user again")
    return key, parse_public_key(public.stdout), status


def authorize(name: str, key: tuple[str, str], cluster: Cluster) -> str:
    """Write the cluster's ``authorized_keys.d/NAME``: 'added', 'replaced' or 'already there'."""
    directory = cluster.authorized_dir
    if not directory.is_dir() or directory.is_symlink():
        raise LabError(f"{directory} is missing: this cluster predates per-user keys; "
                       "run 'jupyter tiers sandbox up' once, then add the user again")
    target = directory / name
    line = authorized_line(name, key)
    old = target.read_text() if target.is_file() else None
    if old == line:
        return "already there"
    tmp = directory / f".{name}.new"
    tmp.write_text(line)
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    return "added" if old is None else "replaced"


def check_login(pw: pwd.struct_passwd, key: Path, cluster: Cluster) -> str:
    """Log in as the user with the lab key; their name as the cluster sees it and sbatch's word."""
    env = cluster.env
    argv = ["ssh", "-n", "-F", "/dev/null", "-i", str(key),
            "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "IdentityAgent=none", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
            "-p", env["JT_SSH_PORT"], f"{pw.pw_name}@{env['JT_SSH_HOST']}",
            "id -un && cd && sbatch --test-only -p debug -t 1 --wrap true"]
    result = _as_user(pw, argv, timeout=90)
    lines = result.stdout.split()
    if result.returncode != 0 or not lines or lines[0] != pw.pw_name:
        raise LabError(f"{pw.pw_name} cannot use the cluster yet: {_last(result.stderr or result.stdout)}")
    return pw.pw_name


def write_lab_config(cluster: Cluster, path: Path = SYSTEM_CONFIG,
                     home: str | None = None) -> tuple[bool, str | None]:
    """Write the shared ``sandbox`` profile into ``path`` (0644) and, once a student's ``home``
    is known, ``sandbox-serve`` with that home added to its path_map: (changed, note about python)."""
    import yaml

    def profile_now(name: str) -> Any:
        data = yaml.safe_load(path.read_text()) if path.is_file() else None
        profiles = data.get("profiles") if isinstance(data, dict) else None
        return profiles.get(name) if isinstance(profiles, dict) else None

    python, setup, note = lab_python()
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    lab = lab_profile(cluster.env, python, setup, profile_now(LAB_PROFILE))
    changed = write_profile(path, lab, LAB_PROFILE)
    if home is not None:
        serve = lab_serve_profile([home], profile_now(LAB_SERVE_PROFILE))
        changed = write_profile(path, serve, LAB_SERVE_PROFILE) or changed
    os.chmod(path, 0o644)
    return changed, note


def add_user(name: str, say: Callable[[str], None] = print, config: Path = SYSTEM_CONFIG, *,
             allow_shared_group: bool = False) -> None:
    """``sandbox add-user NAME``: see the module docstring. Prints each step's outcome. A user
    whose primary group others share is refused unless ``allow_shared_group``, then warned about."""
    check_user_name(name)
    _require_root("add-user")
    pw = lookup_user(name)
    _check_unlocked(name)
    shared = shared_group_problem(pw)
    if shared and not allow_shared_group:
        raise LabError(f"{shared}; give {name} a group of their own (groupadd {name}-lab && usermod -g "
                       f"{name}-lab {name}), or add --allow-shared-group if they may")
    if shared:
        say(f"{name}: warning: {shared} (--allow-shared-group)")
    cluster = load_cluster()
    made = ensure_association(name, cluster)
    say(f"{name}: Slurm association {LAB_ACCOUNT}/{name} on {cluster.name}: {made}")
    key, public, status = ensure_key(pw)
    say(f"{name}: SSH key {key}: {status} (owned by {name}, mode 0600)")
    where = f"{name}@{cluster.env['JT_SSH_HOST']}:{cluster.env['JT_SSH_PORT']}"
    say(f"{name}: key authorised for ssh {where} (as {name} only): {authorize(name, public, cluster)}")
    check_login(pw, key, cluster)
    say(f"{name}: checked: logs in as {name}, sbatch accepts the association")
    changed, note = write_lab_config(cluster, config, home=pw.pw_dir)
    say(f"profiles '{LAB_PROFILE}' and '{LAB_SERVE_PROFILE}' (serving from {pw.pw_dir}) in {config}: "
        f"{'written' if changed else 'kept'}" + (f" ({note})" if note else ""))
    say(f"{name} can now run %%slurm_train --profile {LAB_PROFILE} in their own Jupyter "
        "(and examples/teaching_lab.ipynb, unchanged)")


def remove_user(name: str, say: Callable[[str], None] = print) -> None:
    """``sandbox remove-user NAME``: drop the association and the authorisation (the user's own
    key files stay theirs). Running jobs are not cancelled."""
    check_user_name(name)
    _require_root("remove-user")
    cluster = load_cluster()
    target = cluster.authorized_dir / name
    if target.is_file() or target.is_symlink():
        target.unlink()
        say(f"{name}: key no longer authorised for the cluster's sshd")
    else:
        say(f"{name}: no key was authorised")
    env = cluster.slurm_env()
    shown = _run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"cluster={cluster.name}",
                  f"user={name}", f"account={LAB_ACCOUNT}", "format=user"], env=env)
    if name in shown.stdout.split():
        gone = _run(["sacctmgr", "-i", "delete", "user", name, f"account={LAB_ACCOUNT}",
                     f"cluster={cluster.name}"], env=env)
        if gone.returncode != 0:
            raise LabError(f"sacctmgr delete user {name}: {_last(gone.stderr or gone.stdout)} "
                           "(jobs still running? cancel them, then remove the user again)")
        say(f"{name}: Slurm association {LAB_ACCOUNT}/{name} removed")
    else:
        say(f"{name}: had no Slurm association in {LAB_ACCOUNT}")
