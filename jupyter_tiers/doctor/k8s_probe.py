"""The doctor's I/O on a Kubernetes profile: read the kubeconfig (naming any exec credential
plugin, and not running it for a profile that comes from a project file), then the API server's
version, the namespace, one SelfSubjectAccessReview per access the tier needs, image pull
secrets, nodes' GPUs and the metrics API. Read-only: it creates nothing (an access review is
not stored)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.profiles import ENV_VAR, Profile, config_paths
from ..core.errors import ApiError, ApiUnreachable, ConfigError
from ..k8s.client import KubeClient

#: What the Kubernetes tier does in its namespace (group, resource, verb): each one is asked
#: with a SelfSubjectAccessReview, and the doctor names any that is missing.
TIER_ACCESS: tuple[tuple[str, str, str], ...] = (
    *(("apps", "deployments", v) for v in ("create", "patch", "delete", "get", "list")),
    *(("", r, v) for r in ("services", "configmaps", "secrets") for v in ("create", "patch", "delete")),
    *(("autoscaling", "horizontalpodautoscalers", v) for v in ("create", "patch", "delete")),
    # --ingress: applied, followed (its address) and deleted with the service
    *(("networking.k8s.io", "ingresses", v) for v in ("create", "patch", "delete", "get", "list", "watch")),
    *(("", r, v) for r in ("pods", "events") for v in ("get", "list", "watch")),
    ("", "pods/log", "get"),
    ("", "pods/portforward", "create"),
)


@dataclass(frozen=True)
class K8sProbe:
    kubeconfig: str = ""
    context: str = ""
    exec_command: str = ""  # the context's user's exec plugin, if any
    exec_refused: str = ""  # the project file the profile comes from (the plugin was not run)
    config_error: str = ""
    server: str = ""
    version: str = ""
    api_error: str = ""
    namespace: str = ""
    namespace_status: int = 0  # 200 exists, 404 missing, 403 not allowed to look
    namespace_error: str = ""
    allowed: dict[tuple[str, str, str], bool] = field(default_factory=dict)
    review_error: str = ""
    pull_secrets: dict[str, int] = field(default_factory=dict)  # name -> HTTP status
    nodes: int = 0
    gpu_nodes: int | None = None
    gpus: int = 0
    nodes_error: str = ""
    metrics_api: bool = False


def _kubeconfig_path(profile: Profile) -> str:
    configured = profile.get("kubeconfig")
    if configured:
        return os.path.expanduser(os.path.expandvars(str(configured)))
    env = os.environ.get("KUBECONFIG", "")
    return env.split(os.pathsep)[0] if env else os.path.expanduser("~/.kube/config")


def exec_plugin(text: str, context: str | None) -> tuple[str, str]:
    """(context name, exec command of its user or "") from a kubeconfig's YAML (pure; a file it
    cannot read gives ("", ""))."""
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    def entries(key: str) -> list[dict[str, Any]]:
        found = data.get(key)
        return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []

    name = context or str(data.get("current-context") or "")
    ctx = next((c.get("context") or {} for c in entries("contexts") if c.get("name") == name), {})
    user_name = ctx.get("user") if isinstance(ctx, dict) else None
    user = next((u.get("user") or {} for u in entries("users") if u.get("name") == user_name), {})
    run = user.get("exec") if isinstance(user, dict) else None
    command = str(run.get("command") or "") if isinstance(run, dict) else ""
    return name, command[:200]


def _project_source(profile: Profile) -> str:
    """The project tiers.yaml the profile takes anything from, or ""."""
    if os.environ.get(ENV_VAR):
        return ""
    project = config_paths()[-1][0]
    for source in profile.sources:
        try:
            if Path(source).resolve() == project.resolve():
                return source
        except OSError:
            continue
    return ""


def _status(exc: BaseException) -> int:
    return int(getattr(exc, "status", 0) or 0)


def probe(profile: Profile) -> K8sProbe:
    path = _kubeconfig_path(profile)
    try:
        text = Path(path).read_text()
    except OSError:
        text = ""
    context, command = exec_plugin(text, profile.get("context"))
    base: dict[str, Any] = {"kubeconfig": path, "context": context, "exec_command": command}
    if command:
        project = _project_source(profile)
        if project:
            return K8sProbe(**base, exec_refused=project)
    client = KubeClient(profile.settings, profile=profile.name, source=", ".join(profile.sources))
    try:
        api = client.api
    except ConfigError as exc:
        return K8sProbe(**base, config_error=str(exc))
    from kubernetes import client as k8s

    base["server"] = str(api.configuration.host)
    try:
        info = client.call(k8s.VersionApi(api).get_code, verb="get", resource="version")
    except (ApiError, ApiUnreachable) as exc:
        return K8sProbe(**base, api_error=str(exc))
    base["version"] = str(info.git_version)
    namespace = str(profile.get("namespace") or client.default_namespace)
    core = k8s.CoreV1Api(api)
    ns_status, ns_error = 200, ""
    try:
        client.call(core.read_namespace, namespace, verb="get", resource="namespaces")
    except ApiError as exc:
        ns_status, ns_error = _status(exc), str(exc)
    except ApiUnreachable as exc:
        ns_status, ns_error = 0, str(exc)
    allowed: dict[tuple[str, str, str], bool] = {}
    review_error = ""
    auth = k8s.AuthorizationV1Api(api)
    for group, resource, verb in TIER_ACCESS:
        plural, _, sub = resource.partition("/")
        attrs = {"group": group, "namespace": namespace, "resource": plural, "verb": verb}
        if sub:
            attrs["subresource"] = sub
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attrs}}
        try:
            review = client.call(auth.create_self_subject_access_review, body, verb="create",
                                 resource="selfsubjectaccessreviews")
        except (ApiError, ApiUnreachable) as exc:
            review_error = str(exc)
            break
        allowed[(group, resource, verb)] = bool(review.status and review.status.allowed)
    secrets: dict[str, int] = {}
    for item in profile.get("image_pull_secrets") or []:
        name = str(item.get("name") if isinstance(item, dict) else item)
        try:
            client.call(core.read_namespaced_secret, name, namespace, verb="get", resource="secrets",
                        namespace=namespace)
            secrets[name] = 200
        except (ApiError, ApiUnreachable) as exc:
            secrets[name] = _status(exc)
    nodes, gpu_nodes, gpus, nodes_error = 0, None, 0, ""
    try:
        listing = client.call(core.list_node, verb="list", resource="nodes")
        nodes, gpu_nodes = len(listing.items), 0
        for node in listing.items:
            count = int(((node.status and node.status.allocatable) or {}).get("nvidia.com/gpu", "0") or 0)
            if count:
                gpu_nodes, gpus = gpu_nodes + 1, gpus + count
    except (ApiError, ApiUnreachable, ValueError) as exc:
        nodes_error = str(exc)[:200]
    metrics = False
    try:
        groups = client.call(k8s.ApisApi(api).get_api_versions, verb="get", resource="apis")
        metrics = any(g.name == "metrics.k8s.io" for g in groups.groups or [])
    except (ApiError, ApiUnreachable):
        metrics = False
    return K8sProbe(**base, namespace=namespace, namespace_status=ns_status,
                    namespace_error=ns_error, allowed=allowed, review_error=review_error,
                    pull_secrets=secrets, nodes=nodes, gpu_nodes=gpu_nodes, gpus=gpus,
                    nodes_error=nodes_error, metrics_api=metrics)
