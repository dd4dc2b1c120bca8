"""Defaulting, validation and a small schema check, applied by the API server on every write.

Covers what the golden transcripts show (Deployment/Pod template defaults, Service IP allocation,
HPA status, 422 wording for names, replicas, selectors and ports, 500 for unknown fields and bad
quantities); it is not a full OpenAPI schema."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from .errors import ApiError, invalid
from .store import RESOURCES, Store

Obj = dict[str, Any]

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")

# Known keys per schema node (for the "field not declared in schema" 500 of server-side apply).
_META = {
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "selfLink",
}
_CONTAINER = {
    "name",
    "image",
    "command",
    "args",
    "workingDir",
    "ports",
    "envFrom",
    "env",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "securityContext",
    "stdin",
    "stdinOnce",
    "tty",
}
_POD_SPEC = {
    "volumes",
    "initContainers",
    "containers",
    "ephemeralContainers",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeSelector",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "imagePullSecrets",
    "hostname",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "hostAliases",
    "priorityClassName",
    "priority",
    "dnsConfig",
    "readinessGates",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
}
# Volumes: the sources a pod spec may name (core/v1 Volume), and emptyDir's own fields.
_VOLUME = {
    "name", "emptyDir", "configMap", "secret", "projected", "downwardAPI", "hostPath", "nfs",
    "persistentVolumeClaim", "ephemeral", "csi", "iscsi", "fc", "cephfs", "rbd", "glusterfs",
    "azureDisk", "azureFile", "awsElasticBlockStore", "gcePersistentDisk", "flexVolume", "cinder",
    "flocker", "gitRepo", "photonPersistentDisk", "portworxVolume", "quobyte", "scaleIO",
    "storageos", "vsphereVolume",
}
_EMPTY_DIR = {"medium", "sizeLimit"}
_VOLUME_MOUNT = {"name", "mountPath", "subPath", "subPathExpr", "readOnly", "mountPropagation",
                 "recursiveReadOnly"}
_DEPLOY_SPEC = {
    "replicas",
    "selector",
    "template",
    "strategy",
    "minReadySeconds",
    "revisionHistoryLimit",
    "paused",
    "progressDeadlineSeconds",
}
_RS_SPEC = {"replicas", "minReadySeconds", "selector", "template"}
_SVC_SPEC = {
    "ports",
    "selector",
    "clusterIP",
    "clusterIPs",
    "type",
    "externalIPs",
    "sessionAffinity",
    "loadBalancerIP",
    "loadBalancerSourceRanges",
    "externalName",
    "externalTrafficPolicy",
    "healthCheckNodePort",
    "publishNotReadyAddresses",
    "sessionAffinityConfig",
    "ipFamilies",
    "ipFamilyPolicy",
    "allocateLoadBalancerNodePorts",
    "loadBalancerClass",
    "internalTrafficPolicy",
}
_HPA_SPEC = {"scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior"}
_INGRESS_SPEC = {"ingressClassName", "defaultBackend", "tls", "rules"}
_INGRESS_RULE = {"host", "http"}
_INGRESS_PATH = {"path", "pathType", "backend"}
_PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
_WILDCARD_MSG = (
    "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
    "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character "
    "(e.g. '*.example.com', regex used for validation is "
    "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_IPV4 = re.compile(r"^[0-9]+(\.[0-9]+){3}$")
_TOP = {"apiVersion", "kind", "metadata", "spec", "status"}
_TOP_EXTRA = {
    "configmaps": {"data", "binaryData", "immutable"},
    "secrets": {"data", "stringData", "type", "immutable"},
    "endpoints": {"subsets"},
    "serviceaccounts": {"secrets", "imagePullSecrets", "automountServiceAccountToken"},
    "events": {
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "type",
        "eventTime",
        "series",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    },
}


def _unknown(node: Any, allowed: set[str], path: str) -> str | None:
    if not isinstance(node, dict):
        return None
    for k in node:
        if k not in allowed:
            return f"{path}.{k}"
    return None


def _check_pod_spec(spec: Any, path: str) -> str | None:
    bad = _unknown(spec, _POD_SPEC, path)
    if bad or not isinstance(spec, dict):
        return bad
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or []:
            name = c.get("name", "") if isinstance(c, dict) else ""
            bad = _unknown(c, _CONTAINER, f'{path}.{field}[name="{name}"]')
            for vm in (c.get("volumeMounts") or []) if isinstance(c, dict) else []:
                where = f'{path}.{field}[name="{name}"].volumeMounts'
                bad = bad or _unknown(vm, _VOLUME_MOUNT, f'{where}[mountPath="{_get(vm, "mountPath")}"]')
            if bad:
                return bad
    for v in spec.get("volumes") or []:
        where = f'{path}.volumes[name="{_get(v, "name")}"]'
        bad = _unknown(v, _VOLUME, where) or _unknown(_get(v, "emptyDir"), _EMPTY_DIR, f"{where}.emptyDir")
        if bad:
            return bad
    return None


def _get(node: Any, key: str) -> Any:
    return node.get(key, "") if isinstance(node, dict) else ""


def unknown_field(resource: str, obj: Obj) -> str | None:
    """The first field path the schema does not declare, e.g. ``.spec.replicaz``, or None."""
    bad = _unknown(obj, _TOP | _TOP_EXTRA.get(resource, set()), "")
    if bad:
        return bad
    bad = _unknown(obj.get("metadata"), _META, ".metadata")
    if bad:
        return bad
    spec = obj.get("spec")
    if resource in ("deployments", "replicasets"):
        bad = _unknown(spec, _DEPLOY_SPEC if resource == "deployments" else _RS_SPEC, ".spec")
        if bad or not isinstance(spec, dict):
            return bad
        tmpl = spec.get("template") or {}
        bad = _unknown(tmpl, {"metadata", "spec"}, ".spec.template")
        return bad or _check_pod_spec(tmpl.get("spec"), ".spec.template.spec")
    if resource == "pods":
        return _check_pod_spec(spec, ".spec")
    if resource == "services":
        return _unknown(spec, _SVC_SPEC, ".spec")
    if resource == "horizontalpodautoscalers":
        return _unknown(spec, _HPA_SPEC, ".spec")
    if resource == "ingresses":
        bad = _unknown(spec, _INGRESS_SPEC, ".spec")
        for i, rule in enumerate((spec or {}).get("rules") or [] if isinstance(spec, dict) else []):
            bad = bad or _unknown(rule, _INGRESS_RULE, f".spec.rules[{i}]")
            http = rule.get("http") if isinstance(rule, dict) else None
            for j, path in enumerate((http or {}).get("paths") or [] if isinstance(http, dict) else []):
                bad = bad or _unknown(path, _INGRESS_PATH, f".spec.rules[{i}].http.paths[{j}]")
        return bad
    return None


def check_quantities(resource: str, obj: Obj) -> None:
    """500 like the API server's conversion error for an unparseable resource quantity."""
    spec = obj.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") if resource in ("deployments", "replicasets") else spec
    if resource not in ("deployments", "replicasets", "pods") or not isinstance(pod, dict):
        return
    # Resource amounts and an emptyDir's sizeLimit are both quantities (a medium: Memory /dev/shm).
    empty_dirs = [v["emptyDir"] for v in pod.get("volumes") or []
                  if isinstance(v, dict) and isinstance(v.get("emptyDir"), dict)]
    quantities = [e["sizeLimit"] for e in empty_dirs if "sizeLimit" in e]
    for c in (pod.get("containers") or []) + (pod.get("initContainers") or []):
        res = (c or {}).get("resources") or {}
        for section in ("limits", "requests"):
            quantities += list((res.get(section) or {}).values())
    if all(_QUANTITY.match(str(v)) for v in quantities):
        return
    info = RESOURCES[resource]
    md = obj.get("metadata") or {}
    raise ApiError(
        500,
        "",
        f"failed to convert new object ({md.get('namespace', '')}/{md.get('name', '')}; "
        f"{info.api_version}, Kind={info.kind}) to proper version: unable to convert "
        f"unstructured object to {info.api_version}, Kind={info.kind}: quantities must match "
        "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    )


# ---------------------------------------------------------------------------- defaults
def _default_probe(p: Any) -> None:
    if not isinstance(p, dict):
        return
    if isinstance(p.get("httpGet"), dict):
        p["httpGet"].setdefault("scheme", "HTTP")
    p.setdefault("timeoutSeconds", 1)
    p.setdefault("periodSeconds", 10)
    p.setdefault("successThreshold", 1)
    p.setdefault("failureThreshold", 3)


def default_pod_spec(spec: Obj) -> None:
    """Pod spec defaults as the API server fills them in."""
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or []:
            for port in c.get("ports") or []:
                port.setdefault("protocol", "TCP")
            c.setdefault("resources", {})
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                _default_probe(c.get(probe))
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            image = str(c.get("image", ""))
            latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
            c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")


def _default_template(tmpl: Obj) -> None:
    md = tmpl.setdefault("metadata", {})
    md.setdefault("creationTimestamp", None)
    default_pod_spec(tmpl.setdefault("spec", {}))


class Defaulter:
    """Fills server-side defaults; owns the Service clusterIP / nodePort allocators."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()

    def _used(self, field: str) -> set[Any]:
        out: set[Any] = set()
        for svc in self.store.list("services"):
            spec = svc.get("spec") or {}
            if field == "clusterIP":
                out.add(spec.get("clusterIP"))
            else:
                out |= {p.get("nodePort") for p in spec.get("ports") or []}
        return out

    def apply(self, resource: str, obj: Obj, old: Obj | None = None) -> None:
        """Default ``obj`` in place (``old``: the stored object on updates)."""
        spec = obj.get("spec")
        if resource == "deployments" and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            strat = spec.setdefault("strategy", {})
            strat.setdefault("type", "RollingUpdate")
            if strat["type"] == "RollingUpdate":
                ru = strat.setdefault("rollingUpdate", {})
                ru.setdefault("maxUnavailable", "25%")
                ru.setdefault("maxSurge", "25%")
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
            _default_template(spec.setdefault("template", {}))
        elif resource == "replicasets" and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            _default_template(spec.setdefault("template", {}))
        elif resource == "pods" and isinstance(spec, dict):
            default_pod_spec(spec)
            spec.setdefault("enableServiceLinks", True)
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        elif resource == "services" and isinstance(spec, dict):
            self._default_service(spec, (old or {}).get("spec") or {})
            obj["status"] = obj.get("status") or {"loadBalancer": {}}
        elif resource == "ingresses":
            # As golden 13c: empty until an ingress controller writes an address.
            obj["status"] = obj.get("status") or {"loadBalancer": {}}
        elif resource == "horizontalpodautoscalers":
            if not obj.get("status"):
                obj["status"] = {"desiredReplicas": 0, "currentMetrics": None}
        elif resource == "secrets":
            obj.setdefault("type", "Opaque")

    def _default_service(self, spec: Obj, old: Obj) -> None:
        spec.setdefault("type", "ClusterIP")
        for p in spec.get("ports") or []:
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
        with self._lock:
            if spec["type"] != "ExternalName":
                if old.get("clusterIP") and not spec.get("clusterIP"):
                    spec["clusterIP"] = old["clusterIP"]
                if not spec.get("clusterIP"):
                    used = self._used("clusterIP")
                    free = (f"10.0.0.{i}" for i in range(2, 255) if f"10.0.0.{i}" not in used)
                    spec["clusterIP"] = next(free)
                if spec["clusterIP"] != "None":
                    spec.setdefault("clusterIPs", [spec["clusterIP"]])
                spec.setdefault("ipFamilies", ["IPv4"])
                spec.setdefault("ipFamilyPolicy", "SingleStack")
                spec.setdefault("internalTrafficPolicy", "Cluster")
            spec.setdefault("sessionAffinity", "None")
            if spec["type"] in ("NodePort", "LoadBalancer"):
                spec.setdefault("externalTrafficPolicy", "Cluster")
                old_ports = {
                    (p.get("port"), p.get("protocol")): p.get("nodePort") for p in old.get("ports") or []
                }
                used = self._used("nodePort")
                for p in spec.get("ports") or []:
                    if not p.get("nodePort"):
                        prev = old_ports.get((p.get("port"), p.get("protocol")))
                        p["nodePort"] = prev or next(n for n in range(30000, 32768) if n not in used)
                        used.add(p["nodePort"])
                if spec["type"] == "LoadBalancer":
                    spec.setdefault("allocateLoadBalancerNodePorts", True)


# ---------------------------------------------------------------------------- validation
def _go_map(d: dict[str, str]) -> str:
    inner = ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(d.items()))
    return "map[string]string{" + inner + "}"


def _selector_matches(sel: Obj, labels: dict[str, str]) -> bool:
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in sel.get("matchExpressions") or []:
        k, op, vals = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if (op == "In" and labels.get(k) not in vals) or (op == "NotIn" and labels.get(k) in vals):
            return False
        if (op == "Exists" and k not in labels) or (op == "DoesNotExist" and k in labels):
            return False
    return True


def _volume_causes(spec: Obj, path: str) -> list[tuple[str, str, str]]:
    """Volumes and their mounts as the API server checks them: unique volume names, each mount
    naming a volume, no mount path twice in a container (wording of kube-apiserver 1.28)."""
    causes: list[tuple[str, str, str]] = []
    names: set[str] = set()
    for i, v in enumerate(spec.get("volumes") or []):
        name = _get(v, "name")
        if name in names:
            causes.append(("FieldValueDuplicate", f"{path}.volumes[{i}].name", f'Duplicate value: "{name}"'))
        names.add(name)
    for field in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(field) or []):
            seen: set[str] = set()
            for j, vm in enumerate((c.get("volumeMounts") or []) if isinstance(c, dict) else []):
                where = f"{path}.{field}[{i}].volumeMounts[{j}]"
                name, mount = _get(vm, "name"), _get(vm, "mountPath")
                if name not in names:
                    causes.append(("FieldValueNotFound", f"{where}.name", f'Not found: "{name}"'))
                if mount in seen:
                    causes.append(("FieldValueInvalid", f"{where}.mountPath",
                                   f'Invalid value: "{mount}": must be unique'))
                seen.add(mount)
    return causes


def _pod_spec_causes(spec: Any, path: str) -> list[tuple[str, str, str]]:
    causes: list[tuple[str, str, str]] = []
    if not isinstance(spec, dict):
        return causes
    causes += _volume_causes(spec, path)
    containers = spec.get("containers")
    if not containers:
        causes.append(("FieldValueRequired", f"{path}.containers", "Required value"))
    for i, c in enumerate(containers or []):
        if not c.get("image"):
            causes.append(("FieldValueRequired", f"{path}.containers[{i}].image", "Required value"))
        for j, p in enumerate(c.get("ports") or []):
            cp = p.get("containerPort")
            if not isinstance(cp, int) or not 1 <= cp <= 65535:
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"{path}.containers[{i}].ports[{j}].containerPort",
                        f"Invalid value: {cp}: must be between 1 and 65535, inclusive",
                    )
                )
    return causes


def validate(resource: str, obj: Obj) -> None:
    """Raise the API server's 422 for the common invalid objects (see golden 07 and 10)."""
    info = RESOURCES[resource]
    md = obj.get("metadata") or {}
    name = md.get("name", "")
    causes: list[tuple[str, str, str]] = []
    if not name:
        causes.append(
            ("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")
        )
    elif not _DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        causes.append(("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": {_SUBDOMAIN_MSG}'))
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if resource in ("deployments", "replicasets"):
        r = spec.get("replicas")
        if isinstance(r, int) and r < 0:
            causes.append(
                (
                    "FieldValueInvalid",
                    "spec.replicas",
                    f"Invalid value: {r}: must be greater than or equal to 0",
                )
            )
        tmpl = spec.get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        sel = spec.get("selector")
        if not sel:
            causes.append(("FieldValueRequired", "spec.selector", "Required value"))
        elif not _selector_matches(sel, labels):
            causes.append(
                (
                    "FieldValueInvalid",
                    "spec.template.metadata.labels",
                    f"Invalid value: {_go_map(labels)}: `selector` does not match template `labels`",
                )
            )
        causes += _pod_spec_causes(tmpl.get("spec"), "spec.template.spec")
    elif resource == "pods":
        causes += _pod_spec_causes(spec, "spec")
    elif resource == "services":
        for i, p in enumerate(spec.get("ports") or []):
            port = p.get("port")
            if not isinstance(port, int) or not 1 <= port <= 65535:
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"spec.ports[{i}].port",
                        f"Invalid value: {port}: must be between 1 and 65535, inclusive",
                    )
                )
    elif resource == "ingresses":
        causes += _ingress_causes(spec)
    elif resource == "horizontalpodautoscalers":
        mn, mx = spec.get("minReplicas", 1), spec.get("maxReplicas")
        if isinstance(mn, int) and mn < 1:
            causes.append(
                (
                    "FieldValueInvalid",
                    "spec.minReplicas",
                    f"Invalid value: {mn}: must be greater than or equal to 1",
                )
            )
        if isinstance(mx, int) and isinstance(mn, int) and mx < mn:
            causes.append(
                (
                    "FieldValueInvalid",
                    "spec.maxReplicas",
                    f"Invalid value: {mx}: must be greater than or equal to `minReplicas`",
                )
            )
    if causes:
        raise invalid(info.kind, info.group, name, causes)


def _host_causes(host: Any, field: str) -> list[tuple[str, str, str]]:
    """An Ingress host as the API server checks it (k8s-golden 13c for the wording)."""
    if not isinstance(host, str) or not host:
        return []
    if _IPV4.match(host):
        return [("FieldValueInvalid", field,
                 f'Invalid value: "{host}": must be a DNS name, not an IP address')]
    if "*" in host:
        rest = host[2:] if host.startswith("*.") else ""
        if not rest or not _DNS1123_SUBDOMAIN.match(rest) or len(host) > 253:
            return [("FieldValueInvalid", field, f'Invalid value: "{host}": {_WILDCARD_MSG}')]
        return []
    if not _DNS1123_SUBDOMAIN.match(host) or len(host) > 253:
        return [("FieldValueInvalid", field, f'Invalid value: "{host}": {_SUBDOMAIN_MSG}')]
    return []


def _ingress_causes(spec: Obj) -> list[tuple[str, str, str]]:
    """networking.k8s.io/v1 Ingress validation: class name, TLS hosts, rule hosts, pathType and
    the path rules of Prefix and Exact paths (golden 13c shows the host and pathType wording)."""
    causes: list[tuple[str, str, str]] = []
    cls = spec.get("ingressClassName")
    if isinstance(cls, str) and (not _DNS1123_SUBDOMAIN.match(cls) or len(cls) > 253):
        causes.append(("FieldValueInvalid", "spec.ingressClassName",
                       f'Invalid value: "{cls}": {_SUBDOMAIN_MSG}'))
    for i, tls in enumerate(spec.get("tls") or []):
        for j, host in enumerate((tls or {}).get("hosts") or []):
            causes += _host_causes(host, f"spec.tls[{i}].hosts[{j}]")
    rules = spec.get("rules") or []
    if not rules and not spec.get("defaultBackend"):
        causes.append(("FieldValueRequired", "spec.rules", "Required value: either `defaultBackend` or "
                       "`rules` must be specified"))
    for i, rule in enumerate(rules):
        rule = rule if isinstance(rule, dict) else {}
        causes += _host_causes(rule.get("host"), f"spec.rules[{i}].host")
        http = rule.get("http") if isinstance(rule.get("http"), dict) else {}
        for j, p in enumerate(http.get("paths") or []):
            p = p if isinstance(p, dict) else {}
            field = f"spec.rules[{i}].http.paths[{j}]"
            ptype, path = p.get("pathType"), p.get("path")
            if ptype is None:
                causes.append(("FieldValueRequired", f"{field}.pathType",
                               "Required value: pathType must be specified"))
                continue
            if ptype not in _PATH_TYPES:
                supported = ", ".join(f'"{t}"' for t in _PATH_TYPES)
                causes.append(("FieldValueNotSupported", f"{field}.pathType",
                               f'Unsupported value: "{ptype}": supported values: {supported}'))
                continue
            if ptype == "ImplementationSpecific" or not isinstance(path, str):
                continue
            if not path.startswith("/"):
                causes.append(("FieldValueInvalid", f"{field}.path",
                               f'Invalid value: "{path}": must be an absolute path'))
            for seq in ("//", "/./", "/../", "%2f", "%2F"):
                if seq in path:
                    causes.append(("FieldValueInvalid", f"{field}.path",
                                   f'Invalid value: "{path}": must not contain \'{seq}\''))
            for end in ("/..", "/."):
                if path.endswith(end):
                    causes.append(("FieldValueInvalid", f"{field}.path",
                                   f'Invalid value: "{path}": cannot end with \'{end}\''))
    return causes
