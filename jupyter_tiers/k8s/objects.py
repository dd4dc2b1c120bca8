"""One Kubernetes object at a time: server-side apply under our field manager, a quiet delete,
a Deployment's scale, the end of a pod's log. K8sTier, the canary operations (canary_ops.py) and
rollbacks (rollback_ops.py) all write through it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.errors import ApiError, SpecError
from .client import APPLY_CONTENT_TYPE, FIELD_MANAGER, KubeClient
from .render import CONTAINER_NAME

_RESOURCES = {"Deployment": "deployments", "Service": "services", "ConfigMap": "configmaps",
              "Secret": "secrets", "HorizontalPodAutoscaler": "horizontalpodautoscalers",
              "Ingress": "ingresses"}


def resource(kind: str) -> str:
    """The API resource of a kind (what errors and request counts name)."""
    return _RESOURCES.get(kind, kind.lower() + "s")


def patch_fn(client: KubeClient, kind: str) -> Callable[..., Any]:
    """The client call that server-side applies a kind (a kind we never write is a SpecError)."""
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


def delete_fn(client: KubeClient, kind: str) -> Callable[..., Any]:
    """The client call that deletes a kind."""
    fns: dict[str, Callable[..., Any]] = {
        "Deployment": client.apps().delete_namespaced_deployment,
        "Service": client.core().delete_namespaced_service,
        "ConfigMap": client.core().delete_namespaced_config_map,
        "Secret": client.core().delete_namespaced_secret,
        "HorizontalPodAutoscaler": client.autoscaling().delete_namespaced_horizontal_pod_autoscaler,
        "Ingress": client.networking().delete_namespaced_ingress,
    }
    return fns[kind]


class Objects:
    """Writes objects of one cluster through a :class:`KubeClient` (its error mapping and
    request counting)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def apply(self, obj: dict[str, Any], *, dry_run: bool = False) -> Any:
        """Server-side apply of one object under our field manager (force: the cell wins); with
        ``dry_run``, the API server's own dry run (``dryRun=All``): checked, stored nowhere.
        Returns the raw response (``.status`` 201 created, 200 updated; ``.data`` the object)."""
        kind, name, ns = obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"]
        fn = patch_fn(self.client, kind)
        extra = {"dry_run": "All"} if dry_run else {}
        return self.client.call(
            fn, name, ns, obj, field_manager=FIELD_MANAGER, force=True,
            _content_type=APPLY_CONTENT_TYPE, _preload_content=False,
            verb="apply", resource=resource(kind), namespace=ns, **extra)

    def delete_quietly(self, kind: str, name: str, namespace: str) -> bool:
        """Delete one object; False when it was not there (a 404), any other error raised."""
        ns = namespace
        fn = delete_fn(self.client, kind)
        try:
            self.client.call(fn, name, ns, verb="delete", resource=resource(kind), namespace=ns)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def scale_deployment(self, name: str, ns: str, replicas: int) -> None:
        """Set one Deployment's replicas through its scale subresource (also a canary's split)."""
        self.client.call(self.client.apps().patch_namespaced_deployment_scale, name, ns,
                         {"spec": {"replicas": replicas}}, verb="patch", resource="deployments/scale",
                         namespace=ns)

    def pod_log_tail(self, name: str, ns: str, want: int, budget: int, bounded: bool
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
