"""A service's pods' CPU and memory from the Kubernetes resource metrics API (pure, no I/O).

``metrics.k8s.io`` is served only where the cluster runs metrics-server (or another adapter);
many do not (the project's own test cluster does not). The tier asks once
(``GET /apis/metrics.k8s.io/v1beta1/namespaces/NS/pods?labelSelector=...``); this module reads
the answer (a ``PodMetricsList``) into rows, and words the one line shown when the API is not
there. Quantities are Kubernetes' (``250m`` / ``1234567n`` CPU, ``512Mi`` / ``1G`` memory).
"""

from __future__ import annotations

import math
import re
from typing import Any

POD_USAGE_COLUMNS = ("time", "pod", "container", "cpu_cores", "memory_mib")

_QUANTITY_RE = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)([A-Za-z]{0,2})$")
_SUFFIX = {
    "": 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
    "E": 1e18, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}


def parse_quantity(text: Any) -> float | None:
    """A Kubernetes quantity (``250m``, ``1.5``, ``512Mi``, ``1e3``) as a number; None when it is
    not one (or negative, or not finite)."""
    if not isinstance(text, str):
        return None
    m = _QUANTITY_RE.match(text.strip())
    if not m or m.group(2) not in _SUFFIX:
        return None
    try:
        value = float(m.group(1)) * _SUFFIX[m.group(2)]
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def pod_usage_rows(doc: Any) -> list[dict[str, Any]]:
    """A ``PodMetricsList`` (decoded JSON) -> one row per container: ``time`` (the sample's
    timestamp, as the API wrote it), ``pod``, ``container``, ``cpu_cores``, ``memory_mib``
    (None where a quantity is missing or unreadable). Anything else gives no rows."""
    items = doc.get("items") if isinstance(doc, dict) else None
    rows: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        meta = _dict(item.get("metadata"))
        pod = meta.get("name") if isinstance(meta.get("name"), str) else ""
        when = item.get("timestamp") if isinstance(item.get("timestamp"), str) else ""
        containers = item.get("containers")
        for c in containers if isinstance(containers, list) else []:
            if not isinstance(c, dict):
                continue
            use = _dict(c.get("usage"))
            mem = parse_quantity(use.get("memory"))
            rows.append({"time": when, "pod": pod,
                         "container": c.get("name") if isinstance(c.get("name"), str) else "",
                         "cpu_cores": parse_quantity(use.get("cpu")),
                         "memory_mib": None if mem is None else round(mem / 2**20, 1)})
    rows.sort(key=lambda r: (r["pod"], r["container"]))
    return rows


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def not_served_line(namespace: str, status: int) -> str:
    """The one line said when the resource metrics API cannot be read (``status``: the HTTP
    status of the attempt: 404 not served, 403 not allowed)."""
    if status == 403:
        return (f"pod CPU/memory: not allowed to read pods.metrics.k8s.io in namespace {namespace} "
                "(ask for get/list on it)")
    return ("pod CPU/memory: this cluster's API does not serve metrics.k8s.io (no metrics-server "
            "installed), so there is nothing to show")
