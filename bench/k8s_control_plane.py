"""Kubernetes control-plane load of following 1 and 10 services, against kubectl per service.

Everything runs against the Kubernetes API emulator (tests/k8s_emulator: a real HTTP server, the
official client, a kubelet running pods as local processes). Requests are counted at the
emulator's HTTP server (ground truth, whoever sends them), by path kind: list, watch, get, log
stream, discovery and other.

1. For each service count (``--counts``, default 1,10), in a fresh namespace each time, the same
   ``--replicas`` (2) replica services are applied (the apply is not counted: it is the same
   either way), then followed through their rollout plus ``--steady`` seconds (60) by:
   - ours: one K8sTier, ``tier.watch(record, on_status=..., on_lines=...)`` per service, which is
     what the service widget does (status from the namespace's shared list+watch of Deployments,
     pods and Events; one log follower per pod);
   - baseline: what a user would run per service, ``kubectl rollout status deployment/NAME``, and
     when it has exited ``kubectl logs -f pod/POD`` for each of the service's pods (their names
     for free). The real kubectl (``--kubectl``, default the google-cloud-sdk 1.28 build or
     ``kubectl`` on PATH) with a discovery cache warmed before the window, as in the golden
     record's warm runs; kubectl sends no bearer token over plain http, so the emulator lets
     anonymous users read for this run. Without a working kubectl (or ``--kubectl python``) the
     baseline is emulated with the Python client, request for request as kubectl 1.28 makes them
     in the golden record (rollout status: GET deployment, LIST with fieldSelector, one WATCH with
     bookmarks; logs -f: GET pod, one follow stream per pod), and the output says so.
   The window runs from the end of the apply to ``--steady`` s after every service is ready.
   Also reported: log streams per container start (the pods' restarts + 1), which should be 1.
   New containers spend ``--create-delay`` (0.8 s, as on the golden record's node) in
   ContainerCreating, when a log request would be refused.
2. Pod ready -> status callback: one service scaled up a replica at a time to ``--pods`` (10);
   the time from the pod's Ready condition turning True in the emulator's store (a store
   subscriber, called as the kubelet writes it) to ``on_status`` first showing the ready count
   reach that many (which goes through the Deployment's readyReplicas), and to it first showing
   that pod ready (straight from the pod watch).

Nothing is asserted. The machine has 2 cores and may be shared with other work.

Run: .venv/bin/python bench/k8s_control_plane.py [--steady 60] [--counts 1,10] [--replicas 2]
     [--pods 10] [--kubectl PATH|python]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORK = Path(tempfile.mkdtemp(prefix="jt-k8s-bench-"))
os.environ.setdefault("JUPYTER_DATA_DIR", str(WORK / "data"))  # the env-hash key lives there

from jupyter_tiers.config.profiles import Profile  # noqa: E402
from jupyter_tiers.config.registry import Registry  # noqa: E402
from jupyter_tiers.core.model import ServiceState, ServiceStatus  # noqa: E402
from jupyter_tiers.k8s.tier import K8sTier  # noqa: E402
from tests.k8s_emulator.emulator import Emulator  # noqa: E402

KUBECTL_CANDIDATES = ("/usr/lib/google-cloud-sdk/bin/kubectl.1.28", "kubectl")
NAME_LABEL = "app.kubernetes.io/name"

# A service that says it started, then writes a heartbeat line every 5 s (its logs are followed).
BODY = """\
import http.server, threading, time
def beat():
    n = 0
    while True:
        print(f"heartbeat {n}", flush=True)
        n += 1
        time.sleep(5)
print("serving on 8000", flush=True)
threading.Thread(target=beat, daemon=True).start()
http.server.ThreadingHTTPServer(("0.0.0.0", 8000), http.server.BaseHTTPRequestHandler).serve_forever()
"""

COLUMNS = ("list", "watch", "get", "log streams", "discovery", "other")


def category(key: tuple[str, str, bool]) -> str:
    """Which column a (method, path kind, watch) request goes in."""
    method, kind, watch = key
    if kind == "discovery":
        return "discovery"
    if method != "GET":
        return "other"
    if kind.endswith("/log"):
        return "log streams" if watch else "other"
    if "{name}" in kind:
        return "get"
    return "watch" if watch else "list"


def columns(counts: collections.Counter) -> dict[str, int]:
    out = dict.fromkeys(COLUMNS, 0)
    for key, n in counts.items():
        out[category(key)] += n
    return out


# ---------------------------------------------------------------------------------------------
# The emulator and a tier on it
# ---------------------------------------------------------------------------------------------


def start_emulator(create_delay: float) -> Emulator:
    emu = Emulator(WORK / "emulator", kubelet_options={"create_delay": create_delay})
    emu.start()
    # kubectl (client-go) sends no bearer token to a plain-http server: let anonymous users read.
    authorize = emu.server.authorize

    def allow_anonymous_reads(user: Any, verb: str, *rest: Any) -> None:
        if user.name == "system:anonymous" and verb in ("get", "list", "watch"):
            return
        authorize(user, verb, *rest)

    emu.server.authorize = allow_anonymous_reads  # type: ignore[method-assign]
    return emu


def make_tier(emu: Emulator, namespace: str) -> K8sTier:
    profile = Profile(name=f"bench-{namespace}", tier="kubernetes",
                      settings={"kubeconfig": str(emu.kubeconfig_path), "namespace": namespace},
                      defaults={"image": "python:3.11-slim"})
    return K8sTier(profile, registry=Registry(WORK / f"registry-{namespace}.sqlite"))


def drop_namespace(emu: Emulator, namespace: str, timeout: float = 90.0) -> None:
    """Delete a namespace and wait for its pods to be gone (their processes stop)."""
    emu.delete_namespace(namespace)
    deadline = time.monotonic() + timeout
    while emu.store.list("pods", namespace):
        if time.monotonic() > deadline:
            note(f"namespace {namespace}: pods still there after {timeout:.0f} s")
            return
        time.sleep(0.5)


def service_pods(emu: Emulator, namespace: str, service: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in emu.store.list("pods", namespace)
                  if (p["metadata"].get("labels") or {}).get(NAME_LABEL) == service
                  and not p["metadata"].get("deletionTimestamp"))


# ---------------------------------------------------------------------------------------------
# Followers: ours and the baseline
# ---------------------------------------------------------------------------------------------


class Ours:
    """tier.watch for every service, as the widget does."""

    name = "jupyter-tiers"

    def __init__(self, tier: K8sTier, services: list) -> None:
        self.tier = tier
        self.services = services
        self.ready: set[str] = set()
        self.lines = 0
        self.all_ready = threading.Event()
        self.subs: list[Any] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        for svc in self.services:
            self.subs.append(self.tier.watch(svc.record, on_status=self._status(svc.record.name),
                                             on_lines=self._lines))

    def _status(self, name: str) -> Callable[[ServiceStatus], None]:
        def on_status(status: ServiceStatus) -> None:
            if status.state is ServiceState.READY:
                with self._lock:
                    if name not in self.ready:
                        note(f"  ours: {name} READY, {status.ready}/{status.desired} ready, pods "
                             f"{[(p.name, p.ready) for p in status.pods]}")
                    self.ready.add(name)
                    if len(self.ready) == len(self.services):
                        self.all_ready.set()
        return on_status

    def _lines(self, lines: list) -> None:
        with self._lock:
            self.lines += len(lines)

    def stop(self) -> None:
        for sub in self.subs:
            self.tier.unwatch(sub)
        self.tier.close()

    @property
    def client_requests(self) -> int | None:
        return self.tier.api_requests


class KubectlBaseline:
    """Per service: ``kubectl rollout status``, then ``kubectl logs -f`` of each of its pods."""

    def __init__(self, emu: Emulator, namespace: str, services: list, kubectl: str | None,
                 cache_dir: Path) -> None:
        self.emu = emu
        self.namespace = namespace
        self.services = services
        self.kubectl = kubectl
        self.cache_dir = cache_dir
        self.name = "kubectl" if kubectl else "kubectl, emulated"
        self.env = dict(os.environ, KUBECONFIG=str(emu.kubeconfig_path))
        self.lines = 0
        self.ready: set[str] = set()
        self.failed: list[str] = []
        self.all_ready = threading.Event()
        self.procs: list[subprocess.Popen] = []
        self.streams: list[Any] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self.client_requests = None

    def start(self) -> None:
        for svc in self.services:
            threading.Thread(target=self._follow, args=(svc.record.name, svc.record.spec["deployment"]),
                             daemon=True).start()

    def _follow(self, service: str, deployment: str) -> None:
        ok = self._rollout_status(deployment)
        if not ok:
            self.failed.append(service)
        # The service counts as followed once its log streams are open (their first line came),
        # so that their requests fall in the rollout part of the window, as ours do.
        attached = []
        for pod in service_pods(self.emu, self.namespace, service):
            attached.append(threading.Event())
            threading.Thread(target=self._logs, args=(pod, attached[-1]), daemon=True).start()
        for event in attached:
            event.wait(30)
        with self._lock:
            self.ready.add(service)
            if len(self.ready) == len(self.services):
                self.all_ready.set()

    # --- the real kubectl ---------------------------------------------------------------
    def _argv(self, *args: str) -> list[str]:
        assert self.kubectl is not None
        return [self.kubectl, "--cache-dir", str(self.cache_dir), "-n", self.namespace, *args]

    def _rollout_status(self, deployment: str) -> bool:
        if self.kubectl is None:
            return PyKubectl(self.emu, self.namespace).rollout_status(deployment, self.stopping)
        proc = subprocess.run(self._argv("rollout", "status", f"deployment/{deployment}", "--timeout=300s"),
                              env=self.env, capture_output=True, text=True)
        return proc.returncode == 0

    def _logs(self, pod: str, attached: threading.Event) -> None:
        if self.kubectl is None:
            lines = PyKubectl(self.emu, self.namespace).logs_follow(pod, self.streams, self.stopping)
        else:
            proc = subprocess.Popen(self._argv("logs", "-f", f"pod/{pod}"), env=self.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            with self._lock:
                self.procs.append(proc)
            assert proc.stdout is not None
            lines = proc.stdout
        for _line in lines:
            attached.set()
            with self._lock:
                self.lines += 1
        attached.set()

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            procs, streams = list(self.procs), list(self.streams)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        for resp in streams:
            with contextlib.suppress(Exception):
                resp.close()


class PyKubectl:
    """What kubectl 1.28 sends for ``rollout status`` and ``logs -f`` (golden record, section 12),
    through the Python client: used when no kubectl runs here."""

    def __init__(self, emu: Emulator, namespace: str) -> None:
        from kubernetes import client

        api = emu.api_client()
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace

    @staticmethod
    def _complete(dep: dict[str, Any]) -> bool:
        """kubectl's DeploymentStatusViewer: the rollout is done."""
        spec, st = dep.get("spec") or {}, dep.get("status") or {}
        if (dep["metadata"].get("generation") or 0) > (st.get("observedGeneration") or 0):
            return False
        want, updated = spec.get("replicas", 1), st.get("updatedReplicas") or 0
        return (updated >= want and (st.get("replicas") or 0) <= updated
                and (st.get("availableReplicas") or 0) >= updated)

    def rollout_status(self, name: str, stopping: threading.Event) -> bool:
        ns, sel = self.namespace, f"metadata.name={name}"
        _ = self.apps.read_namespaced_deployment(name, ns, _preload_content=False).data
        listed = json.loads(self.apps.list_namespaced_deployment(
            ns, field_selector=sel, limit=500, resource_version="0", _preload_content=False).data)
        # kubectl opens its watch even when the list shows the rollout done (list, then watch).
        resp = self.apps.list_namespaced_deployment(
            ns, field_selector=sel, watch=True, allow_watch_bookmarks=True,
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=random.randint(300, 600), _preload_content=False)
        try:
            if any(self._complete(d) for d in listed.get("items") or []):
                return True
            pending = b""
            for chunk in resp.stream(amt=None, decode_content=False):
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    event = json.loads(line)
                    if event.get("type") in ("ADDED", "MODIFIED") and self._complete(event["object"]):
                        return True
                if stopping.is_set():
                    return False
            return False
        finally:
            resp.close()

    def logs_follow(self, pod: str, streams: list, stopping: threading.Event):
        _ = self.core.read_namespaced_pod(pod, self.namespace, _preload_content=False).data
        resp = self.core.read_namespaced_pod_log(pod, self.namespace, follow=True, _preload_content=False)
        streams.append(resp)
        with contextlib.suppress(Exception):  # closed by stop()
            for chunk in resp.stream(amt=None, decode_content=False):
                yield from range(chunk.count(b"\n"))
                if stopping.is_set():
                    return


def find_kubectl(choice: str, emu: Emulator, cache_dir: Path) -> tuple[str | None, str]:
    """A kubectl that works against the emulator, its version and a warm discovery cache; or
    (None, why not)."""
    if choice == "python":
        return None, "--kubectl python"
    candidates = KUBECTL_CANDIDATES if choice == "auto" else (choice,)
    why = "no kubectl found"
    emu.create_namespace("kubectl-warmup")
    env = dict(os.environ, KUBECONFIG=str(emu.kubeconfig_path))
    for cand in candidates:
        path = cand if os.path.isabs(cand) else shutil.which(cand)
        if not path or not os.access(path, os.X_OK):
            continue
        try:
            version = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True,
                                     text=True, timeout=30, check=True)
            git = json.loads(version.stdout)["clientVersion"]["gitVersion"]
            # Warm the discovery cache (a pod and a deployment lookup), as a user's would be.
            for args in (["get", "deployments"], ["get", "pods"]):
                subprocess.run([path, "--cache-dir", str(cache_dir), "-n", "kubectl-warmup", *args],
                               env=env, capture_output=True, text=True, timeout=60, check=True)
        except (OSError, subprocess.SubprocessError, KeyError, ValueError) as exc:
            why = f"{cand}: {exc}"
            continue
        return path, git
    return None, why


# ---------------------------------------------------------------------------------------------
# One measured window
# ---------------------------------------------------------------------------------------------


def run_window(emu: Emulator, who: str, n: int, args: argparse.Namespace, kubectl: str | None,
               cache_dir: Path) -> dict[str, Any]:
    namespace = f"{who}-{n}"
    emu.create_namespace(namespace)
    tier = make_tier(emu, namespace)
    spec_names = [f"svc{i}" for i in range(n)]
    services = [tier.apply(tier.make_spec(BODY, name=name, replicas=args.replicas, port=8000))
                for name in spec_names]
    follower: Any = (Ours(tier, services) if who == "ours"
                     else KubectlBaseline(emu, namespace, services, kubectl, cache_dir))
    start_counts, t0 = emu.server.requests_snapshot(), time.monotonic()
    client0 = tier.api_requests
    follower.start()
    if not follower.all_ready.wait(args.rollout_timeout):
        raise SystemExit(f"{who}, {n} services: not all ready after {args.rollout_timeout:.0f} s "
                         f"({len(follower.ready)} ready)")
    rollout_counts, t1 = emu.server.requests_snapshot(), time.monotonic()
    time.sleep(args.steady)
    end_counts, t2 = emu.server.requests_snapshot(), time.monotonic()
    # Container starts in the window (every pod's instances: restarts + 1), read after the count.
    starts = sum(c.get("restartCount", 0) + 1 for pod in emu.store.list("pods", namespace)
                 for c in (pod.get("status") or {}).get("containerStatuses") or [] if c.get("containerID"))
    follower.stop()
    if who == "ours":
        client = tier.api_requests - client0
    else:
        client = None
        tier.close()
    drop_namespace(emu, namespace)
    res = {
        "who": follower.name, "n": n, "rollout_s": t1 - t0, "window_s": t2 - t0,
        "total": columns(end_counts - start_counts), "steady": columns(end_counts - rollout_counts),
        "rollout": columns(rollout_counts - start_counts), "keys": end_counts - start_counts,
        "lines": follower.lines, "client": client, "failed": getattr(follower, "failed", []),
        "starts": starts,
    }
    note(f"{follower.name:>18}, {n:>2} services: rollout {res['rollout_s']:.1f} s, window "
         f"{res['window_s']:.0f} s, requests {sum(res['total'].values())} {res['total']}, "
         f"steady {sum(res['steady'].values())}, log lines {res['lines']}"
         + (f", client-side count {client}" if client is not None else ""))
    for key, count in sorted(res["keys"].items()):
        note(f"{'':>22}{key[0]:<6} {key[1]:<28} {'watch/follow' if key[2] else '':<13} {count}")
    return res


# ---------------------------------------------------------------------------------------------
# Pod ready -> on_status
# ---------------------------------------------------------------------------------------------


def ready_latency(emu: Emulator, pods: int, timeout: float) -> dict[str, Any]:
    namespace = "latency"
    emu.create_namespace(namespace)
    tier = make_tier(emu, namespace)
    store_ready: dict[str, float] = {}  # pod -> when its Ready condition turned True in the store
    seen_pod: dict[str, float] = {}  # pod -> when on_status first showed it ready
    seen_count: dict[int, float] = {}  # k -> when on_status first showed ready >= k
    lock = threading.Lock()

    def on_store(etype: str, resource: str, obj: dict[str, Any]) -> None:  # under the store lock
        meta = obj.get("metadata") or {}
        if resource != "pods" or meta.get("namespace") != namespace or etype == "DELETED":
            return
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                store_ready.setdefault(meta["name"], time.monotonic())

    def on_status(status: ServiceStatus) -> None:
        now = time.monotonic()
        with lock:
            for k in range(1, status.ready + 1):
                seen_count.setdefault(k, now)
            for pod in status.pods:
                if pod.ready:
                    seen_pod.setdefault(pod.name, now)

    emu.store.subscribe(on_store)
    svc = tier.apply(tier.make_spec(BODY, name="latency", replicas=1, port=8000))
    sub = tier.watch(svc.record, on_status=on_status)
    try:
        for k in range(1, pods + 1):
            if k > 1:
                tier.scale(svc.record, k)
            deadline = time.monotonic() + timeout
            while len(seen_count) < k or len(store_ready) < k:
                if time.monotonic() > deadline:
                    raise SystemExit(f"ready latency: pod {k} not ready after {timeout:.0f} s")
                time.sleep(0.05)
            time.sleep(0.5)
    finally:
        emu.store.unsubscribe(on_store)
        tier.unwatch(sub)
        tier.close()
        drop_namespace(emu, namespace)
    order = sorted(store_ready, key=store_ready.get)
    by_count = [seen_count[k] - store_ready[name] for k, name in enumerate(order, 1)]
    by_pod = [seen_pod[name] - store_ready[name] for name in order if name in seen_pod]
    return {"by_count": by_count, "by_pod": by_pod}


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


STARTED = time.monotonic()


def note(text: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f} s] {text}", file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steady", type=float, default=60.0, help="seconds of steady state after the rollout")
    ap.add_argument("--counts", default="1,10", help="service counts")
    ap.add_argument("--replicas", type=int, default=2, help="replicas per service")
    ap.add_argument("--pods", type=int, default=10, help="pods for the ready -> on_status latency")
    ap.add_argument("--kubectl", default="auto", help="kubectl binary, 'auto' or 'python' (emulated)")
    ap.add_argument("--rollout-timeout", type=float, default=300.0)
    ap.add_argument("--create-delay", type=float, default=0.8,
                    help="seconds a new container spends in ContainerCreating (0.8: the golden record's "
                    "node, which had its images; a pull takes longer)")
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",")]

    emu = start_emulator(args.create_delay)
    cache_dir = WORK / "kubectl-cache"
    kubectl, version = find_kubectl(args.kubectl, emu, cache_dir)
    baseline = (f"kubectl {version} ({kubectl})" if kubectl else
                f"kubectl EMULATED with the Python client, request for request as the golden record's "
                f"kubectl 1.28 ({version})")
    note(f"emulator at {emu.url}; baseline: {baseline}")
    rows = []
    try:
        for n in counts:
            ours = run_window(emu, "ours", n, args, kubectl, cache_dir)
            base = run_window(emu, "kubectl", n, args, kubectl, cache_dir)
            rows.append((n, ours, base))
        latency = ready_latency(emu, args.pods, args.rollout_timeout)
    finally:
        emu.stop()
        shutil.rmtree(WORK, ignore_errors=True)

    print(f"\nAPI requests while following N services ({args.replicas} replicas each) through their "
          f"rollout plus {args.steady:.0f} s of steady state, counted at the API server")
    print(f"baseline per service: kubectl rollout status, then kubectl logs -f per pod; {baseline}")
    head = "{:>8} {:<18} {:>5} {:>6} {:>4} {:>5} {:>5} {:>9} {:>5} {:>7} {:>8} {:>12} {:>10}"
    print(head.format("services", "who", "list", "watch", "get", "logs", "disc", "other", "total",
                      "window", "req/min", "steady req", "base/ours"))
    for n, ours, base in rows:
        for res in (ours, base):
            t = res["total"]
            total = sum(t.values())
            per_min = total * 60.0 / res["window_s"]
            ratio = ""
            if res is base:
                mine = sum(ours["total"].values()) * 60.0 / ours["window_s"]
                ratio = f"{per_min / mine:.1f}x" if mine else "inf"
            print(head.format(n, res["who"], t["list"], t["watch"], t["get"], t["log streams"],
                              t["discovery"], t["other"], total, f"{res['window_s']:.0f} s",
                              f"{per_min:.1f}", sum(res["steady"].values()), ratio))
    print("(logs = follow streams of pod logs; window = end of apply -> steady state's end; the "
          "rollout's own time is in it; steady req = requests during the steady state alone)")
    for n, ours, base in rows:
        print(f"  {n:>2} services: rollout {ours['rollout_s']:.1f} s (ours), {base['rollout_s']:.1f} s "
              f"(baseline); log lines received {ours['lines']} (ours), {base['lines']} (baseline); "
              f"our client's own count {ours['client']}; log streams per container start "
              f"{ours['total']['log streams']}/{ours['starts']} (ours), "
              f"{base['total']['log streams']}/{base['starts']} (baseline)"
              + (f"; baseline rollouts that failed: {base['failed']}" if base["failed"] else ""))
    if len(rows) > 1:
        (n0, o0, b0), (n1, o1, b1) = rows[0], rows[-1]

        def tot(res: dict, *cols: str) -> int:
            return sum(n for col, n in res["total"].items() if not cols or col in cols)

        def grew(new: dict, old: dict, *cols: str) -> str:
            return f"x{tot(new, *cols) / max(1, tot(old, *cols)):.2f}"

        print(f"  {n1} services vs {n0}: ours {grew(o1, o0)} requests (list+watch "
              f"{grew(o1, o0, 'list', 'watch')}, log streams {grew(o1, o0, 'log streams')}), "
              f"baseline {grew(b1, b0)}")

    lat_c, lat_p = latency["by_count"], latency["by_pod"]
    print(f"\npod Ready=True in the API store -> on_status, over {len(lat_c)} pods (one service "
          f"scaled up a replica at a time; target < 1 s)")
    print(f"  ready count goes up (via the Deployment's readyReplicas): median "
          f"{statistics.median(lat_c) * 1e3:.0f} ms, max {max(lat_c) * 1e3:.0f} ms")
    print(f"  that pod shows ready (pod watch):                        median "
          f"{statistics.median(lat_p) * 1e3:.0f} ms, max {max(lat_p) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
