"""The emulator's scheduler + kubelet: pods of the store become local processes.

One node (``node_name``, labels ``node_labels``, ``gpus`` x ``nvidia.com/gpu``).  For every pod the
kubelet runs a :class:`_PodWorker` thread that schedules it, prepares volumes, starts each container
as a process, runs probes, restarts with back-off and writes ``status`` shaped like a real kubelet
1.28 (see ``/work/shared/facts/k8s-golden``: 04 and 05a-f).

Simplifications (deliberate, documented here once):

* **Images.** There are no images.  An image is *present* when its name is in ``images`` (default
  ``{"python:3.11-slim", "jupyter-tiers/test:latest"}``; ``docker.io/library/`` prefixes and a missing
  ``:latest`` tag are normalised).  A missing image fails as on a real node: ``ErrImageNeverPull``
  with ``imagePullPolicy: Never``, otherwise ``ErrImagePull`` / ``ImagePullBackOff``.  A present
  image runs the container's ``command`` + ``args`` with the *host's* programs (``python3`` resolves
  to the interpreter running the emulator first, then the host ``PATH``).  A container with neither
  runs ``sleep infinity`` (images have no entrypoint here).
* **Filesystem.** Processes see the host filesystem.  configMap/secret/emptyDir/projected/downwardAPI
  volumes are materialised under ``workdir/<ns>_<pod>_<uid>/volumes/<name>``; hostPath volumes use the
  host path itself (type ``Directory`` is checked as a kubelet does: a missing directory is a
  FailedMount; ``readOnly`` is not enforced).  An emptyDir of ``medium: Memory`` (a pod's
  ``/dev/shm``) is such a directory too: no tmpfs, no ``sizeLimit`` enforced, and the processes
  still see the host's own ``/dev/shm`` (the API server side checks the volume and its mounts).
  Because a process cannot see a mount path, every
  occurrence of a ``mountPath`` (longest first, on a path boundary) in ``command``, ``args``, env
  values and ``workingDir`` is
  rewritten to the materialised directory.  Without ``workingDir`` a container starts in its own
  empty directory (not ``/``).
* **Network.** As root, each pod gets its own network namespace (a ``sleep infinity`` sandbox started
  by ``unshare --net``, loopback up, the fake pod IP added to ``lo``), and every container is started
  with ``nsenter --net`` into it, so two replicas can both bind port 8000.  Probes and port-forward
  connect from a short-lived thread that ``setns``-ed into that namespace.  Pod IPs are fake
  (10.88.0.0/16) and only exist inside their pod.  Not root (or ``unshare`` failing): every pod uses
  the host network and probes connect to 127.0.0.1.
* **Memory limits.** With a writable cgroup-v1 memory hierarchy each limited container gets its own
  memory cgroup, so the kernel OOM-kills it exactly like a real node; otherwise the RSS of the
  container's process group is sampled every 50 ms and the group is SIGKILLed above the limit.
  Either way the status is ``terminated: OOMKilled, exitCode 137``.
* **Init containers** run one after the other, each to completion, before any main container
  starts (these wait in ``PodInitializing``; ``Initialized`` is False with "containers with
  incomplete status: [...]"); a failing one restarts with the same back-off as a main container
  (``restartPolicy: Always`` acts as ``OnFailure`` for them) and shows ``Error`` then
  ``CrashLoopBackOff`` in ``initContainerStatuses`` while the pod stays Pending (golden 13a, 13b).
* **Termination messages:** a container that fails under ``terminationMessagePolicy:
  FallbackToLogsOnError`` gets the end of its log (at most 80 lines and 2048 bytes, as the
  Kubernetes docs say) as ``terminated.message``; the termination-log file is not emulated.
* **Node-pressure eviction** (:meth:`Kubelet.evict_pods`, driven by a test, as no real pressure
  is measured): every pod of the node at once, containers stopped with the runtime's 2 s minimum
  grace, ``phase: Failed`` / ``reason: Evicted`` and the eviction manager's message, the
  ``DisruptionTarget`` condition (``TerminationByKubelet``), a Warning ``Evicted`` Event; the pod
  object stays until deleted. No node condition or taint is modelled (the emulator serves no
  Node objects), so replacements schedule at once.
* **Not emulated:** readiness gates, ephemeral containers, exec/attach, CPU limits,
  pod-level DNS, image entrypoints.

Logs are kept per container instance in CRI format (``<RFC3339Nano> stdout F <line>``; stdout and
stderr share one pipe so their order is kept) and served by :meth:`Kubelet.read_log`.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import datetime as _dt
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ApiError, bad_request, not_found

Obj = dict[str, Any]

DEFAULT_IMAGES = frozenset({"python:3.11-slim", "jupyter-tiers/test:latest"})
MAX_BACKOFF = 300.0
_TICK = 0.1
# How long before a back-off ends its container shows `waiting: CrashLoopBackOff` (at most a
# quarter of the back-off); before that it stays `terminated` (the real kubelet's next sync).
CRASHLOOP_SHOWN_S = 1.0
_SCHED_RETRY = 1.0
_NS_PER_S = 1_000_000_000
_DEADLINE = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"


# ---------------------------------------------------------------------------------------- helpers
def _now_rfc3339(t: float | None = None) -> str:
    dt = _dt.datetime.fromtimestamp(time.time() if t is None else t, _dt.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc3339_nano(t_ns: int) -> str:
    secs, frac = divmod(t_ns, _NS_PER_S)
    dt = _dt.datetime.fromtimestamp(secs, _dt.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _parse_rfc3339_ns(s: str) -> int:
    """RFC3339 (with or without a fraction of any length) to epoch nanoseconds."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", s.strip())
    if not m:
        raise bad_request(f'parsing time "{s}" as "2006-01-02T15:04:05Z07:00": cannot parse')
    base = _dt.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    tz = _dt.timezone.utc
    if m.group(3) != "Z":
        sign = 1 if m.group(3)[0] == "+" else -1
        hh, mm = m.group(3)[1:].split(":")
        tz = _dt.timezone(sign * _dt.timedelta(hours=int(hh), minutes=int(mm)))
    secs = int(base.replace(tzinfo=tz).timestamp())
    frac = (m.group(2) or "0")[:9].ljust(9, "0")
    return secs * _NS_PER_S + int(frac)


def go_duration(seconds: float) -> str:
    """Format like Go's ``time.Duration.String`` (``10s``, ``1m20s``, ``5m0s``, ``500ms``)."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms" if ms >= 1 else f"{seconds * 1e6:g}µs"
    total = round(seconds, 9)
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    s_txt = f"{s:g}s" if s != int(s) else f"{int(s)}s"
    if h:
        return f"{int(h)}h{int(m)}m{s_txt}"
    if m:
        return f"{int(m)}m{s_txt}"
    return s_txt


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_SUFFIX = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "m": 1e-3,
    "u": 1e-6,
    "n": 1e-9,
}


def parse_quantity(q: Any) -> float:
    """A Kubernetes resource quantity (``20Mi``, ``1.5G``, ``100m``, ``1e3``, ``3``) as a number."""
    if isinstance(q, (int, float)):
        return float(q)
    m = _QUANTITY.match(str(q).strip())
    if not m:
        raise ValueError(f"bad quantity {q!r}")
    num, suf = m.groups()
    if suf[:1] in ("e", "E") and suf[1:].lstrip("+-").isdigit():
        return float(num + suf)
    return float(num) * _SUFFIX[suf]


def normalize_image(image: str) -> str:
    """``docker.io/library/python:3.11`` -> ``python:3.11``; a missing tag means ``latest``."""
    img = image.strip()
    for prefix in ("docker.io/library/", "index.docker.io/library/", "docker.io/"):
        if img.startswith(prefix):
            img = img[len(prefix) :]
            break
    if "@" not in img and ":" not in img.rsplit("/", 1)[-1]:
        img += ":latest"
    return img


def _pod_requests_gpus(pod: Obj) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        val = (res.get("limits") or {}).get(
            "nvidia.com/gpu", (res.get("requests") or {}).get("nvidia.com/gpu")
        )
        if val is not None:
            total += int(parse_quantity(val))
    return total


def _selector_matches(selector: dict[str, str] | None, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector or {}).items())


# ---------------------------------------------------------------------------------- network ns
_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


def connect_in_netns(netns_pid: int | None, host: str, port: int, timeout: float) -> socket.socket:
    """A TCP socket connected to ``host:port`` from inside the network namespace of ``netns_pid``.

    The connect runs in a fresh thread that ``setns``-ed into the namespace (``setns`` only changes
    the calling thread); the socket stays in that namespace and can be used from any thread.
    ``netns_pid`` None connects from the host network.  Raises ``OSError`` like ``socket.connect``."""
    if netns_pid is None:
        return socket.create_connection((host, port), timeout=timeout)
    result: list[Any] = []

    def run() -> None:
        try:
            fd = os.open(f"/proc/{netns_pid}/ns/net", os.O_RDONLY)
            try:
                if _libc.setns(fd, _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, os.strerror(err))
            finally:
                os.close(fd)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(timeout)
            try:
                s.connect((host, port))
            except BaseException:
                s.close()
                raise
            result.append(s)
        except BaseException as e:  # handed to the caller's thread
            result.append(e)

    t = threading.Thread(target=run, name="netns-connect", daemon=True)
    t.start()
    t.join()
    out = result[0]
    if isinstance(out, BaseException):
        raise out
    return out


def _find_memory_cgroup() -> Path | None:
    """A writable directory in the cgroup-v1 memory hierarchy for per-container cgroups, or None."""
    if os.geteuid() != 0:
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            base = Path("/sys/fs/cgroup/memory") / parts[2].lstrip("/")
            probe = base / f"k8s-emu-probe-{os.getpid()}"
            try:
                probe.mkdir()
                probe.rmdir()
            except OSError:
                return None
            return base
    return None


# ------------------------------------------------------------------------------------ instances
@dataclass
class _Instance:
    """One run of a container (a container ID): its process, log file and outcome."""

    number: int
    log_path: Path
    container_id: str
    started_at: float = 0.0
    finished_at: float | None = None
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    proc: subprocess.Popen[bytes] | None = None
    oom: bool = False
    killed_by_kubelet: bool = False
    cgroup: Path | None = None
    done: threading.Event = field(default_factory=threading.Event)
    log_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def terminated_state(self) -> Obj:
        out: Obj = {"exitCode": self.exit_code if self.exit_code is not None else 0, "reason": self.reason}
        if self.message:
            out["message"] = self.message
        out["startedAt"] = _now_rfc3339(self.started_at)
        out["finishedAt"] = _now_rfc3339(self.finished_at or time.time())
        out["containerID"] = self.container_id
        return out


@dataclass
class _Probe:
    """Result tracking of one probe kind for the current instance."""

    kind: str  # "Readiness", "Liveness", "Startup"
    spec: Obj
    successes: int = 0
    failures: int = 0
    ok: bool = False


class _Container:
    """State of one container of a pod across its instances."""

    def __init__(self, spec: Obj) -> None:
        self.spec = spec
        self.name: str = spec["name"]
        self.instances: list[_Instance] = []
        self.restart_count = 0
        self.waiting_reason = "ContainerCreating"
        self.waiting_message = ""
        self.ready = False
        self.started_probe_ok = False
        self.next_attempt = 0.0  # when to retry a failed pull / config / back-off
        self.backoff: float | None = None
        self.crashloop_shown_at = 0.0
        self.image_backoff: float | None = None
        self.image_ok = False
        self.probe_stop: threading.Event | None = None
        self.finished_for_good = False  # terminated and not going to restart

    @property
    def current(self) -> _Instance | None:
        return self.instances[-1] if self.instances else None


# -------------------------------------------------------------------------------------- kubelet
class Kubelet:
    """Scheduler and kubelet of a one-node emulated cluster (see the module docstring).

    ``Kubelet(store, workdir, node_name=..., node_labels=..., gpus=..., images=..., backoff_base=...,
    probe_period=..., create_delay=...)``; :meth:`start` registers with the store (subscription +
    pod terminator), :meth:`stop` kills every process.  ``backoff_base`` is the first
    CrashLoopBackOff delay (10 s on a real node, doubled per restart up to 300 s).  ``probe_period``
    scales ``periodSeconds`` and ``initialDelaySeconds`` of probes (1.0 = real seconds).
    ``create_delay`` keeps a new pod's containers in ``waiting: ContainerCreating`` that long
    before the first start (0.8 s on the golden record's node, which had its images; 0 default).
    """

    def __init__(
        self,
        store: Any,
        workdir: Path,
        *,
        node_name: str = "emulator-node",
        node_labels: dict[str, str] | None = None,
        gpus: int = 0,
        images: set[str] | frozenset[str] | None = None,
        backoff_base: float = 10.0,
        probe_period: float = 1.0,
        host_ip: str = "192.0.2.2",
        create_delay: float = 0.0,
        pod_netns: bool | None = None,
    ) -> None:
        self.store = store
        self.workdir = Path(workdir)
        self.node_name = node_name
        self.node_labels = (
            dict(node_labels)
            if node_labels is not None
            else {
                "kubernetes.io/hostname": node_name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            }
        )
        self.gpus = gpus
        self.images = {normalize_image(i) for i in (DEFAULT_IMAGES if images is None else images)}
        self.backoff_base = backoff_base
        self.probe_period = probe_period
        self.create_delay = create_delay
        self.host_ip = host_ip
        # pod_netns=False: every pod uses the host network (a test whose pods reach a server on
        # the host's loopback, as a real pod reaches the node's host through its gateway).
        self.use_netns = pod_netns is not False and (
            os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("nsenter") is not None
        )
        self.memory_cgroup = _find_memory_cgroup()
        self._lock = threading.Lock()
        self._workers: dict[tuple[str, str], _PodWorker] = {}
        self._ips_used: set[str] = set()
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._pending: set[tuple[str, str]] = set()
        self._wake_all = False  # set by store hooks: wake every pod worker (see _on_change)
        self._thread: threading.Thread | None = None

    # -- lifecycle
    def start(self) -> None:
        """Subscribe to pod changes, take over graceful pod deletion and start the dispatcher."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.store.subscribe(self._on_change)
        self.store.set_pod_terminator(self._on_terminate)
        for pod in self.store.list("pods"):
            self._pending.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        self._thread = threading.Thread(target=self._dispatch, name="kubelet", daemon=True)
        self._thread.start()
        self._wake.set()

    def stop(self) -> None:
        """Kill every container and sandbox process (no orphans) and stop all threads."""
        self._stopped.set()
        self._wake.set()
        with contextlib.suppress(Exception):
            self.store.unsubscribe(self._on_change)
        with contextlib.suppress(Exception):
            self.store.set_pod_terminator(None)
        if self._thread:
            self._thread.join(timeout=5)  # no new workers after this
        with self._lock:
            workers = list(self._workers.values())
        for w in workers:
            w.shutdown()
        for w in workers:
            w.join(timeout=30)

    # -- store hooks (called under the store lock: only enqueue)
    def _on_change(self, etype: str, resource: str, obj: Obj) -> None:
        if resource == "pods":
            md = obj["metadata"]
            self._pending.add((md.get("namespace", ""), md["name"]))
            self._wake.set()
        elif resource in ("configmaps", "secrets"):
            # Not self._lock here: _dispatch holds it while reading the store, and this runs
            # under the store's lock (the lock-order inversion hung a test's setup for 600 s).
            self._wake_all = True
            self._wake.set()

    def _on_terminate(self, pod: Obj) -> None:
        md = pod["metadata"]
        self._pending.add((md.get("namespace", ""), md["name"]))
        self._wake.set()

    def _dispatch(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            if self._stopped.is_set():
                break
            keys = list(self._pending)
            self._pending.difference_update(keys)
            wake_all, self._wake_all = self._wake_all, False
            with self._lock:
                if wake_all:  # a ConfigMap or Secret changed: volumes and env may need it
                    for w in self._workers.values():
                        w.wake.set()
                for key in keys:
                    if self._stopped.is_set():
                        break
                    w = self._workers.get(key)
                    if w is not None and w.is_alive():
                        w.wake.set()
                        continue
                    pod = self.store.get("pods", key[0], key[1])
                    if pod is None:
                        continue
                    if w is not None and w.uid == pod["metadata"]["uid"]:
                        continue  # finished worker of this very pod
                    w = _PodWorker(self, pod)
                    self._workers[key] = w
                    w.start()
                for key, w in list(self._workers.items()):
                    if not w.is_alive() and self.store.get("pods", key[0], key[1]) is None:
                        del self._workers[key]

    # -- helpers used by workers
    def allocate_ip(self) -> str:
        with self._lock:
            for _ in range(10000):
                ip = f"10.88.{secrets.randbelow(255)}.{secrets.randbelow(253) + 2}"
                if ip not in self._ips_used:
                    self._ips_used.add(ip)
                    return ip
        raise RuntimeError("pod IP range exhausted")

    def release_ip(self, ip: str | None) -> None:
        with self._lock:
            self._ips_used.discard(ip or "")

    def gpus_in_use(self, exclude_uid: str) -> int:
        used = 0
        for p in self.store.list("pods"):
            spec = p.get("spec") or {}
            if p["metadata"]["uid"] == exclude_uid or spec.get("nodeName") != self.node_name:
                continue
            if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            used += _pod_requests_gpus(p)
        return used

    def image_present(self, image: str) -> bool:
        return normalize_image(image) in self.images

    def worker(self, namespace: str, name: str) -> _PodWorker | None:
        with self._lock:
            return self._workers.get((namespace, name))

    def evict_pods(
        self,
        resource: str = "memory",
        *,
        namespace: str | None = None,
        threshold: str = "100Mi",
        available: str = "51200Ki",
        timeout: float = 30.0,
    ) -> list[str]:
        """Node-pressure eviction of every running pod of this node (of ``namespace`` if given),
        as the kubelet's eviction manager does past a hard threshold (``memory.available<100Mi``
        by default): each pod's containers are stopped (grace 0, i.e. the runtime's 2 s minimum),
        the pod object stays with ``phase: Failed``, ``reason: Evicted`` and the manager's message
        (``The node was low on resource: memory. Threshold quantity: ..., available: .... Container
        server was using ..., request is 0, has larger consumption of memory. ``), the
        ``DisruptionTarget`` condition (``TerminationByKubelet``) and a Warning ``Evicted`` Event.
        A real kubelet evicts one pod per housekeeping pass until the pressure is gone; here all
        go at once and the pressure ends with them (no taint keeps replacements off the node).
        Returns the evicted pods' names once each is Failed (bounded by ``timeout``)."""
        with self._lock:
            workers = [w for (ns, _), w in self._workers.items()
                       if w.is_alive() and (namespace is None or ns == namespace)
                       and w.bound and w.terminal_phase is None and not w.deleting]
        for w in workers:
            w.request_eviction(resource, threshold, available)
        deadline = time.monotonic() + timeout
        for w in workers:
            w.evicted.wait(max(0.0, deadline - time.monotonic()))
        return sorted(w.name for w in workers if w.evicted.is_set())

    # -- logs -----------------------------------------------------------------------------------
    def read_log(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        follow: bool = False,
        previous: bool = False,
        tail_lines: int | None = None,
        since_seconds: int | None = None,
        since_time: str | None = None,
        timestamps: bool = False,
        limit_bytes: int | None = None,
    ) -> Iterator[bytes] | None:
        """The ``GET .../pods/NAME/log`` answer, as a real kubelet + API server give it.

        Returns None for a pod that is not bound to a node (the API server answers 204, empty body),
        otherwise an iterator of byte chunks (``text/plain``; with ``follow`` it blocks for new lines
        and ends when that container instance exits).  Raises :class:`ApiError` with the golden
        wording: 404 missing pod, 400 bad/missing container name, waiting container, no previous."""
        pod = self.store.get("pods", namespace, name)
        if pod is None:
            raise not_found("pods", "", name)
        containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        inits = [c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []]
        if container is None:
            if len(containers) != 1:
                raise bad_request(
                    f"a container name must be specified for pod {name}, "
                    f"choose one of: [{' '.join(containers)}]"
                )
            container = containers[0]
        elif container not in containers and container not in inits:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if not (pod.get("spec") or {}).get("nodeName"):
            return None
        w = self.worker(namespace, name)
        cst = (w.containers.get(container) or w.init_containers.get(container)
               if w is not None and w.uid == pod["metadata"]["uid"] else None)
        if cst is None or cst.current is None:
            reason = cst.waiting_reason if cst is not None else "ContainerCreating"
            if previous:
                raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
            raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
        if previous:
            # ``previous`` is lastState.terminated: the last instance while waiting to restart, else
            # the one before the current.
            cur = cst.current
            inst = (
                cur
                if (
                    not cur.running and cst.waiting_reason == "CrashLoopBackOff" and not cst.finished_for_good
                )
                else (cst.instances[-2] if len(cst.instances) >= 2 else None)
            )
            if inst is None:
                raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        else:
            inst = cst.current
        since_ns: int | None = None
        if since_seconds is not None:
            since_ns = time.time_ns() - int(since_seconds) * _NS_PER_S
        elif since_time:
            since_ns = _parse_rfc3339_ns(since_time)
        return _log_stream(
            inst,
            follow=follow,
            tail_lines=tail_lines,
            since_ns=since_ns,
            timestamps=timestamps,
            limit_bytes=limit_bytes,
        )

    # -- port-forward ---------------------------------------------------------------------------
    def pod_network(self, namespace: str, name: str) -> tuple[int | None, str]:
        """``(netns_pid, sandbox_id)`` of a running pod for port-forward.

        Raises 404 for a missing pod and 400 ``pod X does not have a host assigned`` when it is not
        scheduled.  ``netns_pid`` None means the host network."""
        pod = self.store.get("pods", namespace, name)
        if pod is None:
            raise not_found("pods", "", name)
        if not (pod.get("spec") or {}).get("nodeName"):
            raise bad_request(f"pod {name} does not have a host assigned")
        w = self.worker(namespace, name)
        if w is None or w.uid != pod["metadata"]["uid"]:
            raise bad_request(f"pod {name} does not have a host assigned")
        return w.netns_pid, w.sandbox_id


def _log_tail_message(path: Path) -> str:
    """A failed container's termination message under ``terminationMessagePolicy:
    FallbackToLogsOnError`` (its termination-log file is never written here): the end of its
    log, at most 80 lines and 2048 bytes, as the kubelet documents it."""
    entries, _ = _log_entries(path, 0)
    lines = b"".join(content for _, content in entries).splitlines(keepends=True)[-80:]
    return b"".join(lines)[-2048:].decode("utf-8", "replace")


def _log_entries(path: Path, start: int) -> tuple[list[tuple[int, bytes]], int]:
    """Parse complete CRI lines of ``path`` from byte offset ``start``: ``[(t_ns, content)]``, new offset."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return [], start
    out: list[tuple[int, bytes]] = []
    pos = 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        line = data[pos:nl]
        pos = nl + 1
        parts = line.split(b" ", 3)
        if len(parts) < 4:
            continue
        ts, _stream, tag, content = parts
        try:
            t_ns = _parse_rfc3339_ns(ts.decode())
        except ApiError:
            continue
        out.append((t_ns, content + (b"\n" if tag == b"F" else b"")))
    return out, start + pos


def _log_stream(
    inst: _Instance,
    *,
    follow: bool,
    tail_lines: int | None,
    since_ns: int | None,
    timestamps: bool,
    limit_bytes: int | None,
) -> Iterator[bytes]:
    """Chunks of one instance's log with the kubelet's filters (see :meth:`Kubelet.read_log`)."""
    remaining = [limit_bytes if limit_bytes is not None else -1]

    def render(entries: list[tuple[int, bytes]]) -> bytes:
        buf = b"".join((_rfc3339_nano(t).encode() + b" " + c) if timestamps else c for t, c in entries)
        if remaining[0] >= 0:
            buf = buf[: remaining[0]]
            remaining[0] -= len(buf)
        return buf

    def gen() -> Iterator[bytes]:
        with inst.log_lock:
            entries, offset = _log_entries(inst.log_path, 0)
        if since_ns is not None:
            entries = [e for e in entries if e[0] >= since_ns]
        if tail_lines is not None:
            entries = entries[-tail_lines:] if tail_lines > 0 else []
        first = render(entries)
        if first or follow:
            yield first  # an empty first chunk lets the server send the headers of a follow at once
        if not follow:
            return
        while remaining[0] != 0:
            finished = inst.done.is_set()
            with inst.log_lock:
                new, offset = _log_entries(inst.log_path, offset)
            if new:
                chunk = render(new)
                if chunk:
                    yield chunk
                continue
            if finished:
                return
            inst.done.wait(0.05)

    return gen()


# ----------------------------------------------------------------------------------- pod worker
class _PodWorker(threading.Thread):
    """Owns one pod from scheduling to removal."""

    def __init__(self, kubelet: Kubelet, pod: Obj) -> None:
        md = pod["metadata"]
        super().__init__(name=f"pod-{md.get('namespace')}/{md['name']}", daemon=True)
        self.k = kubelet
        self.store = kubelet.store
        self.ns: str = md.get("namespace", "default")
        self.name: str = md["name"]
        self.uid: str = md["uid"]
        self.pod = pod
        self.wake = threading.Event()
        self._shutdown = threading.Event()
        self.containers: dict[str, _Container] = {}
        self.init_containers: dict[str, _Container] = {}  # in order; all done before containers start
        self.initialized = True
        self.dir = kubelet.workdir / f"{self.ns}_{self.name}_{self.uid[:8]}"
        self.pod_ip: str | None = None
        self.sandbox: subprocess.Popen[bytes] | None = None
        self.netns_pid: int | None = None
        self.sandbox_id = hashlib.sha256(self.uid.encode()).hexdigest()
        self.start_time: str | None = None
        self.conditions: dict[str, Obj] = {}
        self.volumes: dict[str, Path] = {}
        self.volumes_ready = False
        self.sched_msg = ""
        self.terminal_phase: str | None = None
        self.deleting = False
        self.bound = False
        self.eviction: tuple[str, str, str] | None = None  # (resource, threshold, available) asked for
        self.evicted_message: str | None = None
        self.evicted = threading.Event()

    # -- small utilities
    def involved(self, container: str | None = None) -> Obj:
        inv: Obj = {
            "kind": "Pod",
            "namespace": self.ns,
            "name": self.name,
            "uid": self.uid,
            "apiVersion": "v1",
            "resourceVersion": self.pod["metadata"].get("resourceVersion", ""),
        }
        if container is not None:
            inv["fieldPath"] = f"spec.containers{{{container}}}"
        return inv

    def event(
        self, type_: str, reason: str, message: str, container: str | None = None, source: str = "kubelet"
    ) -> None:
        with contextlib.suppress(Exception):
            self.store.record_event(self.ns, self.involved(container), type_, reason, message, source)

    def shutdown(self) -> None:
        self._shutdown.set()
        self.wake.set()

    def request_eviction(self, resource: str, threshold: str, available: str) -> None:
        """Ask the worker's loop to evict the pod (see :meth:`Kubelet.evict_pods`)."""
        self.eviction = (resource, threshold, available)
        self.wake.set()

    def set_condition(
        self, type_: str, status: str, reason: str | None = None, message: str | None = None
    ) -> None:
        cur = self.conditions.get(type_)
        if cur and cur["status"] == status and cur.get("reason") == reason and cur.get("message") == message:
            return
        cond: Obj = {
            "type": type_,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": cur["lastTransitionTime"]
            if cur and cur["status"] == status
            else _now_rfc3339(),
        }
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        self.conditions[type_] = cond

    def refresh(self) -> Obj | None:
        pod = self.store.get("pods", self.ns, self.name)
        if pod is None or pod["metadata"]["uid"] != self.uid:
            return None
        self.pod = pod
        return pod

    # -- main loop
    def run(self) -> None:
        try:
            self._run()
        except Exception as e:  # a bug must not leave processes behind silently
            sys.stderr.write(f"kubelet: pod {self.ns}/{self.name} worker crashed: {e!r}\n")
            import traceback

            traceback.print_exc()
        finally:
            self._kill_everything()

    def _run(self) -> None:
        if not self._schedule():
            return
        self.bound = True
        self.dir.mkdir(parents=True, exist_ok=True)
        for c in self.pod["spec"].get("containers") or []:
            self.containers[c["name"]] = _Container(c)
            self.containers[c["name"]].next_attempt = time.time() + self.k.create_delay
        for c in self.pod["spec"].get("initContainers") or []:
            self.init_containers[c["name"]] = _Container(c)
            self.init_containers[c["name"]].next_attempt = time.time() + self.k.create_delay
        self.start_time = _now_rfc3339()
        self.initialized = not self.init_containers
        if self.initialized:
            self.set_condition("Initialized", "True")
        else:
            for cst in self.init_containers.values():
                cst.waiting_reason = "PodInitializing"
            for cst in self.containers.values():
                cst.waiting_reason = "PodInitializing"
            self._init_condition()
        self._update_readiness()
        self.write_status()
        while not self._shutdown.is_set():
            pod = self.refresh()
            if pod is None:
                return  # removed behind our back (namespace wipe without terminator, ...)
            if pod["metadata"].get("deletionTimestamp"):
                self._terminate(pod)
                return
            if self.eviction is not None and self.terminal_phase is None:
                self._evict(*self.eviction)
            if self.terminal_phase is None:
                self._sync()
            self.write_status()
            self.wake.wait(_TICK)
            self.wake.clear()

    # -- scheduling
    def _schedule(self) -> bool:
        """Bind the pod to the node (True) or keep it Pending/Unschedulable until it fits."""
        reported = ""
        while not self._shutdown.is_set():
            pod = self.refresh()
            if pod is None:
                return False
            if pod["metadata"].get("deletionTimestamp"):
                self.store.remove("pods", self.ns, self.name)
                return False
            spec = pod.get("spec") or {}
            if spec.get("nodeName"):
                return spec["nodeName"] == self.k.node_name
            msg = ""
            if not _selector_matches(spec.get("nodeSelector"), self.k.node_labels):
                msg = (
                    "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
                    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
                )
            elif _pod_requests_gpus(pod) and _pod_requests_gpus(pod) > self.k.gpus - self.k.gpus_in_use(
                self.uid
            ):
                msg = (
                    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are "
                    "available: 1 No preemption victims found for incoming pod.."
                )
            if not msg:
                with self.store.lock:
                    pod = self.refresh()
                    if pod is None:
                        return False
                    pod["spec"]["nodeName"] = self.k.node_name
                    st = pod.setdefault("status", {})
                    self.conditions = {}
                    self.set_condition("PodScheduled", "True")
                    st["conditions"] = [self.conditions["PodScheduled"]]
                    self.store.update("pods", pod)
                self.event(
                    "Normal",
                    "Scheduled",
                    f"Successfully assigned {self.ns}/{self.name} to {self.k.node_name}",
                    source="default-scheduler",
                )
                self.refresh()
                return True
            if msg != reported:
                self.set_condition("PodScheduled", "False", "Unschedulable", msg)
                st = dict(pod.get("status") or {})
                st["phase"] = "Pending"
                st["conditions"] = [self.conditions["PodScheduled"]]
                self.store.patch_status("pods", self.ns, self.name, st)
                self.event("Warning", "FailedScheduling", msg, source="default-scheduler")
                reported = msg
            self.wake.wait(_SCHED_RETRY)
            self.wake.clear()
        return False

    # -- sandbox + volumes
    def _ensure_sandbox(self) -> None:
        if self.pod_ip is not None:
            return
        self.pod_ip = self.k.allocate_ip()
        if not self.k.use_netns:
            return
        script = f"ip link set lo up && ip addr add {self.pod_ip}/32 dev lo; echo ready; exec sleep infinity"
        try:
            p = subprocess.Popen(
                ["unshare", "--net", "--", "sh", "-c", script],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            self.k.use_netns = False
            return
        line = p.stdout.readline() if p.stdout else b""
        if line.strip() != b"ready":
            with contextlib.suppress(OSError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            self.k.use_netns = False
            return
        self.sandbox = p
        self.netns_pid = p.pid

    def _prepare_volumes(self) -> bool:
        """Materialise volumes; False (with a FailedMount event) while a source is missing."""
        if self.volumes_ready:
            return True
        spec = self.pod["spec"]
        vroot = self.dir / "volumes"
        paths: dict[str, Path] = {}
        for vol in spec.get("volumes") or []:
            name = vol["name"]
            target = vroot / name
            try:
                if "hostPath" in vol:
                    hp = Path(vol["hostPath"]["path"])
                    kind = vol["hostPath"].get("type")
                    if kind in ("DirectoryOrCreate", None, "") and not hp.exists():
                        hp.mkdir(parents=True, exist_ok=True)
                    if kind == "Directory" and not hp.is_dir():  # a real kubelet's type check
                        raise _MountError(f"hostPath type check failed: {hp} is not a directory")
                    paths[name] = hp
                    continue
                target.mkdir(parents=True, exist_ok=True)
                if "configMap" in vol:
                    self._write_source(
                        target, "configmaps", vol["configMap"], vol["configMap"].get("name", "")
                    )
                elif "secret" in vol:
                    self._write_source(target, "secrets", vol["secret"], vol["secret"].get("secretName", ""))
                elif "projected" in vol:
                    for src in vol["projected"].get("sources") or []:
                        if "configMap" in src:
                            self._write_source(
                                target,
                                "configmaps",
                                src["configMap"],
                                src["configMap"].get("name", ""),
                                optional_default=True
                                if src["configMap"].get("name") == "kube-root-ca.crt"
                                else None,
                            )
                        elif "secret" in src:
                            self._write_source(
                                target, "secrets", src["secret"], src["secret"].get("name", "")
                            )
                        elif "downwardAPI" in src:
                            self._write_downward(target, src["downwardAPI"])
                        elif "serviceAccountToken" in src:
                            (target / src["serviceAccountToken"].get("path", "token")).write_text(
                                "emulator-service-account-token"
                            )
                elif "downwardAPI" in vol:
                    self._write_downward(target, vol["downwardAPI"])
                paths[name] = target
            except _MountError as e:
                self.event("Warning", "FailedMount", f'MountVolume.SetUp failed for volume "{name}" : {e}')
                return False
        self.volumes = paths
        self.volumes_ready = True
        return True

    def _write_source(
        self, target: Path, resource: str, ref: Obj, name: str, optional_default: bool | None = None
    ) -> None:
        obj = self.store.get(resource, self.ns, name)
        singular = "configmap" if resource == "configmaps" else "secret"
        optional = ref.get("optional", optional_default or False)
        if obj is None:
            if optional:
                return
            raise _MountError(f'{singular} "{name}" not found')
        data: dict[str, bytes] = {}
        if resource == "secrets":
            for k, v in (obj.get("data") or {}).items():
                data[k] = base64.b64decode(v)
            for k, v in (obj.get("stringData") or {}).items():
                data[k] = v.encode()
        else:
            for k, v in (obj.get("data") or {}).items():
                data[k] = v.encode()
            for k, v in (obj.get("binaryData") or {}).items():
                data[k] = base64.b64decode(v)
        items = ref.get("items")
        files = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
        for key, rel in files:
            if key not in data:
                if optional:
                    continue
                raise _MountError(
                    f"configmap references non-existent config key: {key}"
                    if resource == "configmaps"
                    else f"references non-existent secret key: {key}"
                )
            p = target / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data[key])

    def _write_downward(self, target: Path, spec: Obj) -> None:
        for item in spec.get("items") or []:
            ref = item.get("fieldRef")
            if not ref:
                continue
            p = target / item["path"]
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(self.field_value(ref.get("fieldPath", "")))

    def field_value(self, path: str) -> str:
        md = self.pod["metadata"]
        m = re.match(r"^metadata\.(labels|annotations)\['(.+)'\]$", path)
        if m:
            return str((md.get(m.group(1)) or {}).get(m.group(2), ""))
        values = {
            "metadata.name": self.name,
            "metadata.namespace": self.ns,
            "metadata.uid": self.uid,
            "spec.nodeName": self.k.node_name,
            "spec.serviceAccountName": self.pod["spec"].get("serviceAccountName", "default"),
            "status.podIP": self.pod_ip or "",
            "status.podIPs": self.pod_ip or "",
            "status.hostIP": self.k.host_ip,
            "status.hostIPs": self.k.host_ip,
            "metadata.labels": "\n".join(f'{k}="{v}"' for k, v in sorted((md.get("labels") or {}).items())),
            "metadata.annotations": "\n".join(
                f'{k}="{v}"' for k, v in sorted((md.get("annotations") or {}).items())
            ),
        }
        return values.get(path, "")

    # -- per-container logic
    def _sync(self) -> None:
        now = time.time()
        if not self._prepare_volumes():
            self.wake.wait(min(2.0, max(0.2, self.k.backoff_base / 5)))
            return
        restart_policy = self.pod["spec"].get("restartPolicy", "Always")
        if not self.initialized and not self._sync_init(now, restart_policy):
            return
        for cst in self.containers.values():
            self._sync_container(cst, now, restart_policy)

    def _sync_init(self, now: float, restart_policy: str) -> bool:
        """Run the init containers in order; True once every one has completed."""
        for cst in self.init_containers.values():
            cur = cst.current
            if cur is not None and not cur.running and cur.exit_code == 0:
                cst.finished_for_good = True
                continue
            # A failed init container is restarted (Always acts as OnFailure for them).
            self._sync_container(cst, now, "OnFailure" if restart_policy == "Always" else restart_policy)
            self._init_condition()
            return False
        self.initialized = True
        self.set_condition("Initialized", "True")
        for cst in self.containers.values():
            if cst.current is None:
                cst.waiting_reason = "ContainerCreating"
        return True

    def _init_condition(self) -> None:
        left = [c.name for c in self.init_containers.values() if not c.finished_for_good]
        self.set_condition("Initialized", "False", "ContainersNotInitialized",
                           f"containers with incomplete status: [{' '.join(left)}]")

    def _sync_container(self, cst: _Container, now: float, restart_policy: str) -> None:
        cur = cst.current
        if cur is not None and cur.running:
            return
        if cst.finished_for_good:
            return
        if cur is not None:
            # The instance has exited: restart, back off, or stay terminated.
            code = cur.exit_code or 0
            restart = restart_policy == "Always" or (restart_policy == "OnFailure" and code != 0)
            if not restart:
                cst.finished_for_good = True
                cst.ready = False
                return
            if cst.next_attempt == 0.0:
                ran = (cur.finished_at or now) - cur.started_at
                if cst.backoff is not None and ran > 2 * MAX_BACKOFF:
                    cst.backoff = None
                if cst.backoff is None:
                    cst.next_attempt = now  # the first restart is immediate
                    cst.backoff = self.k.backoff_base
                else:
                    cst.next_attempt = (cur.finished_at or now) + cst.backoff
                    # As a real kubelet (05b): `terminated: Error` for most of the back-off,
                    # `waiting: CrashLoopBackOff` only from the sync shortly before the restart.
                    cst.crashloop_shown_at = cst.next_attempt - min(CRASHLOOP_SHOWN_S, cst.backoff / 4)
                    cst.waiting_message = (
                        f"back-off {go_duration(cst.backoff)} restarting failed "
                        f"container={cst.name} pod={self.name}_{self.ns}({self.uid})"
                    )
                    cst.backoff = min(cst.backoff * 2, MAX_BACKOFF)
            if now < cst.next_attempt:
                if (
                    cst.crashloop_shown_at
                    and now >= cst.crashloop_shown_at
                    and cst.waiting_reason != "CrashLoopBackOff"
                ):
                    cst.waiting_reason = "CrashLoopBackOff"
                    self.event(
                        "Warning",
                        "BackOff",
                        f"Back-off restarting failed container {cst.name} "
                        f"in pod {self.name}_{self.ns}({self.uid})",
                        cst.name,
                    )
                return
        elif now < cst.next_attempt:
            return
        self._try_start(cst)

    def _try_start(self, cst: _Container) -> None:
        spec = cst.spec
        image = spec.get("image", "")
        policy = spec.get("imagePullPolicy") or (
            "Always" if normalize_image(image).endswith(":latest") else "IfNotPresent"
        )
        now = time.time()
        if not cst.image_ok:
            present = self.k.image_present(image)
            if not present:
                self._ensure_sandbox()
                if policy == "Never":
                    msg = f'Container image "{image}" is not present with pull policy of Never'
                    cst.waiting_reason, cst.waiting_message = "ErrImageNeverPull", msg
                    self.event("Warning", "ErrImageNeverPull", msg, cst.name)
                    self.event("Warning", "Failed", "Error: ErrImageNeverPull", cst.name)
                    cst.image_backoff = min((cst.image_backoff or self.k.backoff_base / 2) * 2, MAX_BACKOFF)
                    cst.next_attempt = now + cst.image_backoff
                    return
                ref = image if "/" in image.split(":")[0] else f"docker.io/library/{normalize_image(image)}"
                err = (
                    f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": '
                    f'failed to resolve reference "{ref}": {ref}: not found'
                )
                if cst.waiting_reason == "ErrImagePull":
                    # Second look while the pull back-off runs.
                    cst.waiting_reason = "ImagePullBackOff"
                    cst.waiting_message = f'Back-off pulling image "{image}"'
                    self.event("Normal", "BackOff", f'Back-off pulling image "{image}"', cst.name)
                    self.event("Warning", "Failed", "Error: ImagePullBackOff", cst.name)
                    cst.image_backoff = min((cst.image_backoff or self.k.backoff_base / 2) * 2, MAX_BACKOFF)
                    cst.next_attempt = now + cst.image_backoff
                    return
                self.event("Normal", "Pulling", f'Pulling image "{image}"', cst.name)
                self.event("Warning", "Failed", f'Failed to pull image "{image}": {err}', cst.name)
                self.event("Warning", "Failed", "Error: ErrImagePull", cst.name)
                cst.waiting_reason, cst.waiting_message = "ErrImagePull", err
                cst.next_attempt = now + min(1.0, max(self.k.backoff_base / 10, 0.2))
                return
            cst.image_ok = True
        self._ensure_sandbox()
        if policy == "Always":
            self.event("Normal", "Pulling", f'Pulling image "{image}"', cst.name)
            self.event(
                "Normal",
                "Pulled",
                f'Successfully pulled image "{image}" in 0s (0s including waiting)',
                cst.name,
            )
        else:
            self.event("Normal", "Pulled", f'Container image "{image}" already present on machine', cst.name)
        try:
            argv, env, cwd = self._container_config(cst)
        except _ConfigError as e:
            cst.waiting_reason, cst.waiting_message = "CreateContainerConfigError", str(e)
            self.event("Warning", "Failed", f"Error: {e}", cst.name)
            cst.next_attempt = now + max(self.k.backoff_base / 5, 0.5)
            return
        self._launch(cst, argv, env, cwd)

    def _container_config(self, cst: _Container) -> tuple[list[str], dict[str, str], str]:
        spec = cst.spec
        mounts: list[tuple[str, str]] = []
        for vm in spec.get("volumeMounts") or []:
            base = self.volumes.get(vm["name"])
            if base is None:
                continue
            host = base / vm["subPath"] if vm.get("subPath") else base
            if vm.get("subPath") and not host.exists():
                host.mkdir(parents=True, exist_ok=True)
            mounts.append((vm["mountPath"].rstrip("/") or "/", str(host)))
        mounts.sort(key=lambda m: -len(m[0]))

        def rewrite(s: str) -> str:
            for mp, host in mounts:
                if mp == "/":
                    continue
                s = re.sub(re.escape(mp) + r"(?=/|$|[^\w.-])", lambda _m, h=host: h, s)
            return s

        env: dict[str, str] = {}
        for src in spec.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                ref = src["configMapRef"]
                obj = self.store.get("configmaps", self.ns, ref.get("name", ""))
                if obj is None:
                    if ref.get("optional"):
                        continue
                    raise _ConfigError(f'configmap "{ref.get("name")}" not found')
                for k, v in (obj.get("data") or {}).items():
                    env[prefix + k] = v
            elif "secretRef" in src:
                ref = src["secretRef"]
                obj = self.store.get("secrets", self.ns, ref.get("name", ""))
                if obj is None:
                    if ref.get("optional"):
                        continue
                    raise _ConfigError(f'secret "{ref.get("name")}" not found')
                for k, v in (obj.get("data") or {}).items():
                    env[prefix + k] = base64.b64decode(v).decode(errors="replace")
                for k, v in (obj.get("stringData") or {}).items():
                    env[prefix + k] = v
        for e in spec.get("env") or []:
            name = e["name"]
            if "valueFrom" in e:
                vf = e["valueFrom"]
                if "fieldRef" in vf:
                    env[name] = self.field_value(vf["fieldRef"].get("fieldPath", ""))
                elif "secretKeyRef" in vf or "configMapKeyRef" in vf:
                    is_secret = "secretKeyRef" in vf
                    ref = vf["secretKeyRef" if is_secret else "configMapKeyRef"]
                    obj = self.store.get(
                        "secrets" if is_secret else "configmaps", self.ns, ref.get("name", "")
                    )
                    kind = "secret" if is_secret else "configmap"
                    if obj is None:
                        if ref.get("optional"):
                            continue
                        raise _ConfigError(f'{kind} "{ref.get("name")}" not found')
                    key = ref.get("key", "")
                    if is_secret and key in (obj.get("data") or {}):
                        env[name] = base64.b64decode(obj["data"][key]).decode(errors="replace")
                    elif is_secret and key in (obj.get("stringData") or {}):
                        env[name] = obj["stringData"][key]
                    elif not is_secret and key in (obj.get("data") or {}):
                        env[name] = obj["data"][key]
                    elif ref.get("optional"):
                        continue
                    else:
                        kind_title = "Secret" if is_secret else "ConfigMap"
                        raise _ConfigError(
                            f"couldn't find key {key} in {kind_title} {self.ns}/{ref.get('name')}"
                        )
                elif "resourceFieldRef" in vf:
                    rf = vf["resourceFieldRef"]
                    section, _, res = rf.get("resource", "").partition(".")
                    val = ((spec.get("resources") or {}).get(section) or {}).get(res)
                    env[name] = str(int(parse_quantity(val))) if val is not None else "0"
            else:
                env[name] = _expand(str(e.get("value", "")), env)
        env = {k: rewrite(v) for k, v in env.items()}
        command = [_expand(str(a), env) for a in spec.get("command") or []]
        args = [_expand(str(a), env) for a in spec.get("args") or []]
        argv = [rewrite(a) for a in (command + args)] or ["sleep", "infinity"]
        base_env = {
            "PATH": os.pathsep.join(
                [os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/bin:/bin")]
            ),
            "HOSTNAME": self.name,
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
        }
        base_env.update(env)
        wd = spec.get("workingDir")
        if wd:
            cwd_path = Path(rewrite(wd))
            if not cwd_path.exists():
                # The "image" would have it; give the process a private stand-in.
                cwd_path = self.dir / "rootfs" / wd.lstrip("/")
                cwd_path.mkdir(parents=True, exist_ok=True)
        else:
            cwd_path = self.dir / "containers" / cst.name / "cwd"
            cwd_path.mkdir(parents=True, exist_ok=True)
        return argv, base_env, str(cwd_path)

    def _launch(self, cst: _Container, argv: list[str], env: dict[str, str], cwd: str) -> None:
        number = len(cst.instances)
        logdir = self.dir / "containers" / cst.name
        logdir.mkdir(parents=True, exist_ok=True)
        inst = _Instance(
            number=number,
            log_path=logdir / f"{number}.log",
            container_id="containerd://" + secrets.token_hex(32),
        )
        inst.log_path.write_bytes(b"")
        if number > 0:
            cst.restart_count += 1
        self.event("Normal", "Created", f"Created container {cst.name}", cst.name)
        exe = argv[0]
        if ("/" not in exe and shutil.which(exe, path=env.get("PATH")) is None) or (
            "/" in exe and not os.access(exe, os.X_OK)
        ):
            msg = (
                f"failed to create containerd task: failed to create shim task: OCI runtime create failed: "
                f'runc create failed: unable to start container process: exec: "{exe}": executable file '
                f"not found in $PATH: unknown"
            )
            inst.started_at = inst.finished_at = time.time()
            inst.exit_code, inst.reason, inst.message = 128, "StartError", msg
            inst.done.set()
            cst.instances.append(inst)
            self._reset_after_start(cst)
            self.event("Warning", "Failed", f"Error: {msg}", cst.name)
            return
        full = list(argv)
        limit = ((cst.spec.get("resources") or {}).get("limits") or {}).get("memory")
        limit_bytes = int(parse_quantity(limit)) if limit is not None else None
        if limit_bytes and self.k.memory_cgroup is not None:
            cg = self.k.memory_cgroup / f"k8s-emu-{self.uid[:8]}-{cst.name}-{number}"
            try:
                cg.mkdir(exist_ok=True)
                (cg / "memory.limit_in_bytes").write_text(str(limit_bytes))
                with contextlib.suppress(OSError):
                    (cg / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
                inst.cgroup = cg
                full = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cg), *full]
            except OSError:
                inst.cgroup = None
        if self.netns_pid is not None:
            full = ["nsenter", f"--net=/proc/{self.netns_pid}/ns/net", "--", *full]
        r, w = os.pipe()
        try:
            proc = subprocess.Popen(
                full,
                stdin=subprocess.DEVNULL,
                stdout=w,
                stderr=w,
                env=env,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            os.close(r)
            os.close(w)
            inst.started_at = inst.finished_at = time.time()
            inst.exit_code, inst.reason, inst.message = 128, "StartError", str(e)
            inst.done.set()
            cst.instances.append(inst)
            self._reset_after_start(cst)
            return
        os.close(w)
        inst.proc = proc
        inst.started_at = time.time()
        cst.instances.append(inst)
        self._reset_after_start(cst)
        reader = threading.Thread(
            target=self._pump_log, args=(inst, r), daemon=True, name=f"log-{self.name}-{cst.name}-{number}"
        )
        reader.start()
        threading.Thread(
            target=self._wait_instance,
            args=(cst, inst, reader),
            daemon=True,
            name=f"wait-{self.name}-{cst.name}-{number}",
        ).start()
        if limit_bytes and inst.cgroup is None:
            threading.Thread(target=self._watch_rss, args=(inst, limit_bytes), daemon=True).start()
        self.event("Normal", "Started", f"Started container {cst.name}", cst.name)
        self._start_probes(cst, inst)

    def _reset_after_start(self, cst: _Container) -> None:
        cst.waiting_reason, cst.waiting_message = "", ""
        cst.next_attempt = 0.0
        cst.crashloop_shown_at = 0.0
        cst.ready = False
        cst.started_probe_ok = False

    def _pump_log(self, inst: _Instance, fd: int) -> None:
        """Copy the container's output into its CRI log file, one timestamped record per line."""
        partial = b""
        with open(inst.log_path, "ab", buffering=0) as out:
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    break
                ts = _rfc3339_nano(time.time_ns()).encode()
                data = partial + data
                lines = data.split(b"\n")
                partial = lines.pop()
                if lines:
                    with inst.log_lock:
                        out.write(b"".join(ts + b" stdout F " + ln + b"\n" for ln in lines))
            if partial:
                ts = _rfc3339_nano(time.time_ns()).encode()
                with inst.log_lock:
                    out.write(ts + b" stdout P " + partial + b"\n")
        os.close(fd)

    def _wait_instance(self, cst: _Container, inst: _Instance, reader: threading.Thread) -> None:
        assert inst.proc is not None
        rc = inst.proc.wait()
        # Like a container's PID 1 exiting: everything else in it goes too.
        with contextlib.suppress(OSError):
            os.killpg(inst.proc.pid, signal.SIGKILL)
        reader.join(timeout=3)
        inst.finished_at = time.time()
        if inst.cgroup is not None:
            with contextlib.suppress(OSError):
                oom = (inst.cgroup / "memory.oom_control").read_text()
                m = re.search(r"oom_kill (\d+)", oom)
                if m and int(m.group(1)) > 0:
                    inst.oom = True
            for _ in range(50):
                try:
                    inst.cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)
        code = 128 - rc if rc < 0 else rc
        if inst.oom:
            inst.exit_code, inst.reason = 137, "OOMKilled"
        else:
            inst.exit_code, inst.reason = code, ("Completed" if code == 0 else "Error")
        if inst.exit_code != 0 and cst.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            inst.message = _log_tail_message(inst.log_path)
        if cst.probe_stop is not None:
            cst.probe_stop.set()
        cst.ready = False
        inst.done.set()
        self.wake.set()

    def _watch_rss(self, inst: _Instance, limit: int) -> None:
        assert inst.proc is not None
        pgid = inst.proc.pid
        while not inst.done.wait(0.05):
            total = _group_rss(pgid)
            if total > limit:
                inst.oom = True
                with contextlib.suppress(OSError):
                    os.killpg(pgid, signal.SIGKILL)
                return

    # -- probes
    def _start_probes(self, cst: _Container, inst: _Instance) -> None:
        stop = threading.Event()
        cst.probe_stop = stop
        probes = [
            _Probe(kind, cst.spec[key])
            for kind, key in (
                ("Startup", "startupProbe"),
                ("Liveness", "livenessProbe"),
                ("Readiness", "readinessProbe"),
            )
            if cst.spec.get(key)
        ]
        if not any(p.kind == "Startup" for p in probes):
            cst.started_probe_ok = True
        if not any(p.kind == "Readiness" for p in probes):
            cst.ready = True
        for p in probes:
            threading.Thread(
                target=self._probe_loop,
                args=(cst, inst, p, stop),
                daemon=True,
                name=f"probe-{self.name}-{cst.name}-{p.kind}",
            ).start()

    def _probe_loop(self, cst: _Container, inst: _Instance, probe: _Probe, stop: threading.Event) -> None:
        spec = probe.spec
        scale = self.k.probe_period
        period = float(spec.get("periodSeconds", 10)) * scale
        delay = float(spec.get("initialDelaySeconds", 0)) * scale
        timeout = float(spec.get("timeoutSeconds", 1))
        fail_th = int(spec.get("failureThreshold", 3))
        succ_th = int(spec.get("successThreshold", 1))
        if stop.wait(delay):
            return
        while not stop.is_set() and inst.running:
            if probe.kind != "Startup" and not cst.started_probe_ok:
                if stop.wait(min(period, 0.2)):
                    return
                continue
            ok, msg = self._run_probe(cst, spec, timeout)
            if stop.is_set() or not inst.running:
                return
            if ok:
                probe.successes += 1
                probe.failures = 0
                if probe.successes >= succ_th:
                    probe.ok = True
                    if probe.kind == "Readiness" and not cst.ready:
                        cst.ready = True
                        self.wake.set()
                    elif probe.kind == "Startup":
                        cst.started_probe_ok = True
                        self.wake.set()
                        return
            else:
                probe.failures += 1
                probe.successes = 0
                self.event("Warning", "Unhealthy", f"{probe.kind} probe failed: {msg}", cst.name)
                if probe.kind == "Readiness" and probe.failures >= fail_th and cst.ready:
                    cst.ready = False
                    self.wake.set()
                if probe.kind in ("Liveness", "Startup") and probe.failures >= fail_th:
                    what = "liveness" if probe.kind == "Liveness" else "startup"
                    self.event(
                        "Normal",
                        "Killing",
                        f"Container {cst.name} failed {what} probe, will be restarted",
                        cst.name,
                    )
                    grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
                    if spec.get("terminationGracePeriodSeconds") is not None:
                        grace = spec["terminationGracePeriodSeconds"]
                    threading.Thread(
                        target=self._stop_instance, args=(inst, float(grace)), daemon=True
                    ).start()
                    return
            if stop.wait(period):
                return

    def _run_probe(self, cst: _Container, spec: Obj, timeout: float) -> tuple[bool, str]:
        ip = self.pod_ip if self.netns_pid is not None else "127.0.0.1"
        shown_ip = self.pod_ip or "127.0.0.1"
        if "httpGet" in spec:
            hg = spec["httpGet"]
            port = self._resolve_port(cst, hg.get("port"))
            path = hg.get("path", "/") or "/"
            url = f"http://{shown_ip}:{port}{path}"
            host = hg.get("host") or ip
            try:
                s = connect_in_netns(self.netns_pid, host or "127.0.0.1", port, timeout)
            except TimeoutError:
                return False, f'Get "{url}": {_DEADLINE}'
            except OSError as e:
                return False, f'Get "{url}": dial tcp {shown_ip}:{port}: connect: {_errno_text(e)}'
            try:
                headers = "".join(f"{h['name']}: {h['value']}\r\n" for h in hg.get("httpHeaders") or [])
                s.settimeout(timeout)
                s.sendall(
                    f"GET {path} HTTP/1.1\r\nHost: {shown_ip}:{port}\r\nUser-Agent: kube-probe/1.28\r\n"
                    f"Accept: */*\r\n{headers}Connection: close\r\n\r\n".encode()
                )
                head = b""
                while b"\r\n" not in head:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    head += chunk
            except TimeoutError:
                return False, f'Get "{url}": {_DEADLINE}'
            except OSError as e:
                return False, f'Get "{url}": read tcp: {_errno_text(e)}'
            finally:
                s.close()
            m = re.match(rb"HTTP/\d\.\d (\d{3})", head)
            if not m:
                return False, f'Get "{url}": EOF'
            code = int(m.group(1))
            if 200 <= code < 400:
                return True, ""
            return False, f"HTTP probe failed with statuscode: {code}"
        if "tcpSocket" in spec:
            port = self._resolve_port(cst, spec["tcpSocket"].get("port"))
            try:
                connect_in_netns(self.netns_pid, ip or "127.0.0.1", port, timeout).close()
                return True, ""
            except TimeoutError:
                return False, f"dial tcp {shown_ip}:{port}: i/o timeout"
            except OSError as e:
                return False, f"dial tcp {shown_ip}:{port}: connect: {_errno_text(e)}"
        if "exec" in spec:
            cur = cst.current
            argv = [str(a) for a in spec["exec"].get("command") or []]
            if not argv or cur is None or cur.proc is None:
                return False, ""
            try:
                _a, env, cwd = self._container_config(cst)
            except _ConfigError as e:
                return False, str(e)
            full = argv
            if self.netns_pid is not None:
                full = ["nsenter", f"--net=/proc/{self.netns_pid}/ns/net", "--", *argv]
            try:
                res = subprocess.run(
                    full,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=cwd,
                    timeout=timeout,
                    start_new_session=True,
                )
            except subprocess.TimeoutExpired:
                return False, f"command {json.dumps(argv)[1:-1].replace(', ', ' ')!r} timed out"
            except OSError as e:
                return False, str(e)
            if res.returncode == 0:
                return True, ""
            return False, res.stdout.decode(errors="replace")
        return True, ""

    def _resolve_port(self, cst: _Container, port: Any) -> int:
        if isinstance(port, str) and not port.isdigit():
            for p in cst.spec.get("ports") or []:
                if p.get("name") == port:
                    return int(p["containerPort"])
            return 0
        return int(port or 0)

    # -- stopping
    def _stop_instance(self, inst: _Instance, grace: float) -> None:
        """SIGTERM the instance's process group, SIGKILL after ``grace`` seconds."""
        if inst.proc is None or not inst.running:
            return
        inst.killed_by_kubelet = True
        with contextlib.suppress(OSError):
            os.killpg(inst.proc.pid, signal.SIGTERM)
        if not inst.done.wait(max(grace, 0.0)):
            with contextlib.suppress(OSError):
                os.killpg(inst.proc.pid, signal.SIGKILL)
            inst.done.wait(10)

    def _stop_containers(self, grace: float) -> None:
        """Killing events, then SIGTERM, ``grace`` seconds, SIGKILL for every running container
        (in parallel), none restarted after; returns once all have stopped."""
        threads = []
        for cst in [*self.init_containers.values(), *self.containers.values()]:
            cur = cst.current
            if cur is not None and cur.running:
                self.event("Normal", "Killing", f"Stopping container {cst.name}", cst.name)
                t = threading.Thread(target=self._stop_instance, args=(cur, grace), daemon=True)
                t.start()
                threads.append(t)
            cst.finished_for_good = True
            cst.ready = False
            if cst.probe_stop is not None:
                cst.probe_stop.set()
        for t in threads:
            while t.is_alive() and not self._shutdown.is_set():
                t.join(0.2)

    def _terminate(self, pod: Obj) -> None:
        """Graceful deletion: Killing events, SIGTERM, grace, SIGKILL, final status, removal."""
        self.deleting = True
        md = pod["metadata"]
        grace = md.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        self._stop_containers(float(grace))
        codes = [c.current.exit_code for c in self.containers.values() if c.current is not None]
        self.terminal_phase = "Succeeded" if codes and all(c == 0 for c in codes) else "Failed"
        with contextlib.suppress(ApiError):
            self.write_status()
        self._kill_everything()
        with contextlib.suppress(Exception):
            self.store.remove("pods", self.ns, self.name)

    def _evict(self, resource: str, threshold: str, available: str) -> None:
        """Node-pressure eviction: stop the containers, Failed/Evicted, the object stays."""
        usage = {c.name: _group_rss(c.current.proc.pid) for c in self.containers.values()
                 if c.current is not None and c.current.proc is not None and c.current.running}
        message = (f"The node was low on resource: {resource}. "
                   f"Threshold quantity: {threshold}, available: {available}. ")
        if usage:
            top = max(usage, key=lambda n: usage[n])
            message += (f"Container {top} was using {usage[top] // 1024}Ki, request is 0, has larger "
                        f"consumption of {resource}. ")
        self.evicted_message = message
        self.event("Warning", "Evicted", message)
        self.set_condition("DisruptionTarget", "True", "TerminationByKubelet", message)
        self._stop_containers(2.0)
        self.terminal_phase = "Failed"
        with contextlib.suppress(ApiError):
            self.write_status()
        self.evicted.set()

    def _kill_everything(self) -> None:
        for cst in [*self.init_containers.values(), *self.containers.values()]:
            if cst.probe_stop is not None:
                cst.probe_stop.set()
            for inst in cst.instances:
                if inst.proc is not None and inst.proc.poll() is None:
                    with contextlib.suppress(OSError):
                        os.killpg(inst.proc.pid, signal.SIGKILL)
                    with contextlib.suppress(Exception):
                        inst.proc.wait(5)
                inst.done.wait(3)
        if self.sandbox is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.sandbox.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.sandbox.wait(5)
            self.sandbox = None
        self.k.release_ip(self.pod_ip)

    # -- status
    def _update_readiness(self, phase: str | None = None) -> None:
        terminal = self.terminal_phase or (phase if phase in ("Succeeded", "Failed") else None)
        if terminal is not None:
            reason = "PodCompleted" if terminal == "Succeeded" else "PodFailed"
            self.set_condition("Ready", "False", reason)
            self.set_condition("ContainersReady", "False", reason)
            return
        unready = [
            c.name
            for c in self.containers.values()
            if not (c.ready and c.current is not None and c.current.running and c.started_probe_ok)
        ]
        if unready:
            msg = f"containers with unready status: [{' '.join(unready)}]"
            self.set_condition("Ready", "False", "ContainersNotReady", msg)
            self.set_condition("ContainersReady", "False", "ContainersNotReady", msg)
        else:
            self.set_condition("ContainersReady", "True")
            self.set_condition("Ready", "True")

    def _phase(self, statuses: list[Obj]) -> str:
        if self.terminal_phase is not None:
            return self.terminal_phase
        restart_policy = self.pod["spec"].get("restartPolicy", "Always")
        running = waiting = stopped = succeeded = 0
        for st in statuses:
            state = st["state"]
            if "running" in state:
                running += 1
            elif "terminated" in state:
                stopped += 1
                if state["terminated"]["exitCode"] == 0:
                    succeeded += 1
            elif st["lastState"].get("terminated"):
                stopped += 1
                if st["lastState"]["terminated"]["exitCode"] == 0:
                    succeeded += 1
            else:
                waiting += 1
        if waiting:
            return "Pending"
        if running:
            return "Running"
        if stopped:
            if restart_policy == "Always":
                return "Running"
            if stopped == succeeded:
                return "Succeeded"
            return "Running" if restart_policy == "OnFailure" else "Failed"
        return "Pending"

    def container_status(self, cst: _Container) -> Obj:
        cur = cst.current
        image = cst.spec.get("image", "")
        last: Obj = {}
        state: Obj
        running_now = cur is not None and cur.running
        if running_now and cur is not None:
            state = {"running": {"startedAt": _now_rfc3339(cur.started_at)}}
            if len(cst.instances) >= 2:
                last = {"terminated": cst.instances[-2].terminated_state()}
        elif cur is not None and cst.waiting_reason and not cst.finished_for_good:
            state = {"waiting": {"reason": cst.waiting_reason}}
            if cst.waiting_message:
                state["waiting"]["message"] = cst.waiting_message
            last = {"terminated": cur.terminated_state()}
        elif cur is not None:
            state = {"terminated": cur.terminated_state()}
            if len(cst.instances) >= 2:
                last = {"terminated": cst.instances[-2].terminated_state()}
        else:
            state = {"waiting": {"reason": cst.waiting_reason or "ContainerCreating"}}
            if cst.waiting_message:
                state["waiting"]["message"] = cst.waiting_message
        out: Obj = {
            "name": cst.name,
            "state": state,
            "lastState": last,
            "ready": bool(running_now and cst.ready and cst.started_probe_ok and self.terminal_phase is None),
            "restartCount": cst.restart_count,
            "image": image,
            "imageID": ("sha256:" + hashlib.sha256(normalize_image(image).encode()).hexdigest())
            if cur is not None
            else "",
        }
        if cur is not None:
            out["containerID"] = cur.container_id
        out["started"] = bool(running_now and cst.started_probe_ok and self.terminal_phase is None)
        return out

    def init_container_status(self, cst: _Container) -> Obj:
        """An init container's status: ready once it completed, no ``started`` (as kubelet 1.28)."""
        out = self.container_status(cst)
        out.pop("started", None)
        cur = cst.current
        out["ready"] = cur is not None and not cur.running and cur.exit_code == 0
        return out

    def write_status(self) -> None:
        pod = self.pod
        if self.init_containers and not self.initialized:
            self._init_condition()
        statuses = [self.container_status(c) for c in self.containers.values()]
        st: Obj = {"phase": self._phase(statuses)}
        self._update_readiness(st["phase"])
        if self.evicted_message is not None:
            st["message"] = self.evicted_message
            st["reason"] = "Evicted"
        # DisruptionTarget is written by whoever disrupts the pod (the eviction API or this
        # kubelet); as a real kubelet's status manager, keep one it did not write.
        theirs = [c for c in (pod.get("status") or {}).get("conditions") or []
                  if c.get("type") == "DisruptionTarget" and "DisruptionTarget" not in self.conditions]
        st["conditions"] = theirs + [
            self.conditions[t]
            for t in ("DisruptionTarget", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            if t in self.conditions
        ]
        st["hostIP"] = self.k.host_ip
        if self.pod_ip:
            st["podIP"] = self.pod_ip
            st["podIPs"] = [{"ip": self.pod_ip}]
        if self.start_time:
            st["startTime"] = self.start_time
        if self.init_containers:
            inits = self.init_containers.values()
            st["initContainerStatuses"] = [self.init_container_status(c) for c in inits]
        st["containerStatuses"] = statuses
        st["qosClass"] = (pod.get("status") or {}).get("qosClass") or _qos_class(pod)
        if st != pod.get("status"):
            with contextlib.suppress(ApiError):
                self.pod = self.store.patch_status("pods", self.ns, self.name, st)


class _MountError(Exception):
    pass


class _ConfigError(Exception):
    pass


def _errno_text(e: OSError) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, ConnectionResetError):
        return "connection reset by peer"
    return (e.strerror or str(e)).lower()


def _expand(s: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion (``$$(`` escapes; unknown references stay as written)."""
    if "$" not in s:
        return s

    def sub(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return "$(" + m.group(1) + ")"
        return env.get(m.group(2), m.group(0))

    return re.sub(r"\$\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, s)


def _group_rss(pgid: int) -> int:
    """Resident bytes of every process in process group ``pgid`` (from /proc)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid:
                total += int(fields[21]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total


def _qos_class(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        lim, req = res.get("limits") or {}, res.get("requests") or {}
        if lim or req:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
