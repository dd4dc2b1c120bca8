"""K8sTier: services as Deployments + Services on Kubernetes, through the official client.

Objects come from the pure renderer (render.py) and are applied with server-side apply under one
field manager, so re-running a cell is idempotent (an unchanged cell writes nothing; a changed
body or env rolls the pods). Services are followed with the namespace's shared watches
(watch.py); logs of every pod are followed across restarts and replacements.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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
from . import canary_ops, rollback_ops
from .canary import LIVE_CANARY, canary_name, canary_objects, split_pods
from .client import FIELD_MANAGER, KubeClient
from .fetch import add_model_fetch
from .kept_code import env_key, is_code, save_code
from .objects import Objects, resource
from .parse import ingress_classes, ingress_endpoint, service_status
from .portforward import PortForward
from .render import body_hash, env_hash, render_manifests, render_yaml
from .rollback import code_key
from .service_watch import LaggingWatchGuard, ServiceLogs, ServiceSubscription
from .sync_render import size_refusal as sync_size_refusal
from .sync_render import with_synced_files
from .watch import NamespaceWatch, split_timestamp, timestamp_key

BLUEGREEN_TIMEOUT = 900.0  # seconds a new color may take to become ready before the switch is dropped


class K8sTier(ServeTier):
    """A Kubernetes namespace reached through a kubeconfig context (or in-cluster config)."""

    backend = "kubernetes"
    keeps_forwards = True
    fetches_models = True

    def __init__(self, profile: Profile, registry: Registry | None = None,
                 client: KubeClient | None = None) -> None:
        super().__init__(profile, registry)
        source = profile.sources[-1] if profile.sources else "tiers.yaml"
        self.client = client or KubeClient(profile.settings, profile=profile.name, source=source)
        self.objects = Objects(self.client)
        self._namespace_watch: NamespaceWatch | None = None
        self._forwards: list[PortForward] = []
        self._subscriptions: set[ServiceSubscription] = set()
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

    def manifests(self, spec: ServeSpec, color: str | None = None) -> list[dict[str, Any]]:
        notebook = dict(spec.metadata).get("notebook")
        objects = render_manifests(
            spec, namespace=self.namespace,
            service_type=self.profile.get("service_type", "ClusterIP"),
            image_pull_secrets=tuple(self.profile.get("image_pull_secrets", ())),
            model_volume=self.profile.get("model_volume"), color=color, notebook=notebook,
            env_key=env_key(), ingress_class=self.profile.get("ingress_class"),
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
        objects = self.manifests(spec, color)
        if spec.canary is not None:
            objects = canary_objects(objects, spec.name, canary_replicas(spec.replicas, spec.canary))
        return objects

    def render(self, spec: ServeSpec) -> str:
        return render_yaml(self._objects_for(spec, "blue" if spec.strategy == "bluegreen" else None))

    # --- apply ---------------------------------------------------------------------------
    def dry_run_server(self, spec: ServeSpec) -> str:
        """``--dry-run=server``: every object goes to the API server's dry run (schema
        validation, admission, defaulting) and nothing is created or changed. Returns one line
        per object, as kubectl prints them, then a closing line (never an object's content: the
        server answers a Secret with its values); a refusal raises the usual one-line ApiError."""
        color, _ = self._color_for(spec)
        objects = self._objects_for(spec, color)
        lines = []
        for obj in objects:
            resp = self.objects.apply(obj, dry_run=True)
            verb = "created" if getattr(resp, "status", 200) == 201 else "configured"
            lines.append(f"{resource(obj['kind'])}/{obj['metadata']['name']} {verb} (server dry run)")
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
        new = next(o for o in self.manifests(spec, live) if o["kind"] == "Deployment")
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
        objects = self.manifests(spec, color)
        by_kind = {o["kind"]: o for o in objects}
        for obj in objects:
            if obj["kind"] == "Service" and switching:
                continue  # switched only once the new colour is ready
            self.objects.apply(obj)
        if "HorizontalPodAutoscaler" not in by_kind:
            self.objects.delete_quietly("HorizontalPodAutoscaler", spec.name, self.namespace)
        if "Ingress" not in by_kind and existing is not None and existing.spec.get("ingress"):
            self.objects.delete_quietly("Ingress", spec.name, self.namespace)  # it stopped using --ingress
        deployment = by_kind["Deployment"]["metadata"]["name"]
        if color is None:  # what a later rollback to this revision needs that its template lacks
            template = by_kind["Deployment"]["spec"]["template"]
            with contextlib.suppress(OSError):
                save_code(self.name, self.namespace, spec.name, code_key(template),
                          [o for o in objects if is_code(o)])
        if not spec.sync and existing is not None and existing.spec.get("sync"):
            # It stopped using --sync: its Secret goes, and the ConfigMap versions before 26 made.
            self.objects.delete_quietly("Secret", f"{deployment}-sync", self.namespace)
            self.objects.delete_quietly("ConfigMap", f"{deployment}-sync", self.namespace)
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
            self.objects.apply(service_obj)
            for kind, suffix in (("Deployment", ""), ("ConfigMap", "-code"), ("Secret", "-env"),
                                 ("Secret", "-sync"), ("ConfigMap", "-sync")):
                self.objects.delete_quietly(kind, f"{name}-{old}{suffix}", self.namespace)

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

    def deployment_name(self, record: JobRecord) -> str:
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
                                    self.deployment_name(record), ns, _preload_content=False,
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
        return summary_line(status, elapsed_s=elapsed, log_lines=self.cause_lines(record, status))

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
            got = self.objects.pod_log_tail(name, ns, want, budget, tail is None)
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

    # --- actions -------------------------------------------------------------------------
    def scale(self, record: JobRecord, replicas: int) -> None:
        if replicas < 0 or replicas > 1000:
            raise SpecError("replicas", f"must be 0-1000, got {replicas}")
        ns = record.spec.get("namespace") or self.namespace
        with self._gone_is_not_found(record, ns):
            self.objects.scale_deployment(self.deployment_name(record), ns, replicas)

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

    def promote(self, record: JobRecord) -> str:
        return canary_ops.promote(self, record)

    def restart(self, record: JobRecord) -> None:
        ns = record.spec.get("namespace") or self.namespace
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": stamp}}}}}
        with self._gone_is_not_found(record, ns):
            self.client.call(self.client.apps().patch_namespaced_deployment, self.deployment_name(record),
                             ns, body, field_manager=f"{FIELD_MANAGER}-restart",
                             verb="patch", resource="deployments", namespace=ns)

    def rollback(self, record: JobRecord, revision: int | None = None) -> str:
        """Roll a rolling service back to ``revision`` of its Deployment's history (default: the
        one before the current), as ``kubectl rollout undo`` does, with that revision's cell
        body (kept on this machine when it was applied). Returns a one-line message; refuses
        blue-green (its old colour is gone once switched), a revision not kept, and one whose env
        values differ from the current ones (rollback.py). While a canary runs (``--canary``),
        rolling back removes the canary instead (canary_ops)."""
        return rollback_ops.rollback(self, record, revision)

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
                                                verb="list", resource=resource(kind), namespace=ns
                                                ).data).get("items") or []
            for item in items:
                self.objects.delete_quietly(kind, item["metadata"]["name"], ns)
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
            forward = PortForward(self.client, record.spec.get("namespace") or self.namespace,
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
        opened: list[PortForward] = []
        try:
            for pod in ready:
                opened.append(PortForward(self.client, namespace, pod, port, 0))
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
        sub = ServiceSubscription(record, nsw, on_status, self._forget)
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
            sub.logs = ServiceLogs(self.client, nsw.namespace, record.name, on_lines)
            sub.listener = nsw.add_listener(sub.logs.on_event)
        sub.token = nsw.subscribe(record.name, self._status_fn(record), sub.guard)
        if sub.logs is not None:
            sub.logs.sync(nsw.pods(record.name))
        return sub

    def _forget(self, subscription: ServiceSubscription) -> None:
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


# --- helpers -------------------------------------------------------------------------------------

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
    data["env_hash"] = env_hash(spec.env, env_key())
    return data


