"""The supervisor of one local service: ``python -m jupyter_tiers.local.serve_supervisor [--detach] DIR``.

It plays the kubelet's and the Deployment controller's part for a service of the local tier. The
tier writes the service directory (``desired.json``: replicas, the current revision and its
program; ``code/<revision>/`` with the body and ``env.json``, mode 600) and starts this module
detached from the kernel (own session; with ``--detach`` it forks once more), so the service
survives a kernel restart. Then, until it is asked to stop (a ``delete`` file, ``deleted`` in
``desired.json``, or SIGTERM/SIGINT):

- every replica is a process in its own process group, with its own free loopback port in
  ``PORT`` / ``JT_PORT`` (a shell body's ``{port}`` was already replaced by ``${PORT}``); its
  output goes, line by line and prefixed ``<replica>: ``, to ``service.log``;
- its readiness is probed every second like a kubelet's probe: an HTTP GET of the asked path
  (200-399 is ready) or a TCP connect to the port; three failures in a row make it not ready.
  A probe passes only if every socket listening on the port is open in the replica's own
  processes (listeners.py): another local user can read the port and bind it first, and must
  neither make the replica ready nor receive its traffic;
- a replica that exits is restarted with the kubelet's back-off (backoff.py), shown meanwhile as
  ``CrashLoopBackOff``;
- ``desired.json`` is re-read on SIGHUP (and when its mtime changes): a new revision is rolled out
  one replica at a time, a new replica ready before an old one goes (maxSurge 1, maxUnavailable
  0); a new replica count scales;
- the front port (router.py) relays each connection to the ready replicas in turn, checking the
  replica's listening sockets again around each connection, and at most
  ``$JUPYTER_TIERS_FRONT_MAX_CONNECTIONS`` (256) connections at once;
- ``service.log`` is rotated once it passes ``LOG_MAX_BYTES`` (``$JUPYTER_TIERS_SERVICE_LOG_MAX``):
  it becomes ``service.log.1`` (replacing the one before) and a new one starts.

On stop every replica's group gets SIGTERM, then SIGKILL after ``GRACE_S``; then every process
still carrying ``JT_JOB_DIR=<this directory>`` is killed (the local training supervisor's helper),
and ``service.json`` says ``deleted``. As a child subreaper, the supervisor also reaps the
replicas' orphaned children. ``service.json`` (this module's report) is replaced atomically.

This module imports only the standard library and small pure modules, to start fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ..batch.requeue import restart_marker
from . import listeners, processes, slurmenv
from .backoff import BackOff
from .roundrobin import RoundRobin
from .router import HOST, MAX_CONNECTIONS, FrontPort
from .wakeup import Wakeup

DESIRED_FILE = "desired.json"
DESIRED_LOCK = "desired.lock"
STATE_FILE = "service.json"
LOG_FILE = "service.log"
ROTATED_LOG = "service.log.1"
LOG_MAX_ENV = "JUPYTER_TIERS_SERVICE_LOG_MAX"
LOG_MAX_BYTES = 64 << 20  # then service.log becomes service.log.1 (one kept, like a kubelet's rotation)
FRONT_MAX_ENV = "JUPYTER_TIERS_FRONT_MAX_CONNECTIONS"
PID_FILE = "supervisor.pid"
SUPERVISOR_LOG = "supervisor.log"
DELETE_FILE = "delete"
LOCK_FILE = ".lock"  # taken by the tier while it writes desired.json and code/<revision>/
ENV_FILE = "env.json"
REVISION_FILE = "revision.json"
CODE_TOKEN = "{code}"  # in a revision's program: its code directory
CODE_DIR = "code"
GRACE_S = processes.KILL_WAIT
PROBE_PERIOD_S = 1.0
PROBE_TIMEOUT_S = 1.0
PROBE_FAILURES = 3
TICK_S = 0.2
DRAIN_S = 5.0  # at most this long after a replica exits, its last output is awaited before the exit is shown
MAX_LINE = 65536


def output_drained(reader: threading.Thread | None, exited_at: float, now: float) -> bool:
    """Whether an ended replica's output is all in the log: its log thread has reached the end of
    the pipe, or ``DRAIN_S`` has passed since the exit (a process it left, holding the pipe open,
    must not hold the exit back for ever)."""
    return reader is None or not reader.is_alive() or now - exited_at >= DRAIN_S


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: Mapping[str, Any], mode: int = 0o644) -> None:
    """Replace ``path`` atomically (readers see the old or the new file, never a part)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(json.dumps(dict(data), indent=1, sort_keys=True).encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def probe(port: int, path: str | None, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """One readiness probe of ``127.0.0.1:port``: None when it passes, else the kubelet's words."""
    if path is None:
        try:
            with socket.create_connection((HOST, port), timeout=timeout):
                return None
        except OSError as exc:
            return f"dial tcp {HOST}:{port}: connect: {_why(exc)}"
    url = f"http://{HOST}:{port}{path}"
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"User-Agent": "kube-probe/jupyter-tiers"})
        code = conn.getresponse().status
    except TimeoutError:  # connected, but no answer in time (the kubelet's words)
        return f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
    except OSError as exc:
        return f'Get "{url}": dial tcp {HOST}:{port}: connect: {_why(exc)}'
    except http.client.HTTPException as exc:
        return f'Get "{url}": {type(exc).__name__}'
    finally:
        conn.close()
    return None if 200 <= code < 400 else f"HTTP probe failed with statuscode: {code}"


def _why(exc: OSError) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "i/o timeout"
    return (exc.strerror or str(exc)).lower()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Replica:
    """One replica: its process (None while it waits to be restarted) and what is known of it."""

    def __init__(self, service: str, revision: str, port: int) -> None:
        self.name = f"{service}-{revision[:10]}-{secrets.token_hex(3)[:5]}"
        self.revision = revision
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.phase = "Pending"  # Pending -> Running -> Terminating
        self.ready = False
        self.restarts = 0
        self.created_at = time.time()
        self.started_at: float | None = None
        self.reason: str | None = "ContainerCreating"
        self.message: str | None = None
        self.exit_code: int | None = None
        self.backoff = BackOff()
        self.restart_at: float | None = None
        self.failures = 0
        self.next_probe = 0.0
        self.kill_at: float | None = None
        self.reader: threading.Thread | None = None
        self.exited_at: float | None = None  # when its process was seen ended (monotonic), until recorded
        self.incarnation = 0  # counts starts, so a probe's answer is matched to its process
        self.probing = False
        self.probed: tuple[int, str | None] | None = None  # (incarnation, problem), from a probe thread
        self.listeners: frozenset[int] = frozenset()  # inodes of its listening sockets, once verified

    def report(self) -> dict[str, Any]:
        return {
            "name": self.name, "revision": self.revision, "port": self.port,
            "pid": self.proc.pid if self.proc is not None else None, "phase": self.phase,
            "ready": self.ready, "restarts": self.restarts, "created_at": self.created_at,
            "started_at": self.started_at, "reason": self.reason, "message": self.message,
            "exit_code": self.exit_code,
        }


class ServeSupervisor:
    """Runs one service directory until it is deleted; see the module docstring."""

    def __init__(self, svcdir: Path) -> None:
        self.dir = svcdir
        self.desired: dict[str, Any] = read_json(svcdir / DESIRED_FILE) or {}
        self._desired_mtime = 0
        self.replicas: list[Replica] = []
        self.balancer = RoundRobin()
        self.front: FrontPort | None = None
        self.state: dict[str, Any] = {}
        self.signalled: int | None = None
        self.reload = False
        self.log_fd = -1
        self._log_lock = threading.Lock()
        self._wakeup = Wakeup()
        self._subreaper = False
        self._saved: str = ""
        self._revisions: dict[str, dict[str, Any]] = {}
        self._by_port: dict[int, Replica] = {}  # the ready replicas, for the front port's threads
        try:
            self.log_max = max(1024, int(os.environ.get(LOG_MAX_ENV) or LOG_MAX_BYTES))
        except ValueError:
            self.log_max = LOG_MAX_BYTES
        try:
            self.front_max = max(1, int(os.environ.get(FRONT_MAX_ENV) or MAX_CONNECTIONS))
        except ValueError:
            self.front_max = MAX_CONNECTIONS

    # --- signals ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: object) -> None:
        if signum == signal.SIGHUP:
            self.reload = True
        elif self.signalled is None:
            self.signalled = signum

    def _wait(self, timeout: float) -> None:
        self._wakeup.wait(timeout)
        if self._subreaper:
            processes.reap_zombies(
                {r.proc.pid for r in self.replicas if r.proc is not None and r.proc.returncode is None})

    def _stop_requested(self) -> bool:
        return (self.signalled is not None or bool(self.desired.get("deleted"))
                or (self.dir / DELETE_FILE).exists())

    # --- desired state -----------------------------------------------------------------------
    def _load_desired(self) -> None:
        try:
            mtime = (self.dir / DESIRED_FILE).stat().st_mtime_ns
        except OSError:
            return
        if mtime == self._desired_mtime and not self.reload:
            return
        self.reload = False
        data = read_json(self.dir / DESIRED_FILE)
        if data is not None:
            self.desired = data
            self._desired_mtime = mtime
            for revision in self._wanted():
                self._revision(revision)

    def _revision(self, revision: str) -> dict[str, Any]:
        """A revision's program, readiness path and body kind (``code/<revision>/revision.json``)."""
        info = self._revisions.get(revision)
        if info is None:
            info = read_json(self.dir / CODE_DIR / revision / REVISION_FILE) or {}
            if info:
                self._revisions[revision] = info
        return info

    def _forget_revisions(self) -> None:
        """Remove the code (and env file) of revisions no replica runs any more."""
        keep = set(self._wanted()) | {r.revision for r in self.replicas}
        if not set(self._revisions) - keep:
            return
        # Under the tier's lock, with desired.json read afresh: a cell re-run just now may have
        # made an old revision current again.
        fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "r+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.reload = True
            self._load_desired()
            keep = set(self._wanted()) | {r.revision for r in self.replicas}
            for revision in [r for r in self._revisions if r not in keep]:
                del self._revisions[revision]
                shutil.rmtree(self.dir / CODE_DIR / revision, ignore_errors=True)

    # --- replicas ----------------------------------------------------------------------------
    def _env(self, replica: Replica) -> dict[str, str]:
        env = slurmenv.clean_env(os.environ)
        bindir = os.path.dirname(sys.executable)
        rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bindir]
        env["PATH"] = os.pathsep.join([bindir, *rest]) if bindir else os.pathsep.join(rest)
        code = self.dir / CODE_DIR / replica.revision
        extra = read_json(code / ENV_FILE) or {}
        env.update({str(k): str(v) for k, v in extra.items()})
        if not self._revision(replica.revision).get("shell"):
            env.setdefault("PYTHONUNBUFFERED", "1")  # so print() reaches the log at once
        env.update(
            PORT=str(replica.port), JT_PORT=str(replica.port),
            JT_SERVICE_NAME=str(self.desired.get("name") or ""), JT_REPLICA=replica.name,
            JT_SERVICE_DIR=str(self.dir),
            JT_JOB_DIR=str(self.dir),  # the marker kill_job_processes looks for
        )
        return env

    def _spawn(self, replica: Replica) -> None:
        code = str(self.dir / CODE_DIR / replica.revision)
        argv = self._revision(replica.revision).get("program") or []
        program = [str(a).replace(CODE_TOKEN, code) for a in argv]
        group: dict[str, Any] = (
            {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        )
        if not program:
            replica.exit_code = 128
            self._crashed(replica, "StartError", f"revision {replica.revision} has no program")
            return
        try:
            proc = subprocess.Popen(
                program, env=self._env(replica), cwd=self.dir, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, close_fds=True, **group)
        except OSError as exc:
            replica.exit_code = 128
            self._crashed(replica, "StartError", f"cannot start {program[0] if program else '?'}: "
                          f"{exc.strerror or exc}")
            return
        replica.proc = proc
        replica.incarnation += 1
        replica.listeners = frozenset()  # a new process: its sockets are verified afresh
        replica.phase = "Running"
        replica.started_at = time.time()
        replica.reason = None
        replica.message = None
        replica.failures = 0
        replica.next_probe = time.monotonic()
        assert proc.stdout is not None
        replica.reader = threading.Thread(target=self._pump_log, args=(replica.name, proc.stdout),
                                          name=f"jt-log-{replica.name}", daemon=True)
        replica.reader.start()

    def _pump_log(self, name: str, stream: IO[bytes]) -> None:
        prefix = f"{name}: ".encode()
        with contextlib.suppress(OSError, ValueError):
            for line in iter(lambda: stream.readline(MAX_LINE), b""):
                if not line.endswith(b"\n"):
                    line += b"\n"
                with self._log_lock:
                    os.write(self.log_fd, prefix + line)
        with contextlib.suppress(OSError):
            stream.close()

    def _mark_restart(self, replica: Replica) -> None:
        """``NAME: — restart N —`` in the log before the new process's first line, after the last
        line of the one before (its reader has read to the end of its pipe; bounded: a child
        process that kept the pipe open must not hold up the loop)."""
        if replica.reader is not None:
            replica.reader.join(timeout=2.0)
        with self._log_lock, contextlib.suppress(OSError):
            os.write(self.log_fd, f"{replica.name}: {restart_marker(replica.restarts)}\n".encode())

    def _crashed(self, replica: Replica, reason: str, message: str | None = None) -> None:
        replica.proc = None
        replica.ready = False
        replica.restart_at = replica.backoff.exited(replica.started_at or time.time(), time.time())
        replica.reason = reason
        replica.message = message or replica.backoff.message(replica.name)

    def _new_replica(self, revision: str) -> None:
        replica = Replica(str(self.desired.get("name") or "svc"), revision, _free_port())
        self.replicas.append(replica)
        self._spawn(replica)

    def _terminate(self, replica: Replica) -> None:
        if replica.phase == "Terminating":
            return
        replica.phase = "Terminating"
        replica.ready = False
        replica.reason = None
        replica.message = None
        if replica.proc is None:
            return
        self._signal(replica, signal.SIGTERM)
        replica.kill_at = time.monotonic() + GRACE_S

    @staticmethod
    def _signal(replica: Replica, sig: int) -> None:
        proc = replica.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
            if sig == signal.SIGTERM:
                os.killpg(proc.pid, signal.SIGCONT)

    def _check_exits(self) -> None:
        for replica in list(self.replicas):
            proc = replica.proc
            if proc is not None and proc.poll() is not None:
                if replica.exited_at is None:
                    replica.exited_at = time.monotonic()
                    replica.ready = False  # no new connection to a process that has ended
                    self._kill_leftovers(proc.pid)
                # A crash is shown once its last lines are in the log (the summary quotes the last
                # one): the log thread may still be copying the pipe when the exit is seen.
                if replica.phase != "Terminating" and not output_drained(replica.reader, replica.exited_at,
                                                                        time.monotonic()):
                    continue
                replica.exited_at = None
                rc = proc.returncode
                replica.exit_code = rc if rc >= 0 else 128 - rc  # a signal as a container runtime shows it
                if replica.phase == "Terminating":
                    replica.proc = None
                else:
                    self._crashed(replica, "CrashLoopBackOff")
            if replica.phase == "Terminating" and replica.proc is None:
                self.replicas.remove(replica)

    @staticmethod
    def _below() -> list[tuple[int, bytes, bytes]]:
        """(pid, parent, process group) of every process below the supervisor (a subreaper: the
        replicas' orphans are ours)."""
        found = []
        for pid in processes.descendants(os.getpid()):
            try:
                fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()
            except OSError:
                continue
            if len(fields) > 2:
                found.append((pid, fields[1], fields[2]))
        return found

    def _group_members(self, group: int) -> list[int]:
        """The processes below the supervisor in process group ``group`` (a replica's: its main
        process leads it)."""
        return [pid for pid, _parent, pgrp in self._below() if pgrp == str(group).encode()]

    def _kill_leftovers(self, group: int) -> None:
        """SIGKILL what is left of a replica whose main process ended (its process group), as a
        container runtime stops the whole container (a child would keep the port otherwise)."""
        for pid in self._group_members(group):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def _replica_tree(self, replica: Replica) -> set[int]:
        """The replica's processes: its main process, what runs below it, its process group, and
        the orphans the supervisor adopted (a server that daemonized: setsid and its parent gone)
        with what runs below them. All are this service's own processes."""
        proc = replica.proc
        if proc is None or proc.returncode is not None:
            return set()
        me, group = str(os.getpid()).encode(), str(proc.pid).encode()
        mains = {r.proc.pid for r in list(self.replicas) if r.proc is not None}
        below = self._below()
        tree = {proc.pid, *processes.descendants(proc.pid)}
        tree |= {pid for pid, _parent, pgrp in below if pgrp == group}
        for pid, parent, _pgrp in below:
            if parent == me and pid not in mains:
                tree |= {pid, *processes.descendants(pid)}
        return tree

    def _verify(self, replica: Replica) -> tuple[frozenset[int] | None, str | None]:
        """Whether the sockets listening on the replica's port are its own (listeners.py)."""
        inodes, problem = listeners.verify_listener(replica.port, lambda: self._replica_tree(replica),
                                                    replica.listeners)
        if inodes is not None:
            replica.listeners = inodes
        return inodes, problem

    def _verify_backend(self, port: int) -> frozenset[int] | None:
        """For the front port: the verified listening sockets of the ready replica on ``port``
        (checked now), or None (no such replica, or the port is not its own)."""
        replica = self._by_port.get(port)
        return None if replica is None else self._verify(replica)[0]

    def _restart_due(self) -> None:
        now = time.time()
        for replica in self.replicas:
            if replica.proc is None and replica.phase != "Terminating" and replica.restart_at is not None \
                    and now >= replica.restart_at:
                replica.restart_at = None
                replica.restarts += 1
                self._mark_restart(replica)
                self._spawn(replica)

    def _probe(self) -> None:
        """Take in the probe answers that came, then start the due probes, each on its own thread
        (a replica that accepts and never answers must not hold up the others or this loop).
        Answers first: a probe thread is only started once its previous answer was taken."""
        for replica in self.replicas:
            answer = replica.probed
            if answer is None:
                continue
            replica.probed = None
            incarnation, problem = answer
            if (incarnation != replica.incarnation or replica.proc is None or replica.phase != "Running"
                    or replica.exited_at is not None):
                continue  # about a process that has ended since
            if problem is None:
                replica.failures = 0
                replica.ready = True
                replica.reason = replica.message = None
                continue
            replica.failures += 1
            if replica.failures >= PROBE_FAILURES:
                replica.ready = False
                replica.reason = "Unhealthy"
                replica.message = f"Readiness probe failed: {problem}"
        for replica in self.replicas:
            if replica.proc is None or replica.phase != "Running" or replica.probing \
                    or replica.probed is not None or replica.exited_at is not None \
                    or time.monotonic() < replica.next_probe:
                continue
            path = self._revision(replica.revision).get("readiness")
            path = str(path) if isinstance(path, str) and path else None
            replica.next_probe = time.monotonic() + PROBE_PERIOD_S
            replica.probing = True
            threading.Thread(target=self._probe_one, args=(replica, replica.incarnation, path),
                             name=f"jt-probe-{replica.name}", daemon=True).start()

    def _probe_one(self, replica: Replica, incarnation: int, path: str | None) -> None:
        try:
            # Not even a probe for a socket of another process; a port still closed is the
            # probe's to report (the kubelet's words).
            inodes, problem = self._verify(replica)
            if inodes is not None or problem == listeners.nothing_listens(replica.port):
                problem = probe(replica.port, path)
                if problem is None:  # it answered: but was it the replica, still?
                    problem = self._verify(replica)[1]
        except Exception as exc:  # a probe never takes the supervisor down
            problem = f"probe error: {exc!r}"
        replica.probed = (incarnation, problem)
        replica.probing = False
        self._wakeup.wake()  # take the answer in now, not at the next tick

    def _wanted(self) -> dict[str, int]:
        """Replicas wanted per revision: the current one's and, while a canary runs, the canary's."""
        revision = str(self.desired.get("revision") or "0")
        wanted = {revision: max(0, int(self.desired.get("replicas") or 0))}
        canary = self.desired.get("canary")
        if isinstance(canary, Mapping) and canary.get("revision"):
            extra = str(canary["revision"])
            wanted[extra] = wanted.get(extra, 0) + max(0, int(canary.get("replicas") or 0))
        return wanted

    def _reconcile(self) -> None:
        revision = str(self.desired.get("revision") or "0")
        wanted = self._wanted()
        total = sum(wanted.values())
        live = [r for r in self.replicas if r.phase != "Terminating"]
        mine: dict[str, list[Replica]] = {}
        for rev, want in wanted.items():
            own = [r for r in live if r.revision == rev]
            if len(own) > want:  # scale down: the not ready first, then the newest
                for replica in sorted(own, key=lambda r: (r.ready, -r.created_at))[: len(own) - want]:
                    self._terminate(replica)
                own = [r for r in own if r.phase != "Terminating"]
            mine[rev] = own
        old = [r for r in live if r.revision not in wanted]
        for replica in old:
            if not replica.ready:  # not serving anyway
                self._terminate(replica)
        old = [r for r in old if r.phase != "Terminating"]
        ready = sum(1 for own in mine.values() for r in own if r.ready) + sum(1 for r in old if r.ready)
        for replica in sorted(old, key=lambda r: r.created_at):
            if ready - 1 >= total:  # a new one is ready in its place
                self._terminate(replica)
                ready -= 1
        old = [r for r in old if r.phase != "Terminating"]
        for rev, want in wanted.items():
            own = mine[rev]
            # maxSurge 1 across the service: one replica more than wanted while old ones remain
            while len(own) < want and (not old or sum(map(len, mine.values())) + len(old) < total + 1):
                self._new_replica(rev)
                own.append(self.replicas[-1])
        done = all(len(mine[rev]) >= want and all(r.ready for r in mine[rev]) for rev, want in wanted.items())
        if done and not old:
            self.state["rolled_out"] = revision

    def _rotate_log(self) -> None:
        if os.fstat(self.log_fd).st_size <= self.log_max:
            return
        with self._log_lock:  # no replica line is written meanwhile: each stays whole in one file
            # service.log never goes missing, so a follower opening it mid-rotation reads on: the
            # old file gets its second name first, then a new file takes service.log's at once.
            fresh, linked = self.dir / (LOG_FILE + ".new"), self.dir / (ROTATED_LOG + ".new")
            for stale in (fresh, linked):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
            os.link(self.dir / LOG_FILE, linked)
            os.replace(linked, self.dir / ROTATED_LOG)
            fd = os.open(fresh, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            os.replace(fresh, self.dir / LOG_FILE)
            os.close(self.log_fd)
            self.log_fd = fd

    def _kill_descendants(self, rounds: int = 100) -> None:
        """SIGKILL every process left below the supervisor. As a child subreaper it inherits the
        replicas' orphans, so this also finds a daemon that left its session and cleared its
        environment (which the JT_JOB_DIR scan cannot see)."""
        me = os.getpid()
        processes.kill_until_gone(lambda: processes.descendants(me), lambda: self._wait(0.02), rounds)

    def _kill_late(self) -> None:
        now = time.monotonic()
        for replica in self.replicas:
            if replica.phase == "Terminating" and replica.kill_at is not None and now >= replica.kill_at:
                self._signal(replica, signal.SIGKILL)
                replica.kill_at = now + GRACE_S

    # --- report ------------------------------------------------------------------------------
    def _save(self, force: bool = False) -> None:
        self.state["observed_generation"] = self.desired.get("generation", 0)
        self.state["replicas"] = [r.report() for r in sorted(self.replicas, key=lambda r: r.name)]
        text = json.dumps(self.state, sort_keys=True)
        if text == self._saved and not force:
            return
        self._saved = text
        write_json(self.dir / STATE_FILE, {**self.state, "updated_at": time.time()})

    # --- the service -------------------------------------------------------------------------
    def run(self) -> int:
        self._wakeup.install(self._on_signal, defaults=(signal.SIGQUIT,))
        # The front port writes to clients that may have gone: EPIPE, never a deadly SIGPIPE.
        # (Replicas still start with SIGPIPE at its default: Popen's restore_signals resets it.)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self._subreaper = processes.become_subreaper()
        os.chdir(self.dir)
        self.log_fd = os.open(self.dir / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        previous = read_json(self.dir / STATE_FILE) or {}
        self.state = {
            "pid": os.getpid(), "pid_start": processes.proc_start_time(os.getpid()), "phase": "running",
            "created_at": previous.get("created_at") or self.desired.get("created_at") or time.time(),
            "rolled_out": None, "reason": None,
        }
        try:
            self.front = FrontPort.round_robin(self.balancer, int(self.desired.get("port") or 0),
                                               fallback=True, verify=self._verify_backend,
                                               max_connections=self.front_max).start()
            self.state["front_port"] = self.front.port
            self._save(force=True)
            while True:
                self._load_desired()
                if self._stop_requested():
                    break
                self._check_exits()
                self._restart_due()
                self._probe()
                self._reconcile()
                self._kill_late()
                self._forget_revisions()
                self._rotate_log()
                serving = {r.port: r for r in self.replicas if r.ready and r.phase == "Running"}
                self._by_port = serving
                self.balancer.set_backends(list(serving))
                self._save()
                self._wait(TICK_S)
        except BaseException as exc:  # record the end whatever happened
            traceback.print_exc()
            self.state["reason"] = f"local supervisor error: {exc!r}"
        finally:
            self._shutdown()
        return 0

    def _shutdown(self) -> None:
        self._by_port = {}
        self.balancer.set_backends([])
        if self.front is not None:
            self.front.close()
        for replica in self.replicas:
            self._terminate(replica)
        deadline = time.monotonic() + GRACE_S
        while any(r.proc is not None and r.proc.poll() is None for r in self.replicas):
            if time.monotonic() >= deadline:
                for replica in self.replicas:
                    self._signal(replica, signal.SIGKILL)
                break
            self._wait(0.05)
        for replica in self.replicas:
            if replica.proc is not None:
                with contextlib.suppress(Exception):
                    replica.proc.wait(timeout=30)
        processes.kill_job_processes(self.dir)
        self._kill_descendants()
        for _ in range(10):  # processes killed just now become zombies in a moment
            if not self._subreaper or not processes.zombie_children():
                break
            self._wait(0.02)
        self.replicas.clear()
        self.state["phase"] = "deleted" if self.state.get("reason") is None else "failed"
        self._save(force=True)
        if self.log_fd >= 0:
            with self._log_lock:
                os.close(self.log_fd)
                self.log_fd = -1


def main(argv: list[str] | None = None) -> int:
    svcdir, detached = processes.supervisor_argv("jupyter_tiers.local.serve_supervisor", "svcdir", argv)
    if detached:
        processes.detach([svcdir], PID_FILE)
    return ServeSupervisor(svcdir).run()


if __name__ == "__main__":
    sys.exit(main())
