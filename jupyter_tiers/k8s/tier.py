"""K8sTier: services as Deployments + Services on Kubernetes, through the official client.

Objects come from the pure renderer (render.py) and are applied with server-side apply under one
field manager, so re-running a cell is idempotent (an unchanged cell writes nothing; a changed
body or env rolls the pods). Services are followed with the namespace's shared watches
(watch.py); logs of every pod are followed across restarts and replacements.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ..config.profiles import Profile
from ..config.registry import JobRecord, Registry, spec_for_record
from ..core.errors import ApiError, JobNotFound, SpecError, TiersError, Unsupported
from ..core.model import TRACKS, PodLogLine, ServeSpec, ServiceState, ServiceStatus, WorkKind
from ..core.reachability import stale_after
from ..data.checkpoint_upload import store_of
from ..data.sync import SyncError, notebook_manifest
from ..engine import tier as tier_module
from ..engine.handles import Service
from ..engine.subscription import Subscription
from ..engine.tier import ServeTier
from ..serving.podusage import not_served_line, pod_usage_rows
from ..serving.status import summary_line, track_pods, with_canary
from ..spec.servespec import canary_replicas
from ..transport.relay import relay
from . import canary_ops
from .canary import LIVE_CANARY, canary_name, canary_objects, split_pods
from .client import APPLY_CONTENT_TYPE, FIELD_MANAGER, KubeClient
from .fetch import add_model_fetch
from .parse import ingress_classes, ingress_endpoint, service_status
from .render import CONTAINER_NAME, body_hash, env_hash, render_manifests, render_yaml
from .rollback import code_key, plan_rollback
from .sync_render import size_refusal as sync_size_refusal
from .sync_render import with_synced_files
from .watch import NamespaceWatch, PodLogFollower, container_instance, split_timestamp, timestamp_key

BLUEGREEN_TIMEOUT = 900.0  # seconds a new color may take to become ready before the switch is dropped


class LaggingWatchGuard:
    """Passes a service's (or one Deployment's) statuses from the namespace's shared watch on to
    ``deliver``, except a DELETED that comes before the watch has shown the object once.

    The watch's cache may lag behind a create made a moment ago (the apply before a view opens,
    a blue-green switch's new colour) and then reports the object DELETED. Such a DELETED goes
    on only when ``confirm_gone``, a direct read run on a thread, returns the status to deliver;
    it returns None when the object is there (the watch's next status decides) and raises
    TiersError when it cannot tell (asked again every ``retry_s`` until the watch shows the
    object or the guard is cancelled). Statuses are delivered one at a time, in order."""

    def __init__(self, deliver: Callable[[ServiceStatus], None],
                 confirm_gone: Callable[[], ServiceStatus | None], *, name: str = "service",
                 retry_s: float = 5.0,
                 start: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.deliver = deliver
        self.confirm_gone = confirm_gone
        self.name = name
        self.retry_s = retry_s
        self._start = start or self._on_thread
        self._order = threading.RLock()
        self._cancelled = threading.Event()
        self.shown = False  # a status was delivered: a later DELETED is the watch's own word
        self._checking = False

    def __call__(self, status: ServiceStatus) -> None:
        with self._order:
            if status.state is ServiceState.DELETED and not self.shown:
                if not self._checking:
                    self._checking = True
                    self._start(self._check)
                return
            self.shown = True
            self.deliver(status)

    def cancel(self) -> None:
        """Stop asking (the listener has gone)."""
        self._cancelled.set()

    def _on_thread(self, fn: Callable[[], None]) -> None:
        threading.Thread(target=fn, name=f"jt-gone-{self.name}", daemon=True).start()

    def _check(self) -> None:
        while True:
            try:
                gone = self.confirm_gone()
            except TiersError:
                if not self.shown and not self._cancelled.wait(self.retry_s):
                    continue  # cannot tell now: ask again, unless the watch has shown it meanwhile
                gone = None
            with self._order:
                self._checking = False
                if gone is not None and not self.shown and not self._cancelled.is_set():
                    self.shown = True
                    self.deliver(gone)
            return


class K8sTier(ServeTier):
    """A Kubernetes namespace reached through a kubeconfig context (or in-cluster config)."""

    backend = "kubernetes"
    keeps_forwards = True

    def __init__(self, profile: Profile, registry: Registry | None = None,
                 client: KubeClient | None = None) -> None:
        super().__init__(profile, registry)
        source = profile.sources[-1] if profile.sources else "tiers.yaml"
        self.client = client or KubeClient(profile.settings, profile=profile.name, source=source)
        self._namespace_watch: NamespaceWatch | None = None
        self._forwards: list[_PortForward] = []
        self._subscriptions: set[_Subscription] = set()
        self._switches: dict[str, threading.Thread] = {}
        self._classes: tuple[float, dict[str, bool] | None] | None = None  # (read at, IngressClasses)

    # --- settings ------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        configured = self.profile.get("namespace")
        if configured:
            return str(configured)
        _ = self.client.api  # the kubeconfig context may name one
        return self.client.default_namespace

    def _manifests(self, spec: ServeSpec, color: str | None = None) -> list[dict[str, Any]]:
        notebook = dict(spec.metadata).get("notebook")
        objects = render_manifests(
            spec, namespace=self.namespace,
            service_type=self.profile.get("service_type", "ClusterIP"),
            image_pull_secrets=tuple(self.profile.get("image_pull_secrets", ())),
            model_volume=self.profile.get("model_volume"), color=color, notebook=notebook,
            env_key=_env_key(), ingress_class=self.profile.get("ingress_class"),
            ingress_annotations=self.profile.get("ingress_annotations"),
        )
        if spec.model_uri:  # --model-from through the object store: an init container fetches it
            objects = add_model_fetch(objects, spec.model_uri, store_of(self.profile),
                                      self.profile.get("fetch_image"))
        if spec.sync:  # the notebook's files in a D-sync Secret (k8s/sync_render.py)
            objects = _with_synced_files(spec, objects, self.profile)
        return objects

    def _objects_for(self, spec: ServeSpec, color: str | None) -> list[dict[str, Any]]:
        """What applying ``spec`` writes: the service's objects, or its canary's (--canary)."""
        objects = self._manifests(spec, color)
        if spec.canary is not None:
            objects = canary_objects(objects, spec.name, canary_replicas(spec.replicas, spec.canary))
        return objects

    def render(self, spec: ServeSpec) -> str:
        return render_yaml(self._objects_for(spec, "blue" if spec.strategy == "bluegreen" else None))

    # --- apply ---------------------------------------------------------------------------
    def _apply_object(self, obj: dict[str, Any], *, dry_run: bool = False) -> Any:
        """Server-side apply of one object under our field manager (force: the cell wins); with
        ``dry_run``, the API server's own dry run (``dryRun=All``): checked, stored nowhere.
        Returns the raw response (``.status`` 201 created, 200 updated; ``.data`` the object)."""
        kind, name, ns = obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"]
        fn = _patch_fn(self.client, kind)
        extra = {"dry_run": "All"} if dry_run else {}
        return self.client.call(
            fn, name, ns, obj, field_manager=FIELD_MANAGER, force=True,
            _content_type=APPLY_CONTENT_TYPE, _preload_content=False,
            verb="apply", resource=_resource(kind), namespace=ns, **extra)

    def dry_run_server(self, spec: ServeSpec) -> str:
        """``--dry-run=server``: every object goes to the API server's dry run (schema
        validation, admission, defaulting) and nothing is created or changed. Returns one line
        per object, as kubectl prints them, then a closing line (never an object's content: the
        server answers a Secret with its values); a refusal raises the usual one-line ApiError."""
        color, _ = self._color_for(spec)
        objects = self._objects_for(spec, color)
        lines = []
        for obj in objects:
            resp = self._apply_object(obj, dry_run=True)
            verb = "created" if getattr(resp, "status", 200) == 201 else "configured"
            lines.append(f"{_resource(obj['kind'])}/{obj['metadata']['name']} {verb} (server dry run)")
        lines.append(f"the API server accepted all {len(objects)} objects in namespace {self.namespace}; "
                     "nothing was created or changed (--dry-run=server)")
        return "\n".join(lines) + "\n"

    def _applied_spec(self, spec: ServeSpec) -> dict[str, Any]:
        """What the registry keeps of an applied cell; a changed synced module changes it too."""
        stored = _spec_for_record(spec)
        if spec.sync:  # a changed module is a changed cell (blue-green then switches colour)
            stored["sync_sha"] = notebook_manifest(spec.sync, self.profile.settings)[0].digest()
        return stored

    def _color_for(self, spec: ServeSpec) -> tuple[str | None, bool]:
        """Blue-green: (the color to apply, whether the Service switches to it once ready)."""
        if spec.strategy != "bluegreen":
            return None, False
        existing = self.registry.find_by_name(self.name, spec.name)
        live = self._live_color(spec.name)
        if live is None:
            return "blue", False
        same = existing is not None and existing.spec.get("color") == live
        if same and existing is not None and self._same_pods(spec, existing, live):
            return live, False  # the pods stay as they are: replicas, Service or Ingress change in place
        return ("green" if live == "blue" else "blue"), True

    def _same_pods(self, spec: ServeSpec, existing: JobRecord, live: str) -> bool:
        """Whether ``spec`` applied to the ``live`` colour leaves its pods as they are: the same
        pod template (code, env and their hashes, image, resources, volumes) and the same synced
        files. A change elsewhere (replicas, autoscale, Service type, Ingress) needs no new colour."""
        applied = self._applied_spec(spec)
        if applied.get("sync_sha") != existing.spec.get("applied_spec", {}).get("sync_sha"):
            return False
        try:
            before = [o for o in yaml.safe_load_all(existing.script or "") if isinstance(o, dict)]
        except yaml.YAMLError:
            return False
        old = next((o for o in before if o.get("kind") == "Deployment"), None)
        new = next(o for o in self._manifests(spec, live) if o["kind"] == "Deployment")
        # Through JSON: the stored YAML has lists where the rendered objects may have tuples.
        return old is not None and json.loads(json.dumps(new["spec"]["template"])) == old["spec"]["template"]

    def apply(self, spec: ServeSpec) -> Service:
        """Create or update the service; returns its handle at once (the rollout goes on).
        With ``spec.canary``, the cell runs as a canary beside the live revision (canary_ops)."""
        existing = self.registry.find_by_name(self.name, spec.name)
        stored = self._applied_spec(spec)
        if spec.canary is not None:
            return canary_ops.apply_canary(self, spec, stored)
        # blue-green: the Service moves to the new colour once it is ready (switching)
        color, switching = self._color_for(spec)
        objects = self._manifests(spec, color)
        by_kind = {o["kind"]: o for o in objects}
        for obj in objects:
            if obj["kind"] == "Service" and switching:
                continue  # switched only once the new colour is ready
            self._apply_object(obj)
        if "HorizontalPodAutoscaler" not in by_kind:
            self._delete_quietly("HorizontalPodAutoscaler", spec.name)
        if "Ingress" not in by_kind and existing is not None and existing.spec.get("ingress"):
            self._delete_quietly("Ingress", spec.name)  # it stopped using --ingress
        deployment = by_kind["Deployment"]["metadata"]["name"]
        if color is None:  # what a later rollback to this revision needs that its template lacks
            template = by_kind["Deployment"]["spec"]["template"]
            with contextlib.suppress(OSError):
                _save_code(self.name, self.namespace, spec.name, code_key(template),
                           [o for o in objects if _is_code(o)])
        if not spec.sync and existing is not None and existing.spec.get("sync"):
            self._delete_quietly("Secret", f"{deployment}-sync")  # it stopped using --sync
            self._delete_quietly("ConfigMap", f"{deployment}-sync")  # as versions before 26 made it
        if existing is not None and existing.spec.get(LIVE_CANARY):
            # The cell run without --canary is the whole service again: the canary goes.
            canary_ops.remove_canary(self, spec.name, self.namespace)
        record = JobRecord(
            profile=self.name, tier=self.backend, job_id=spec.name, name=spec.name, kind=WorkKind.SERVICE,
            state=ServiceState.DEPLOYING.value,
            # A deleted and re-created service is a new one: it shows its own start time.
            submitted_at=(existing.submitted_at if existing and existing.state != ServiceState.DELETED.value
                          else time.time()),
            spec={**stored, "namespace": self.namespace, "deployment": deployment,
                  "color": color, "applied_spec": stored},
            script=render_yaml(objects), nodelist=self._endpoint_for(spec.name, spec.port),
        )
        self.registry.add(record)
        if switching and color is not None:
            self._switch_later(record, by_kind["Service"], color)
        return Service(self, record)

    def _live_color(self, name: str) -> str | None:
        """The color the Service currently selects (blue-green), if the Service exists."""
        try:
            svc = self.client.call(self.client.core().read_namespaced_service, name, self.namespace,
                                   _preload_content=False, verb="get", resource="services",
                                   namespace=self.namespace)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        selector = json.loads(svc.data).get("spec", {}).get("selector") or {}
        color = selector.get("jupyter-tiers/color")
        return str(color) if color else None

    def _switch_later(self, record: JobRecord, service_obj: dict[str, Any], color: str) -> None:
        """Blue-green: point the Service at ``color`` once its Deployment is ready, then remove
        the other color's objects. If it never gets ready, the old color keeps serving."""
        name = record.name
        old = "green" if color == "blue" else "blue"

        def switch() -> None:
            status = self._wait_deployment(record, f"{name}-{color}")
            if status is None or status.state is not ServiceState.READY:
                return
            self._apply_object(service_obj)
            for kind, suffix in (("Deployment", ""), ("ConfigMap", "-code"), ("Secret", "-env"),
                                 ("Secret", "-sync"), ("ConfigMap", "-sync")):
                self._delete_quietly(kind, f"{name}-{old}{suffix}")

        thread = threading.Thread(target=switch, name=f"jt-bluegreen-{name}", daemon=True)
        self._switches[name] = thread
        thread.start()

    def _wait_deployment(self, record: JobRecord, deployment: str) -> ServiceStatus | None:
        """Block until ``deployment``, just created, is settled (ready, failed or gone) and
        return its last status (None if none came in BLUEGREEN_TIMEOUT)."""
        done = threading.Event()
        last: list[ServiceStatus] = []

        def settle(status: ServiceStatus) -> None:
            last[:] = [status]
            if status.state.settled:
                done.set()

        def confirm_gone() -> ServiceStatus | None:
            if canary_ops.read_object(self, "Deployment", deployment, self.namespace) is not None:
                return None
            return ServiceStatus(record.name, ServiceState.DELETED, reason=f"{deployment} was deleted")

        guard = LaggingWatchGuard(settle, confirm_gone, name=deployment)
        nsw = self._watch_of_namespace()
        token = nsw.subscribe(record.name, self._status_fn(record, deployment), guard)
        try:
            done.wait(BLUEGREEN_TIMEOUT)
        finally:
            guard.cancel()
            nsw.unsubscribe(token)
        return last[0] if last else None

    def wait_switched(self, name: str, timeout: float | None = None) -> bool:
        """Block until a pending blue-green switch of ``name`` has finished (tests, scripts);
        False when it is still pending after ``timeout`` seconds."""
        thread = self._switches.get(name)
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    # --- status --------------------------------------------------------------------------
    def _endpoint_for(self, name: str, port: int | None) -> str:
        return f"http://{name}.{self.namespace}.svc:{port or 80}"

    def endpoint(self, record: JobRecord) -> str | None:
        return record.nodelist or self._endpoint_for(record.name, record.spec.get("port"))

    def _deployment_name(self, record: JobRecord) -> str:
        current = self.registry.find_by_name(self.name, record.name)
        spec = (current or record).spec
        return str(spec.get("deployment") or record.name)

    def _ingress_classes(self) -> dict[str, bool] | None:
        """The cluster's IngressClasses ({name: default}), read at most once a minute; None when
        they cannot be read (a cluster-scoped list, which a namespaced user may not do)."""
        cached = self._classes
        if cached is not None and time.monotonic() - cached[0] < 60:
            return cached[1]
        try:
            resp = self.client.call(self.client.networking().list_ingress_class, _preload_content=False,
                                    verb="list", resource="ingressclasses")
            classes: dict[str, bool] | None = ingress_classes(json.loads(resp.data).get("items") or [])
        except (TiersError, ValueError):
            classes = None
        self._classes = (time.monotonic(), classes)
        return classes

    def _ingress_text(self, ingress: dict[str, Any] | None) -> str:
        return ingress_endpoint(ingress, self._ingress_classes(),
                                ingress_class=self.profile.get("ingress_class"))

    def _status_fn(self, record: JobRecord, deployment: str | None = None
                   ) -> Callable[[NamespaceWatch], ServiceStatus]:
        endpoint = self.endpoint(record)
        routed = bool(record.spec.get("ingress"))
        if routed:
            self._watch_of_namespace().watch_ingresses()
            self._ingress_classes()  # read now, not while a status is computed under the watch's lock

        def compute(nsw: NamespaceWatch) -> ServiceStatus:
            shown = endpoint
            if routed:
                found = nsw.ingresses(record.name)
                cached = self._classes[1] if self._classes else None
                shown = ingress_endpoint(found[0] if found else None, cached,
                                         ingress_class=self.profile.get("ingress_class"))
            current = self.registry.find_by_name(self.name, record.name) or record
            wanted = deployment or str(current.spec.get("deployment") or record.name)
            all_deps = nsw.deployments(record.name)
            deps = [d for d in all_deps if d["metadata"]["name"] == wanted]
            pods = nsw.pods(record.name)
            if deployment is not None or record.spec.get("color"):
                color = wanted.rsplit("-", 1)[-1]
                pods = [p for p in pods
                        if (p["metadata"].get("labels") or {}).get("jupyter-tiers/color") == color]
                return service_status(record.name, deps[0] if deps else None, pods, nsw.events(),
                                      endpoint=shown, now=time.time())
            return self._with_canary(current, deps[0] if deps else None, all_deps, pods, nsw.events(),
                                     shown)

        return compute

    def pod_usage(self, record: JobRecord) -> list[dict[str, Any]]:
        """The service's pods' CPU and memory from metrics.k8s.io (one request); Unsupported with
        one line when the cluster does not serve it (no metrics-server) or may not be read."""
        ns = record.spec.get("namespace") or self.namespace
        selector = f"app.kubernetes.io/name={record.name},app.kubernetes.io/managed-by=jupyter-tiers"
        try:
            resp = self.client.call(self.client.custom().list_namespaced_custom_object, "metrics.k8s.io",
                                    "v1beta1", ns, "pods", label_selector=selector,
                                    _preload_content=False, verb="list", resource="pods.metrics.k8s.io",
                                    namespace=ns)
        except ApiError as exc:
            if exc.status in (403, 404, 503):
                raise Unsupported(not_served_line(ns, exc.status)) from None
            raise
        try:
            doc = json.loads(resp.data)
        except ValueError:
            doc = None
        return pod_usage_rows(doc)

    def service_status(self, record: JobRecord) -> ServiceStatus:
        """Read the Deployment, its pods and Events now (three requests) and record the state."""
        ns = record.spec.get("namespace") or self.namespace
        selector = f"app.kubernetes.io/name={record.name},app.kubernetes.io/managed-by=jupyter-tiers"
        deployment = None
        try:
            resp = self.client.call(self.client.apps().read_namespaced_deployment,
                                    self._deployment_name(record), ns, _preload_content=False,
                                    verb="get", resource="deployments", namespace=ns)
            deployment = json.loads(resp.data)
        except ApiError as exc:
            if exc.status != 404:
                raise
        pods = json.loads(self.client.call(
            self.client.core().list_namespaced_pod, ns, label_selector=selector, _preload_content=False,
            verb="list", resource="pods", namespace=ns).data).get("items") or []
        events = json.loads(self.client.call(
            self.client.core().list_namespaced_event, ns, _preload_content=False,
            verb="list", resource="events", namespace=ns).data).get("items") or []
        endpoint = self.endpoint(record)
        if record.spec.get("ingress"):
            endpoint = self._ingress_text(self._read_ingress(record.name, ns))
        if record.spec.get("color") and deployment is not None:
            color = deployment["metadata"]["name"].rsplit("-", 1)[-1]
            pods = [p for p in pods
                    if (p["metadata"].get("labels") or {}).get("jupyter-tiers/color") == color]
            status = service_status(record.name, deployment, pods, events, endpoint=endpoint, now=time.time())
        else:
            current = self.registry.find_by_name(self.name, record.name) or record
            canary_dep = None
            if current.spec.get(LIVE_CANARY):
                canary_dep = canary_ops.read_object(self, "Deployment", canary_name(record.name), ns)
            status = self._with_canary(current, deployment, [canary_dep] if canary_dep else [], pods,
                                       events, endpoint)
        self._record(record, status)
        return status

    def _with_canary(self, current: JobRecord, deployment: dict[str, Any] | None,
                     deployments: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]],
                     events: Sequence[dict[str, Any]], endpoint: str | None) -> ServiceStatus:
        """The stable revision's status, with the canary's beside it while one runs."""
        stable_pods, canary_pods = split_pods(pods)
        now = time.time()
        status = service_status(current.name, deployment, stable_pods, events, endpoint=endpoint, now=now)
        canary = current.spec.get(LIVE_CANARY)
        if not canary:
            return status
        found = [d for d in deployments if d["metadata"]["name"] == canary_name(current.name)]
        of_canary = service_status(current.name, found[0] if found else None, canary_pods, events,
                                   endpoint=None, now=now)
        return with_canary(status, int(canary["percent"]), of_canary)

    def _read_ingress(self, name: str, ns: str) -> dict[str, Any] | None:
        try:
            resp = self.client.call(self.client.networking().read_namespaced_ingress, name, ns,
                                    _preload_content=False, verb="get", resource="ingresses", namespace=ns)
        except ApiError as exc:
            if exc.status in (403, 404):  # not there, or not ours to read: shown as not seen yet
                return None
            raise
        data = json.loads(resp.data)
        return data if isinstance(data, dict) else None

    def _record(self, record: JobRecord, status: ServiceStatus) -> None:
        with contextlib.suppress(Exception):  # the registry is a record, not the source of truth
            detail = f"{status.ready}/{status.desired}"
            if status.canary is not None:
                detail += f" + canary {status.canary.ready}/{status.canary.desired}"
            self.registry.update(record.key, state=status.state.value, detail=detail)

    def summary(self, record: JobRecord, status: ServiceStatus) -> str:
        elapsed = time.time() - record.submitted_at
        last = None
        if status.state is ServiceState.FAILED:
            with contextlib.suppress(TiersError):
                lines = self.service_logs(record, tail=1).strip().splitlines()
                last = lines[-1].split(": ", 1)[-1] if lines else None
        return summary_line(status, elapsed_s=elapsed, last_log_line=last)

    # --- logs ----------------------------------------------------------------------------
    def _pod_names(self, record: JobRecord) -> list[str]:
        ns = record.spec.get("namespace") or self.namespace
        selector = f"app.kubernetes.io/name={record.name},app.kubernetes.io/managed-by=jupyter-tiers"
        items = json.loads(self.client.call(
            self.client.core().list_namespaced_pod, ns, label_selector=selector, _preload_content=False,
            verb="list", resource="pods", namespace=ns).data).get("items") or []
        return sorted(p["metadata"]["name"] for p in items)

    def service_logs(self, record: JobRecord, pod: str | None = None, tail: int | None = None) -> str:
        ns = record.spec.get("namespace") or self.namespace
        pods = [pod] if pod else self._pod_names(record)
        if pod is not None and pod not in self._pod_names(record):
            raise JobNotFound(f"service {record.name} has no pod {pod!r}")
        # Bounded: each pod's last lines (tailLines) within its share of the bytes (limitBytes).
        budget = max(64 << 10, tier_module.MAX_SERVICE_LOG_BYTES // max(1, len(pods)))
        want = tail if tail is not None else tier_module.MAX_SERVICE_LOG_LINES
        lines: list[tuple[tuple[str, int], str, str]] = []
        cut = False
        for name in pods:
            got = self._pod_log_tail(name, ns, want, budget, tail is None)
            if got is None:
                continue
            data, pod_cut = got
            cut = cut or pod_cut
            for raw in data.decode("utf-8", errors="replace").splitlines():
                ts, text = split_timestamp(raw)
                lines.append((timestamp_key(ts), name, text))
        lines.sort(key=lambda x: x[0])
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        head = ""
        if cut and (tail is None or len(lines) < tail):
            head = tier_module.cut_marker(f"at most the last {want} lines and {budget / (1 << 20):g} MiB "
                                          "of each pod's log are shown") + "\n"
        if pod is not None:
            return head + "".join(text + "\n" for _, _, text in lines)
        return head + "".join(f"{name}: {text}\n" for _, name, text in lines)

    def _pod_log_tail(self, name: str, ns: str, want: int, budget: int, bounded: bool
                      ) -> tuple[bytes, bool] | None:
        """The end of one pod's log: its last ``want`` lines (``tailLines``) in at most
        ``budget`` bytes (``limitBytes``). ``limitBytes`` keeps the *start* of what it limits, so
        a window too large for it is asked again with fewer lines, until the newest lines fit.
        Returns the bytes and whether earlier output was left out (``bounded``: ``want`` is the
        reader's bound, not a ``tail`` asked for); None when the pod has no log yet."""
        lines = max(0, want)
        for _ in range(8):
            try:
                resp = self.client.call(self.client.core().read_namespaced_pod_log, name, ns,
                                        verb="get", resource="pods/log", namespace=ns, timestamps=True,
                                        tail_lines=lines, limit_bytes=budget, _preload_content=False,
                                        # a --patch may add a sidecar, and then the API wants a name
                                        container=CONTAINER_NAME)
            except ApiError as exc:
                if exc.status in (400, 404):  # waiting to start, or gone: no log yet
                    return None
                raise
            data = bytes(resp.data)
            if len(data) < budget:
                full = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
                return data, lines < want or (bounded and full >= lines)
            if lines <= 1:
                break
            # The window did not fit: ask again for about as many lines as did fit.
            lines = max(1, min(lines - 1, data.count(b"\n") * 3 // 4))
        return data[: data.rfind(b"\n") + 1] if b"\n" in data else data, True

    # --- actions -------------------------------------------------------------------------
    def scale(self, record: JobRecord, replicas: int) -> None:
        if replicas < 0 or replicas > 1000:
            raise SpecError("replicas", f"must be 0-1000, got {replicas}")
        ns = record.spec.get("namespace") or self.namespace
        with self._gone_is_not_found(record, ns):
            self._scale_deployment(self._deployment_name(record), ns, replicas)

    @contextlib.contextmanager
    def _gone_is_not_found(self, record: JobRecord, ns: str) -> Iterator[None]:
        """A 404 for the service's Deployment is :class:`JobNotFound` naming the service, as a
        local service that is not running is (not the API's words about a resource)."""
        try:
            yield
        except ApiError as exc:
            if exc.status != 404:
                raise
            raise JobNotFound(f"service {record.name} is not running in namespace {ns} (deleted?)") from None

    def _scale_deployment(self, name: str, ns: str, replicas: int) -> None:
        """Set one Deployment's replicas through its scale subresource (also a canary's split)."""
        self.client.call(self.client.apps().patch_namespaced_deployment_scale, name, ns,
                         {"spec": {"replicas": replicas}}, verb="patch", resource="deployments/scale",
                         namespace=ns)

    def promote(self, record: JobRecord) -> str:
        return canary_ops.promote(self, record)

    def restart(self, record: JobRecord) -> None:
        ns = record.spec.get("namespace") or self.namespace
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": stamp}}}}}
        with self._gone_is_not_found(record, ns):
            self.client.call(self.client.apps().patch_namespaced_deployment, self._deployment_name(record),
                             ns, body, field_manager=f"{FIELD_MANAGER}-restart",
                             verb="patch", resource="deployments", namespace=ns)

    def rollback(self, record: JobRecord, revision: int | None = None) -> str:
        """Roll a rolling service back to ``revision`` of its Deployment's history (default: the
        one before the current), as ``kubectl rollout undo`` does, with that revision's cell
        body (kept on this machine when it was applied). Returns a one-line message; refuses
        blue-green (its old colour is gone once switched), a revision not kept, and one whose env
        values differ from the current ones (rollback.py). While a canary runs (``--canary``),
        rolling back removes the canary instead (canary_ops)."""
        record = self.registry.find_by_name(self.name, record.name) or record  # the newest cell's
        if record.spec.get(LIVE_CANARY):
            if revision is not None:
                raise TiersError(f"service {record.name} runs a canary: roll the canary back first "
                                 "(rollback without --to) or promote it, then roll back to a revision")
            return canary_ops.rollback_canary(self, record)
        ns = record.spec.get("namespace") or self.namespace
        if record.spec.get("color") or record.spec.get("strategy") == "bluegreen":
            raise Unsupported(f"service {record.name} is blue-green: its previous colour is removed once "
                              "the switch is done, so there is no history to roll back to; run the "
                              "earlier cell again")
        name = self._deployment_name(record)
        deployment = json.loads(self.client.call(
            self.client.apps().read_namespaced_deployment, name, ns, _preload_content=False,
            verb="get", resource="deployments", namespace=ns).data)
        selector = f"app.kubernetes.io/name={record.name},app.kubernetes.io/managed-by=jupyter-tiers"
        replicasets = json.loads(self.client.call(
            self.client.apps().list_namespaced_replica_set, ns, label_selector=selector,
            _preload_content=False, verb="list", resource="replicasets", namespace=ns).data)
        replicasets = replicasets.get("items") or []
        plan = plan_rollback(record.name, deployment, replicasets, revision)
        if plan.revision == plan.current:
            return f"service {record.name} is at revision {plan.current} already; nothing changed"
        if plan.code_changes:
            stored = _load_code(self.name, ns, record.name, plan.code_key)
            if stored is None:
                raise TiersError(f"service {record.name}: revision {plan.revision}'s cell body is not kept "
                                 "on this machine (it was applied from another one); run that cell again")
            for obj in stored:
                self._apply_object(obj)
        self.client.call(self.client.apps().patch_namespaced_deployment, name, ns,
                         [{"op": "replace", "path": "/spec/template", "value": plan.template}],
                         field_manager=f"{FIELD_MANAGER}-rollback",
                         _content_type="application/json-patch+json",
                         verb="patch", resource="deployments", namespace=ns)
        return (f"service {record.name} rolling back to revision {plan.revision} (it becomes revision "
                f"{max(plan.current, plan.revision) + 1}); running the cell again rolls forward")

    def _delete_quietly(self, kind: str, name: str, namespace: str | None = None) -> bool:
        ns = namespace or self.namespace
        fn = _delete_fn(self.client, kind)
        try:
            self.client.call(fn, name, ns, verb="delete", resource=_resource(kind), namespace=ns)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def delete(self, record: JobRecord) -> None:
        """Delete every object of the service by its labels (both colors, Secret, ConfigMap, HPA,
        Ingress)."""
        ns = record.spec.get("namespace") or self.namespace
        selector = f"app.kubernetes.io/name={record.name},app.kubernetes.io/managed-by=jupyter-tiers"
        listers: dict[str, Callable[..., Any]] = {}
        current = self.registry.find_by_name(self.name, record.name)  # a later cell may have added one
        if record.spec.get("ingress") or (current is not None and current.spec.get("ingress")):
            # First: stop routing to the service before it goes.
            listers["Ingress"] = self.client.networking().list_namespaced_ingress
        listers |= {
            "HorizontalPodAutoscaler": self.client.autoscaling().list_namespaced_horizontal_pod_autoscaler,
            "Service": self.client.core().list_namespaced_service,
            "Deployment": self.client.apps().list_namespaced_deployment,
            "ConfigMap": self.client.core().list_namespaced_config_map,
            "Secret": self.client.core().list_namespaced_secret,
        }
        for kind, lister in listers.items():
            items = json.loads(self.client.call(lister, ns, label_selector=selector, _preload_content=False,
                                                verb="list", resource=_resource(kind), namespace=ns
                                                ).data).get("items") or []
            for item in items:
                self._delete_quietly(kind, item["metadata"]["name"], ns)
        with contextlib.suppress(Exception):
            self.registry.update(record.key, state=ServiceState.DELETED.value, detail="0/0")

    def port_forward(self, record: JobRecord, local_port: int = 0, track: str | None = None) -> str:
        if isinstance(local_port, bool) or not isinstance(local_port, int) or not 0 <= local_port <= 65535:
            raise SpecError("local_port", f"a port from 1 to 65535 (0: any free one), got {local_port!r}")
        status = self.service_status(record)
        # A pod being replaced may still say ready; forward to one that is staying.
        ready = track_pods(status, track)
        if not ready:
            of = f" of the {track} track" if track in TRACKS and status.canary is not None else ""
            raise TiersError(f"service {record.name}: no ready pod{of} to forward to")
        port = int(record.spec.get("port") or 8000)
        try:
            forward = _PortForward(self.client, record.spec.get("namespace") or self.namespace,
                                   ready[0].name, port, local_port)
        except OSError as exc:
            raise TiersError(f"cannot listen on 127.0.0.1:{local_port}: {exc.strerror or exc}") from None
        self._forwards.append(forward)
        return forward.url

    def load_targets(self, record: JobRecord, track: str | None = None
                     ) -> tuple[list[str], list[str | None], str]:
        """One forward per ready pod (as the Service would spread the load, evenly) of
        ``track`` (None: both while a canary runs): a load test measures every pod ready at
        its start, and says so."""
        status = self.service_status(record)
        ready = sorted(p.name for p in track_pods(status, track))
        if not ready:
            raise TiersError(f"service {record.name}: no ready pod to send load to")
        port = int(record.spec.get("port") or 8000)
        namespace = record.spec.get("namespace") or self.namespace
        opened: list[_PortForward] = []
        try:
            for pod in ready:
                opened.append(_PortForward(self.client, namespace, pod, port, 0))
        except OSError as exc:
            for forward in opened:
                forward.close()
            raise TiersError(f"cannot listen on 127.0.0.1: {exc.strerror or exc}") from None
        with self._lock:
            self._forwards.extend(opened)
        names = ", ".join(ready)
        note = (f"every ready pod measured ({len(ready)}: {names}), one forward each, request i to "
                f"pod i mod {len(ready)}; pods that became ready later got none")
        if len(ready) == 1:
            note = f"one pod measured: {names}, the only ready one at the start"
        return [f.url for f in opened], [f.pod for f in opened], note

    def close_load_targets(self, urls: Sequence[str]) -> None:
        with self._lock:
            closing = [f for f in self._forwards if f.url in set(urls)]
            self._forwards = [f for f in self._forwards if f not in closing]
        for forward in closing:
            forward.close()

    def forwarded_pod(self, url: str) -> str | None:
        """The pod an open port-forward of this tier relays to (None if it is not one)."""
        url = url.rstrip("/")
        return next((f.pod for f in list(self._forwards) if f.url == url), None)

    # --- watching ------------------------------------------------------------------------
    def _watch_of_namespace(self) -> NamespaceWatch:
        with self._lock:
            if self._namespace_watch is None:
                self._namespace_watch = NamespaceWatch(self.client, self.namespace,
                                                       stale_after=stale_after(self.profile.settings))
            return self._namespace_watch

    def watch(self, record: JobRecord, *, on_status: Callable[[ServiceStatus], None] | None = None,
              on_lines: Callable[[list[PodLogLine]], None] | None = None) -> Subscription[ServiceStatus]:
        """Through the namespace's shared watches (one list+watch per kind, whoever listens)."""
        nsw = self._watch_of_namespace()
        sub = _Subscription(self, record, nsw, on_status)
        with self._lock:
            self._subscriptions.add(sub)

        def status_changed(status: ServiceStatus) -> None:
            # Not while the API is unreachable: the registry keeps the last state it said.
            if status.state.value != sub.recorded and status.api_reachable:
                sub.recorded = status.state.value
                self._record(record, status)
            sub.deliver(status)

        def confirm_gone() -> ServiceStatus | None:
            fresh = self.service_status(record)  # a direct read, which records what it found
            if fresh.state is not ServiceState.DELETED:
                return None
            sub.recorded = fresh.state.value
            return fresh

        # A view opened right after an apply: the watch may not have seen the new Deployment yet.
        sub.guard = LaggingWatchGuard(status_changed, confirm_gone, name=record.name)

        if on_lines is not None:
            sub.logs = _ServiceLogs(self.client, nsw.namespace, record.name, on_lines)
            sub.listener = nsw.add_listener(sub.logs.on_event)
        sub.token = nsw.subscribe(record.name, self._status_fn(record), sub.guard)
        if sub.logs is not None:
            sub.logs.sync(nsw.pods(record.name))
        return sub

    def _forget(self, subscription: _Subscription) -> None:
        """The tier's half of closing a subscription: its watch tokens and log followers."""
        with self._lock:
            self._subscriptions.discard(subscription)
        if subscription.guard is not None:
            subscription.guard.cancel()
        for token in (subscription.token, subscription.listener):
            if token is not None:
                subscription.nsw.unsubscribe(token)
        if subscription.logs is not None:
            subscription.logs.stop()

    @property
    def api_requests(self) -> int:
        """Requests made so far: direct calls plus the shared watches' lists and watches."""
        return self.client.requests

    def close(self) -> None:
        """Stop the watches, every subscription's log followers and the port-forwards. A later
        ``watch`` starts afresh."""
        with self._lock:
            nsw, self._namespace_watch = self._namespace_watch, None
            subscriptions = list(self._subscriptions)
            self._subscriptions.clear()
            forwards, self._forwards = self._forwards, []
        for sub in subscriptions:
            if sub.logs is not None:
                sub.logs.stop()
        if nsw is not None:
            nsw.stop()
        for forward in forwards:
            forward.close()


class _Subscription(Subscription[ServiceStatus]):
    """One listener on one service: its token on the namespace watch, and its pods' log
    followers when it wants lines."""

    def __init__(self, tier: K8sTier, record: JobRecord, nsw: NamespaceWatch,
                 on_status: Callable[[ServiceStatus], None] | None) -> None:
        super().__init__(record, on_status)
        self.tier = tier
        self.nsw = nsw
        self.token: int | None = None
        self.listener: int | None = None
        self.logs: _ServiceLogs | None = None
        self.recorded = ""
        self.guard: LaggingWatchGuard | None = None

    def _detach(self) -> None:
        self.tier._forget(self)


class _ServiceLogs:
    """One PodLogFollower per pod of a service: started when a pod appears, drained when it
    goes. Each follower is told the server container's state by the pod watch, so it opens a
    stream only once the container has started and reopens only after a restart (or a dropped
    stream): one log request per container start."""

    def __init__(self, client: KubeClient, namespace: str, service: str,
                 on_lines: Callable[[list[PodLogLine]], None]) -> None:
        self.client = client
        self.namespace = namespace
        self.service = service
        self.on_lines = on_lines
        self.followers: dict[str, PodLogFollower] = {}
        self._draining: list[PodLogFollower] = []
        self._lock = threading.Lock()
        self._stopped = False

    def sync(self, pods: Sequence[dict[str, Any]]) -> None:
        for pod in pods:
            self.on_event("pods", "ADDED", pod)

    def on_event(self, kind: str, etype: str, obj: dict[str, Any]) -> None:
        if kind != "pods" or not obj:
            return
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get("app.kubernetes.io/name") != self.service:
            return
        name = meta["name"]
        with self._lock:
            if self._stopped:
                return
            follower = self.followers.get(name)
            if etype == "DELETED":
                if follower is not None:
                    # Let it drain: the stream ends by itself once the container has stopped.
                    self.followers.pop(name)
                    follower.drain()
                    self._draining = [f for f in self._draining if f.alive] + [follower]
                return
            instance = container_instance(obj, CONTAINER_NAME)
            if follower is None:
                follower = PodLogFollower(self.client, self.namespace, name, self.on_lines,
                                          container=CONTAINER_NAME)
                follower.update(instance)
                self.followers[name] = follower
                follower.start()
            else:
                follower.update(instance)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            followers = list(self.followers.values()) + self._draining
            self.followers.clear()
            self._draining = []
        for follower in followers:
            follower.stop()


class _PortForward:
    """A local listening port relayed to a pod's port through the API (one WebSocket per
    connection, as the client requires)."""

    def __init__(self, client: KubeClient, namespace: str, pod: str, port: int, local_port: int) -> None:
        self.client = client
        self.namespace = namespace
        self.pod = pod
        self.port = port
        self._server = socket.create_server(("127.0.0.1", local_port))
        self.local_port = self._server.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name=f"jt-portforward-{pod}", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        from kubernetes import client as k8s  # lazy: the kubernetes client is heavy
        from kubernetes.stream import portforward  # lazy: the kubernetes client is heavy

        # kubernetes.stream swaps the ApiClient's call_api for a websocket one while it opens
        # the stream: on the shared client, another thread's plain request made meanwhile went
        # down the websocket ("Missing required parameter `ports`"). Each forward gets its own.
        api: Any = k8s.ApiClient(self.client.api.configuration)
        try:
            pf: Any = portforward(k8s.CoreV1Api(api).connect_get_namespaced_pod_portforward, self.pod,
                             self.namespace, ports=str(self.port))
            remote = pf.socket(self.port)
            remote.setblocking(True)
        except Exception:
            conn.close()
            with contextlib.suppress(Exception):
                api.close()
            return
        relay(conn, remote, join_timeout=60)
        with contextlib.suppress(Exception):
            pf.close()
        with contextlib.suppress(Exception):
            api.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):  # wakes the accept() of the other thread (close alone does not)
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()


# --- helpers -------------------------------------------------------------------------------------

_RESOURCES = {"Deployment": "deployments", "Service": "services", "ConfigMap": "configmaps",
              "Secret": "secrets", "HorizontalPodAutoscaler": "horizontalpodautoscalers",
              "Ingress": "ingresses"}


def _resource(kind: str) -> str:
    return _RESOURCES.get(kind, kind.lower() + "s")


def _patch_fn(client: KubeClient, kind: str) -> Callable[..., Any]:
    fns: dict[str, Callable[..., Any]] = {
        "Deployment": client.apps().patch_namespaced_deployment,
        "Service": client.core().patch_namespaced_service,
        "ConfigMap": client.core().patch_namespaced_config_map,
        "Secret": client.core().patch_namespaced_secret,
        "HorizontalPodAutoscaler": client.autoscaling().patch_namespaced_horizontal_pod_autoscaler,
        "Ingress": client.networking().patch_namespaced_ingress,
    }
    if kind not in fns:
        raise SpecError("patch", f"cannot apply a {kind}")
    return fns[kind]


def _delete_fn(client: KubeClient, kind: str) -> Callable[..., Any]:
    fns: dict[str, Callable[..., Any]] = {
        "Deployment": client.apps().delete_namespaced_deployment,
        "Service": client.core().delete_namespaced_service,
        "ConfigMap": client.core().delete_namespaced_config_map,
        "Secret": client.core().delete_namespaced_secret,
        "HorizontalPodAutoscaler": client.autoscaling().delete_namespaced_horizontal_pod_autoscaler,
        "Ingress": client.networking().delete_namespaced_ingress,
    }
    return fns[kind]


def _with_synced_files(spec: ServeSpec, objects: list[dict[str, Any]], profile: Profile
                       ) -> list[dict[str, Any]]:
    manifest, sources = notebook_manifest(spec.sync, profile.settings)
    refusal = sync_size_refusal([(e.path, e.size) for e in manifest.entries])
    if refusal:  # from the sizes alone: nothing is read into memory or encoded
        raise SyncError(refusal)
    files = []
    for e in manifest.entries:
        with open(sources[e.path], "rb") as f:
            files.append((e.path, f.read(), e.mode))
    return with_synced_files(objects, files, manifest.digest())


def _spec_for_record(spec: ServeSpec) -> dict[str, Any]:
    """The spec as stored (registry.spec_for_record), with the hashes of the body and env."""
    data = spec_for_record(spec)
    # Enough to tell an unchanged cell from a changed one, without storing the body or env values.
    # The same hashes the pod template carries (render.py).
    data["body_sha"] = body_hash(spec.body)
    data["env_hash"] = env_hash(spec.env, _env_key())
    return data


_CODE_KEY = re.compile(r"[0-9a-f-]{1,64}\.[0-9a-f-]{1,64}")
MAX_KEPT_CODE = 12  # the Deployment keeps 10 old ReplicaSets (revisionHistoryLimit), plus the current


def _code_dir(profile: str, namespace: str, name: str) -> Path:
    from jupyter_core.paths import jupyter_data_dir

    digest = hashlib.sha256(f"{profile}/{namespace}/{name}".encode()).hexdigest()[:24]
    return Path(jupyter_data_dir()) / "tiers" / "k8s-code" / digest


def _is_code(obj: Mapping[str, Any]) -> bool:
    """A revision's code: its ``-code`` ConfigMap, its ``-sync`` Secret (a ConfigMap before
    issue 26); never the ``-env`` Secret (env values are kept nowhere but in the cluster)."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    return obj.get("kind") == "ConfigMap" or (obj.get("kind") == "Secret" and name.endswith("-sync"))


def _save_code(profile: str, namespace: str, name: str, key: str, objects: list[dict[str, Any]]) -> None:
    """Keep the code objects of one applied revision (0600, the newest MAX_KEPT_CODE)."""
    if not _CODE_KEY.fullmatch(key):
        return
    folder = _code_dir(profile, namespace, name)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{key}.json"
    tmp = folder / f".{key}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(objects, f)
    os.replace(tmp, path)
    kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in kept[MAX_KEPT_CODE:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _load_code(profile: str, namespace: str, name: str, key: str) -> list[dict[str, Any]] | None:
    """The code ConfigMaps kept for ``key`` (a revision's code_key), or None."""
    if not _CODE_KEY.fullmatch(key):
        return None
    try:
        data = json.loads((_code_dir(profile, namespace, name) / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, list) or not all(isinstance(o, dict) and _is_code(o) for o in data):
        return None
    return data


def _env_key() -> bytes:
    """This user's key for the env hash (see render.env_hash), kept 0600 in the data dir."""
    from jupyter_core.paths import jupyter_data_dir

    path = Path(jupyter_data_dir()) / "tiers" / "env-hash.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_bytes(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return path.read_bytes()
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        return key
