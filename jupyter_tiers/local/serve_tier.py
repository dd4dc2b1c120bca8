"""LocalServeTier: a service's replicas as local processes (``%%k8s_serve`` on a local profile).

Every service is a directory ``<workdir>/services/<name>`` (workdir as for local jobs) run by its
own detached supervisor (serve_supervisor.py), so it survives a kernel restart and any new tier
with the same registry reattaches by name. The tier only writes what it wants (``desired.json``,
one ``code/<revision>/`` per pod template) and reads what the supervisor reports
(``service.json``, ``service.log``); status, widget, summary line and ``%tiers`` rows are the
Kubernetes tier's (serve_status.py maps the files onto the same model).

Options that only mean something on a cluster (image, GPUs, CPU/memory, node selector, pull
policy, tolerations, autoscale, secret env, patch, service type) are accepted and reported as not
applied: in the ``--dry-run`` plan and as the status message (the widget's banner, the text view's
``!`` line). ``--ingress`` and ``--tls-secret`` are refused (Kubernetes only).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..config.profiles import Profile
from ..config.registry import JobRecord, Registry, spec_for_record
from ..core.errors import JobNotFound, SpecError, SubmitError, TiersError
from ..core.model import TRACKS, PodLogLine, ServeSpec, ServiceState, ServiceStatus, WorkKind
from ..core.record import LIVE_CANARY
from ..engine import tier as tier_module
from ..engine.handles import Service
from ..engine.subscription import Subscription
from ..engine.tier import ServeTier
from ..serving.status import check_track, summary_line, track_pods
from ..spec.servespec import canary_replicas
from . import jobstate, listeners, processes
from . import serve_supervisor as ssv
from .router import FrontPort
from .serve_plan import (
    MAX_REPLICAS,
    SERVE_DEFAULTS,
    check_local,
    not_applied,
    note_for,
    render_plan,
    revision_of,
    shell_body,
)
from .serve_status import service_status
from .serve_watch import ServicePoller, tail_bytes, text_tail
from .tier import check_private_dir, check_workdir_owner, local_workdir

LAUNCH_TIMEOUT = 60.0
DELETE_TIMEOUT = 60.0
POLL_INTERVAL = 0.25
SERVICES_DIR = "services"
KEY_FILE = ".revision.key"

class LocalServeTier(ServeTier):
    """Services as local processes; see the module docstring."""

    backend = "local"

    def __init__(self, profile: Profile, registry: Registry | None = None, *,
                 poll_interval: float = POLL_INTERVAL) -> None:
        super().__init__(profile, registry)
        self.workdir = local_workdir(profile) / SERVICES_DIR
        self.poll_interval = poll_interval
        self._poller: ServicePoller | None = None
        self._forwards: list[FrontPort] = []

    # --- specs -----------------------------------------------------------------------------
    def profile_defaults(self) -> Mapping[str, Any]:
        # A local profile's defaults hold training options and the local serving ones
        # (config.LOCALSERVE_DEFAULTS); only those a ServeSpec has apply here.
        return {k: v for k, v in self.profile.defaults.items() if k in SERVE_DEFAULTS}

    def validate(self, spec: ServeSpec) -> None:
        check_local(spec)

    def render(self, spec: ServeSpec) -> str:
        return render_plan(spec, self.profile.setup)

    # --- files -----------------------------------------------------------------------------
    def _service_dir(self, name: str) -> Path:
        """The service's directory, made private (0700) under a workdir that is the user's own
        and closed to others; a symlink planted in its place is refused."""
        root = self.workdir.parent
        try:
            if not os.path.lexists(root):
                root.mkdir(parents=True, exist_ok=True, mode=0o700)
            check_workdir_owner(root)
            svcdir = self.workdir / name
            # Each component checked with lstat (a symlink refused, never followed), then its
            # owner and mode: another user's directory here would hold our code and log.
            for path, what in ((self.workdir, "the services directory"),
                               (svcdir, f"the directory of service {name}")):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(path, 0o700)
                check_private_dir(path, what)
        except OSError as exc:
            raise SubmitError(f"cannot prepare {self.workdir / name}: {exc.strerror or exc}") from None
        return svcdir

    @staticmethod
    def _locked(svcdir: Path) -> Any:
        fd = os.open(svcdir / ssv.LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        lock = os.fdopen(fd, "r+")
        fcntl.flock(lock, fcntl.LOCK_EX)
        return lock

    def _template(self, svcdir: Path, spec: ServeSpec) -> str:
        """The hash of what a replica runs: body, program, readiness, setup and a keyed hash of
        the env values (the key stays in the service directory, mode 600)."""
        key_path = svcdir / KEY_FILE
        try:
            key = key_path.read_bytes()
        except FileNotFoundError:
            key = secrets.token_bytes(32)
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
        env = dict(self.profile.env)
        env.update(dict(spec.env))
        if spec.model_path:  # --model-from: a new checkpoint rolls the replicas
            env["JT_MODEL_PATH"] = spec.model_path
        env_mac = hmac.new(key, json.dumps(sorted(env.items())).encode(), hashlib.sha256).hexdigest()
        template = json.dumps([spec.body, spec.shell, spec.python, spec.readiness,
                               list(self.profile.setup), env_mac])
        return hashlib.sha256(template.encode("utf-8")).hexdigest()

    def _write_revision(self, svcdir: Path, revision: str, spec: ServeSpec) -> None:
        code = svcdir / ssv.CODE_DIR / revision
        if (code / ssv.REVISION_FILE).exists():
            return
        code.mkdir(parents=True, exist_ok=True, mode=0o700)
        if spec.shell:
            (code / "command.sh").write_text(shell_body(spec.body), encoding="utf-8")
            program = ["/bin/sh", f"{ssv.CODE_TOKEN}/command.sh"]
        else:
            (code / "main.py").write_text(spec.body, encoding="utf-8")
            program = [spec.python, f"{ssv.CODE_TOKEN}/main.py"]
        if self.profile.setup:
            (code / "setup.sh").write_text("\n".join(self.profile.setup) + "\n", encoding="utf-8")
            program = ["bash", "-c", 'source "$1" && shift && exec "$@"', "jt-setup",
                       f"{ssv.CODE_TOKEN}/setup.sh", *program]
        env = {**dict(self.profile.env), **dict(spec.env)}
        if spec.model_path:
            env["JT_MODEL_PATH"] = spec.model_path
        ssv.write_json(code / ssv.ENV_FILE, env, mode=0o600)
        ssv.write_json(code / ssv.REVISION_FILE, {"program": program, "readiness": spec.readiness,
                                                  "shell": spec.shell})

    # --- apply -----------------------------------------------------------------------------
    def apply(self, spec: ServeSpec) -> Service:
        """Start the service, or update it in place: an unchanged spec changes nothing, a new
        replica count scales, anything else rolls the replicas one at a time."""
        check_local(spec)
        if spec.canary is not None:
            return self._apply_canary(spec)
        svcdir = self._service_dir(spec.name)
        ignored = not_applied(spec)
        with self._locked(svcdir):
            desired = ssv.read_json(svcdir / ssv.DESIRED_FILE) or {}
            alive = self._supervisor_alive(svcdir)
            if alive and desired.get("deleted"):
                raise TiersError(f"service {spec.name} is being deleted; run the cell again once it is gone")
            fresh = not alive  # a new service (or one started afresh): its own start time
            if not alive:
                self._clean(svcdir)
                desired = {}
            restarted_at = str(desired.get("restarted_at") or "")
            template = self._template(svcdir, spec)
            revision = revision_of(template, restarted_at)
            self._write_revision(svcdir, revision, spec)
            wanted = {"name": spec.name, "replicas": spec.replicas, "template": template,
                      "revision": revision, "port": spec.port, "shell": spec.shell, "ignored": ignored}
            changed = any(desired.get(k) != v for k, v in wanted.items())
            # Run without --canary, the cell is the whole service again: a canary goes.
            changed = desired.pop("canary", None) is not None or changed
            if changed or not desired:
                number = int(desired.get("revision_number") or 0)
                if desired.get("revision") != revision:
                    number += 1
                desired.update(wanted, revision_number=number,
                               generation=int(desired.get("generation") or 0) + 1,
                               restarted_at=restarted_at, deleted=False)
                desired.setdefault("created_at", time.time())
                ssv.write_json(svcdir / ssv.DESIRED_FILE, desired)
            if alive:
                self._wake(svcdir)
            else:
                self._launch(svcdir)
        existing = self.registry.find_by_name(self.name, spec.name)
        record = JobRecord(
            profile=self.name, tier=self.backend, job_id=spec.name, name=spec.name, kind=WorkKind.SERVICE,
            jobdir=str(svcdir), state=ServiceState.DEPLOYING.value,
            submitted_at=(existing.submitted_at
                          if existing and existing.kind == WorkKind.SERVICE and not fresh else time.time()),
            spec={**spec_for_record(spec), "revision": revision}, script=self.render(spec),
            nodelist=self._endpoint_of(svcdir), detail=f"0/{spec.replicas}",
        )
        self.registry.add(record)
        return Service(self, record)

    def _apply_canary(self, spec: ServeSpec) -> Service:
        """``--canary``: the cell's revision runs on its share of the replicas beside the live
        one (the supervisor keeps both counts; the front port sends each its share of the
        connections) until :meth:`promote` or :meth:`rollback`."""
        assert spec.canary is not None
        svcdir = self._service_dir(spec.name)
        count = canary_replicas(spec.replicas, spec.canary)
        with self._locked(svcdir):
            desired = ssv.read_json(svcdir / ssv.DESIRED_FILE) or {}
            if not desired or desired.get("deleted") or not self._supervisor_alive(svcdir):
                raise SpecError("canary", f"service {spec.name} is not running on the local tier: run "
                                "it without --canary first, then run the new revision with --canary")
            template = self._template(svcdir, spec)
            revision = revision_of(template, str(desired.get("restarted_at") or ""))
            self._write_revision(svcdir, revision, spec)
            canary = {"revision": revision, "template": template, "replicas": count, "percent": spec.canary,
                      "total": spec.replicas, "shell": spec.shell}
            if desired.get("canary") != canary or desired.get("replicas") != spec.replicas - count:
                desired.update(canary=canary, replicas=spec.replicas - count,
                               generation=int(desired.get("generation") or 0) + 1)
                ssv.write_json(svcdir / ssv.DESIRED_FILE, desired)
        self._wake(svcdir)
        existing = self.registry.find_by_name(self.name, spec.name)
        assert existing is not None  # the supervisor is alive, so the service was applied here
        live = {"percent": spec.canary, "replicas": count, "total": spec.replicas, "revision": revision,
                "applied_spec": spec_for_record(spec), "script": self.render(replace(spec, canary=None))}
        record = replace(existing, spec={**existing.spec, LIVE_CANARY: live},
                         state=ServiceState.DEPLOYING.value)
        self.registry.add(record)
        return Service(self, record)

    def promote(self, record: JobRecord) -> str:
        """The canary's revision becomes the service's: its replicas stay, the rest roll to it."""
        current = self.registry.find_by_name(self.name, record.name) or record
        live = current.spec.get(LIVE_CANARY)
        if not live:
            raise TiersError(f"service {record.name} has no canary to promote")

        def change(desired: dict[str, Any]) -> None:
            canary = desired.pop("canary", None)
            if not isinstance(canary, dict):
                raise TiersError(f"service {record.name} has no canary to promote")
            number = int(desired.get("revision_number") or 0) + 1
            desired.update(revision=canary["revision"], template=canary["template"], replicas=canary["total"],
                           shell=canary.get("shell", False), revision_number=number)

        self._update(current, change)
        spec = {**{k: v for k, v in current.spec.items() if k != LIVE_CANARY}, **live["applied_spec"],
                "revision": live["revision"], "canary": None}
        self.registry.add(replace(current, spec=spec, script=str(live.get("script") or current.script),
                                  state=ServiceState.DEPLOYING.value))
        return (f"service {record.name}: canary promoted; the canary revision rolls out to all "
                f"{live['total']} replicas")

    def rollback(self, record: JobRecord, revision: int | None = None) -> str:
        """Stop the canary's replicas; the live revision gets its full count back. Without a
        canary there is nothing to go back to here (no revision history is kept locally)."""
        current = self.registry.find_by_name(self.name, record.name) or record
        live = current.spec.get(LIVE_CANARY)
        if not live or revision is not None:
            return super().rollback(record, revision)

        def change(desired: dict[str, Any]) -> None:
            canary = desired.pop("canary", None)
            desired["replicas"] = int((canary or live)["total"])

        self._update(current, change)
        spec = {k: v for k, v in current.spec.items() if k != LIVE_CANARY}
        self.registry.add(replace(current, spec=spec, state=ServiceState.DEPLOYING.value))
        return (f"service {record.name}: canary removed; the stable revision is back to "
                f"{live['total']} replicas")

    def _clean(self, svcdir: Path) -> None:
        """A service directory whose supervisor is gone: stop what is left, start afresh (the
        log is kept)."""
        processes.kill_job_processes(svcdir)
        for name in (ssv.DESIRED_FILE, ssv.STATE_FILE, ssv.PID_FILE, ssv.DELETE_FILE):
            with contextlib.suppress(FileNotFoundError):
                (svcdir / name).unlink()
        shutil.rmtree(svcdir / ssv.CODE_DIR, ignore_errors=True)

    def _launch(self, svcdir: Path) -> None:
        """Start the supervisor in its own session; wait until it reports its front port."""
        root = Path(__file__).resolve().parents[2]  # the directory that holds jupyter_tiers/
        argv = [sys.executable, "-m", "jupyter_tiers.local.serve_supervisor", "--detach", str(svcdir)]
        with open(svcdir / ssv.SUPERVISOR_LOG, "ab") as log:
            proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True, close_fds=True)
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        try:
            code = proc.wait(timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        while code == 0 and time.monotonic() < deadline:
            state = ssv.read_json(svcdir / ssv.STATE_FILE) or {}
            if state.get("front_port") or not self._supervisor_alive(svcdir):
                break
            time.sleep(0.02)
        state = ssv.read_json(svcdir / ssv.STATE_FILE) or {}
        if code != 0 or not state.get("front_port"):
            tail = text_tail(svcdir / ssv.SUPERVISOR_LOG)
            how = "did not start in time" if code is None or not state else f"exited {code}"
            raise SubmitError(f"the local service supervisor {how}: {tail or 'no message'} "
                              f"(service dir {svcdir})")

    @staticmethod
    def _supervisor_pid(svcdir: Path) -> tuple[int | None, int | None]:
        state = ssv.read_json(svcdir / ssv.STATE_FILE)
        if state and state.get("pid"):
            return int(state["pid"]), state.get("pid_start")
        return jobstate.supervisor_pid(svcdir, None) if (svcdir / ssv.PID_FILE).exists() else (None, None)

    def _supervisor_alive(self, svcdir: Path) -> bool:
        state = ssv.read_json(svcdir / ssv.STATE_FILE) or {}
        if state.get("phase") in ("deleted", "failed"):
            return False
        pid, start = self._supervisor_pid(svcdir)
        return processes.process_alive(pid, start)

    def _wake(self, svcdir: Path) -> None:
        pid, start = self._supervisor_pid(svcdir)
        if pid is not None and processes.process_alive(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGHUP)

    def _update(self, record: JobRecord, change: Callable[[dict[str, Any]], None]) -> None:
        """Change desired.json of a live service under its lock, then wake its supervisor."""
        svcdir = Path(record.jobdir)
        if not (svcdir / ssv.DESIRED_FILE).exists():
            raise JobNotFound(f"service {record.name} is not running on the local tier (deleted?)")
        with self._locked(svcdir):
            desired = ssv.read_json(svcdir / ssv.DESIRED_FILE) or {}
            if desired.get("deleted") or not self._supervisor_alive(svcdir):
                raise TiersError(f"service {record.name} is not running (its supervisor is gone); "
                                 "re-run its cell to start it again")
            change(desired)
            desired["generation"] = int(desired.get("generation") or 0) + 1
            ssv.write_json(svcdir / ssv.DESIRED_FILE, desired)
        self._wake(svcdir)

    # --- status ----------------------------------------------------------------------------
    def _endpoint_of(self, svcdir: Path) -> str | None:
        state = ssv.read_json(svcdir / ssv.STATE_FILE) or {}
        port = state.get("front_port")
        return f"http://127.0.0.1:{port}" if port else None

    def endpoint(self, record: JobRecord) -> str | None:
        return self._endpoint_of(Path(record.jobdir)) or record.nodelist

    def _status_now(self, record: JobRecord) -> ServiceStatus:
        svcdir = Path(record.jobdir)
        desired = ssv.read_json(svcdir / ssv.DESIRED_FILE)
        state = ssv.read_json(svcdir / ssv.STATE_FILE)
        alive = True
        if desired and not desired.get("deleted"):
            alive = self._supervisor_alive(svcdir)
            if not alive and not (state or {}).get("reason"):
                pid, _ = self._supervisor_pid(svcdir)
                state = dict(state or {})
                state["reason"] = (f"the local supervisor (pid {pid}) is gone; see "
                                   f"{svcdir / ssv.SUPERVISOR_LOG}; re-run the cell to start it again")
        ignored = (desired or {}).get("ignored") or []
        return service_status(record.name, desired, state, endpoint=self.endpoint(record),
                              supervisor_alive=alive, note=note_for(ignored))

    def service_status(self, record: JobRecord) -> ServiceStatus:
        status = self._status_now(record)
        if status.state is ServiceState.FAILED and not self._supervisor_alive(Path(record.jobdir)):
            processes.kill_job_processes(record.jobdir)  # a lost supervisor: leave no replica behind
        self._record(record, status)
        return status

    def _record(self, record: JobRecord, status: ServiceStatus) -> None:
        with contextlib.suppress(Exception):  # the registry is a record, not the source of truth
            detail = f"{status.ready}/{status.desired}"
            if status.canary is not None:
                detail += f" + canary {status.canary.ready}/{status.canary.desired}"
            self.registry.update(record.key, state=status.state.value, detail=detail,
                                 nodelist=status.endpoint or None)  # None keeps the one recorded

    def summary(self, record: JobRecord, status: ServiceStatus) -> str:
        return summary_line(status, elapsed_s=time.time() - record.submitted_at,
                            log_lines=self.cause_lines(record, status))

    # --- logs ------------------------------------------------------------------------------
    def _pod_names(self, record: JobRecord) -> set[str]:
        state = ssv.read_json(Path(record.jobdir) / ssv.STATE_FILE) or {}
        return {str(r.get("name")) for r in state.get("replicas") or [] if isinstance(r, dict)}

    def service_logs(self, record: JobRecord, pod: str | None = None, tail: int | None = None) -> str:
        limit = tier_module.MAX_SERVICE_LOG_BYTES
        data, cut = tail_bytes([Path(record.jobdir) / name for name in (ssv.ROTATED_LOG, ssv.LOG_FILE)],
                               limit)
        lines = data.decode("utf-8", errors="replace").splitlines()
        if pod is not None:
            prefix = f"{pod}: "
            mine = [ln[len(prefix):] for ln in lines if ln.startswith(prefix)]
            if not mine and pod not in self._pod_names(record):
                raise JobNotFound(f"service {record.name} has no pod {pod!r}")
            lines = mine
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        if cut and (tail is None or len(lines) < tail):
            shown = f"the last {limit / (1 << 20):g} MiB of the log are shown"
            lines.insert(0, tier_module.cut_marker(shown))
        return "".join(line + "\n" for line in lines)

    # --- actions ---------------------------------------------------------------------------
    def scale(self, record: JobRecord, replicas: int) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= MAX_REPLICAS:
            raise SpecError("replicas", f"must be 0-{MAX_REPLICAS} on the local tier, got {replicas!r}")
        self._update(record, lambda d: d.update(replicas=replicas))

    def restart(self, record: JobRecord) -> None:
        """A rolling restart: a new revision of the same template (as ``kubectl rollout restart``)."""
        svcdir = Path(record.jobdir)

        def change(desired: dict[str, Any]) -> None:
            old = str(desired.get("revision") or "")
            stamp = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}/{time.time_ns()}"
            new = revision_of(str(desired.get("template") or old), stamp)
            shutil.copytree(svcdir / ssv.CODE_DIR / old, svcdir / ssv.CODE_DIR / new)
            desired.update(revision=new, revision_number=int(desired.get("revision_number") or 0) + 1,
                           restarted_at=stamp)

        self._update(record, change)

    def delete(self, record: JobRecord) -> None:
        """Stop every replica and the supervisor, then remove the service directory."""
        svcdir = Path(record.jobdir)
        if svcdir.exists() and (svcdir / ssv.DESIRED_FILE).exists():
            with self._locked(svcdir):
                desired = ssv.read_json(svcdir / ssv.DESIRED_FILE) or {}
                desired["deleted"] = True
                ssv.write_json(svcdir / ssv.DESIRED_FILE, desired)
                (svcdir / ssv.DELETE_FILE).touch()
            pid, start = self._supervisor_pid(svcdir)
            if pid is not None and processes.process_alive(pid, start):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + DELETE_TIMEOUT
                while processes.process_alive(pid, start) and time.monotonic() < deadline:
                    time.sleep(0.05)
            processes.kill_job_processes(svcdir)
        if svcdir.exists() and svcdir.parent.name == SERVICES_DIR:  # never another directory
            shutil.rmtree(svcdir, ignore_errors=True)
        with contextlib.suppress(Exception):
            self.registry.update(record.key, state=ServiceState.DELETED.value, detail="0/0")

    def port_forward(self, record: JobRecord, local_port: int = 0, track: str | None = None) -> str:
        """The service's own front port (``local_port`` 0), or a relay from ``local_port`` to it.
        With ``track`` ("stable" or "canary", while a canary runs): a port of its own that goes
        round the ready replicas of that revision only."""
        if isinstance(local_port, bool) or not isinstance(local_port, int) or not 0 <= local_port <= 65535:
            raise SpecError("local_port", f"a port from 1 to 65535 (0: any free one), got {local_port!r}")
        status = self.service_status(record)
        if not track_pods(status, track):
            of = f" of the {track} track" if track in TRACKS and status.canary is not None else ""
            raise TiersError(f"service {record.name}: no ready replica{of} to forward to")
        if check_track(track) is not None and status.canary is not None:
            return self._track_forward(record, {p.name for p in status.pods if p.track == track}, local_port)
        front = status.endpoint
        assert front is not None
        front_port = int(front.rsplit(":", 1)[1])
        if local_port in (0, front_port):
            return front
        state = ssv.read_json(Path(record.jobdir) / ssv.STATE_FILE) or {}
        pid, start = state.get("pid"), state.get("pid_start")

        def supervisor() -> list[int]:
            alive = isinstance(pid, int) and processes.process_alive(pid, start)
            return [pid] if alive and isinstance(pid, int) else []

        def verify(port: int) -> frozenset[int] | None:  # the front port is still the supervisor's
            return listeners.verify_listener(port, supervisor)[0]

        try:
            forward = FrontPort(lambda: [front_port], local_port, verify=verify).start()
        except OSError as exc:
            raise TiersError(f"cannot listen on 127.0.0.1:{local_port}: {exc.strerror or exc}") from None
        self._forwards.append(forward)
        return forward.url

    def _track_forward(self, record: JobRecord, names: set[str], local_port: int) -> str:
        """A port relaying each connection to the next ready replica among ``names`` (one
        track's), its port read afresh from the supervisor's report, and only while the sockets
        listening there are the replica's own processes' (listeners.py)."""
        state_file = Path(record.jobdir) / ssv.STATE_FILE
        turn = [0]

        def replicas() -> dict[int, int]:  # port -> pid of the ready replicas of the track
            listed = (ssv.read_json(state_file) or {}).get("replicas")
            return {r["port"]: r["pid"] for r in (listed if isinstance(listed, list) else [])
                    if isinstance(r, dict) and r.get("name") in names and r.get("ready") is True
                    and r.get("phase") != "Terminating" and isinstance(r.get("port"), int)
                    and isinstance(r.get("pid"), int)}

        def choose() -> list[int]:
            ports = sorted(replicas())
            if not ports:
                return []
            turn[0] = (turn[0] + 1) % len(ports)
            return ports[turn[0]:] + ports[:turn[0]]

        def verify(port: int) -> frozenset[int] | None:
            pid = replicas().get(port)
            if pid is None:
                return None
            return listeners.verify_listener(port, lambda: [pid, *processes.descendants(pid)])[0]

        try:
            forward = FrontPort(choose, local_port, verify=verify).start()
        except OSError as exc:
            raise TiersError(f"cannot listen on 127.0.0.1:{local_port}: {exc.strerror or exc}") from None
        self._forwards.append(forward)
        return forward.url

    def forward_alive(self, url: str) -> bool:
        url = url.rstrip("/")
        return any(f.url == url for f in list(self._forwards))

    # --- watching --------------------------------------------------------------------------
    def watch(self, record: JobRecord, *, on_status: Callable[[ServiceStatus], None] | None = None,
              on_lines: Callable[[list[PodLogLine]], None] | None = None) -> Subscription[ServiceStatus]:
        """Through the tier's one poller of the services' files."""
        with self._lock:
            if self._poller is None:
                self._poller = ServicePoller(self.name, self._status_now, self._record, self.poll_interval)
            poller = self._poller
        return poller.add(record, on_status, on_lines)

    def close(self) -> None:
        with self._lock:
            poller, self._poller = self._poller, None
            forwards, self._forwards = self._forwards, []
        if poller is not None:
            poller.stop()
        for forward in forwards:
            forward.close()
