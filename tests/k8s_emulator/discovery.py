"""Discovery documents (/version, /api, /apis, /api/v1, /apis/<group>/<version>).

Only the groups the emulator serves are listed, so ``DynamicClient`` never asks for a group
version that would 404."""

from __future__ import annotations

from typing import Any

from .store import RESOURCES

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUBRESOURCES: dict[str, list[tuple[str, str, dict[str, str]]]] = {
    # plural -> [(subresource, kind, extra fields), ...]
    "pods": [
        ("eviction", "Eviction", {"group": "policy", "version": "v1"}),
        ("log", "Pod", {}),
        ("portforward", "PodPortForwardOptions", {}),
        ("status", "Pod", {}),
    ],
    "deployments": [
        ("scale", "Scale", {"group": "autoscaling", "version": "v1"}),
        ("status", "Deployment", {}),
    ],
    "replicasets": [
        ("scale", "Scale", {"group": "autoscaling", "version": "v1"}),
        ("status", "ReplicaSet", {}),
    ],
    "horizontalpodautoscalers": [("status", "HorizontalPodAutoscaler", {})],
    "ingresses": [("status", "Ingress", {})],
    "services": [("status", "Service", {})],
    "namespaces": [("status", "Namespace", {})],
    "serviceaccounts": [("token", "TokenRequest", {"group": "authentication.k8s.io", "version": "v1"})],
}
_SUB_VERBS = {"eviction": ["create"], "log": ["get"], "portforward": ["create", "get"], "token": ["create"]}
_CATEGORIES = {"pods", "services", "deployments", "replicasets", "horizontalpodautoscalers"}

VERSION = {
    "major": "1",
    "minor": "28",
    "gitVersion": "v1.28.4-emulator",
    "gitCommit": "0" * 40,
    "gitTreeState": "clean",
    "buildDate": "2026-12-02T00:00:00Z",
    "goVersion": "go1.21.13",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def group_versions() -> list[tuple[str, str]]:
    """The (group, version) pairs served, core first."""
    out: list[tuple[str, str]] = []
    for r in RESOURCES.values():
        if (r.group, r.version) not in out:
            out.append((r.group, r.version))
    return out


def api_versions(server_address: str) -> dict[str, Any]:
    """GET /api."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_group_list() -> dict[str, Any]:
    """GET /apis."""
    groups = []
    for g, v in group_versions():
        if not g:
            continue
        gv = {"groupVersion": f"{g}/{v}", "version": v}
        groups.append({"name": g, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> dict[str, Any] | None:
    """GET /apis/<group>."""
    for g, v in group_versions():
        if g == group and g:
            gv = {"groupVersion": f"{g}/{v}", "version": v}
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": g,
                "versions": [gv],
                "preferredVersion": gv,
            }
    return None


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    """GET /api/v1 or /apis/<group>/<version>; None if not served."""
    if (group, version) not in group_versions():
        return None
    resources: list[dict[str, Any]] = []
    for r in sorted(RESOURCES.values(), key=lambda r: r.plural):
        if (r.group, r.version) != (group, version):
            continue
        verbs = [v for v in VERBS if not (r.plural == "namespaces" and v == "deletecollection")]
        entry: dict[str, Any] = {
            "name": r.plural,
            "singularName": r.kind.lower(),
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs,
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.plural in _CATEGORIES:
            entry["categories"] = ["all"]
        resources.append(entry)
        for sub, kind, extra in _SUBRESOURCES.get(r.plural, []):
            resources.append(
                {
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    **extra,
                    "kind": kind,
                    "verbs": _SUB_VERBS.get(sub, ["get", "patch", "update"]),
                }
            )
    out: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        out["apiVersion"] = "v1"
    out["groupVersion"] = f"{group}/{version}" if group else version
    out["resources"] = resources
    return out
