"""Server-side apply and ``metadata.managedFields`` bookkeeping (a pragmatic subset of
structured-merge-diff).

A *field set* is a set of paths; a path is a tuple of fieldsV1 elements such as
``("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"server"}', "f:image")``.  A path
ending in ``"."`` means "this list item exists".  Lists listed in :data:`LIST_KEYS` merge by key;
other lists, and the fields in :data:`ATOMIC`, are replaced whole and owned as one leaf.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .errors import ApiError
from .store import now_rfc3339

Obj = dict[str, Any]
Path = tuple[str, ...]

LIST_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "hostAliases": ("ip",),
}
# Fields whose whole value is owned as one leaf (atomic structs/maps in the real schema).
ATOMIC = {"selector", "nodeSelector", "command", "args", "matchLabels", "matchExpressions", "finalizers"}
_SKIP_METADATA = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
}
_MISSING = object()


def _list_key(field: str, item: Any) -> tuple[str, ...] | None:
    if not isinstance(item, dict):
        return None
    if field == "ports":
        return ("containerPort", "protocol") if "containerPort" in item else ("port", "protocol")
    return LIST_KEYS.get(field)


def _key_values(field: str, item: Obj) -> dict[str, Any] | None:
    keys = _list_key(field, item)
    if keys is None:
        return None
    out = {}
    for k in keys:
        if k == "protocol":
            out[k] = item.get(k) or "TCP"
        elif k in item:
            out[k] = item[k]
    return out


def _key_elem(kv: dict[str, Any]) -> str:
    return "k:" + json.dumps(kv, sort_keys=True, separators=(",", ":"))


def _is_keyed_list(field: str, value: Any) -> bool:
    return (
        isinstance(value, list)
        and field not in ATOMIC
        and bool(value)
        and all(_key_values(field, i) is not None for i in value)
    )


# ---------------------------------------------------------------------------- field sets
def field_paths(obj: Obj) -> set[Path]:
    """Leaf paths set by ``obj`` (status and server-owned metadata excluded)."""
    out: set[Path] = set()
    for k, v in obj.items():
        if k in ("apiVersion", "kind", "status"):
            continue
        if k == "metadata":
            for mk, mv in (v or {}).items():
                if mk not in _SKIP_METADATA:
                    _walk(mk, mv, ("f:metadata",), out)
            continue
        _walk(k, v, (), out)
    return out


def _walk(field: str, value: Any, prefix: Path, out: set[Path]) -> None:
    here = (*prefix, f"f:{field}")
    if isinstance(value, dict) and value and field not in ATOMIC:
        for k, v in value.items():
            _walk(k, v, here, out)
    elif _is_keyed_list(field, value):
        for item in value:
            ip = (*here, _key_elem(_key_values(field, item) or {}))
            out.add((*ip, "."))
            for k, v in item.items():
                _walk(k, v, ip, out)
    else:
        out.add(here)


def paths_from_fieldsv1(fv: Obj, prefix: Path = ()) -> set[Path]:
    """fieldsV1 dict -> set of leaf paths."""
    out: set[Path] = set()
    for k, sub in (fv or {}).items():
        if k == ".":
            out.add((*prefix, "."))
        elif not sub:
            out.add((*prefix, k))
        else:
            out |= paths_from_fieldsv1(sub, (*prefix, k))
    return out


def fieldsv1_from_paths(paths: set[Path]) -> Obj:
    """Set of leaf paths -> fieldsV1 dict (keys sorted like the API server)."""
    root: Obj = {}
    for p in paths:
        node = root
        for e in p:
            node = node.setdefault(e, {})
    return _sort(root)


def _sort(d: Obj) -> Obj:
    return {k: _sort(v) for k, v in sorted(d.items(), key=lambda kv: (kv[0] != ".", kv[0]))}


def get_path(obj: Any, path: Path) -> Any:
    """The value at ``path`` or the private ``_MISSING`` sentinel."""
    node = obj
    field = ""
    for e in path:
        if e == ".":
            return node
        if e.startswith("f:"):
            field = e[2:]
            if not isinstance(node, dict) or field not in node:
                return _MISSING
            node = node[field]
        elif e.startswith("k:"):
            want = json.loads(e[2:])
            if not isinstance(node, list):
                return _MISSING
            node = next((i for i in node if isinstance(i, dict) and _key_values(field, i) == want), _MISSING)
            if node is _MISSING:
                return _MISSING
        else:
            return _MISSING
    return node


def _remove_path(obj: Obj, path: Path) -> None:
    if path and path[-1] == ".":
        path = path[:-1]
    parent = get_path(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if parent is _MISSING:
        return
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        field = next((e[2:] for e in reversed(path[:-1]) if e.startswith("f:")), "")
        want = json.loads(last[2:])
        parent[:] = [i for i in parent if not (isinstance(i, dict) and _key_values(field, i) == want)]


def _is_key_field(path: Path) -> bool:
    """Whether ``path`` is a key field of a keyed list item (``k:{"mountPath":...}``, ``f:mountPath``)."""
    if len(path) < 2 or not path[-2].startswith("k:") or not path[-1].startswith("f:"):
        return False
    return path[-1][2:] in json.loads(path[-2][2:])


def path_string(path: Path) -> str:
    """``.spec.template.spec.containers[name="server"].image`` as structured-merge-diff prints it."""
    out = ""
    for e in path:
        if e.startswith("f:"):
            out += "." + e[2:]
        elif e.startswith("k:"):
            kv = json.loads(e[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in kv.items()) + "]"
    return out


def merge(live: Any, applied: Any, field: str = "") -> Any:
    """Merge an applied configuration into the live value (maps and keyed lists merge)."""
    if isinstance(applied, dict) and isinstance(live, dict) and field not in ATOMIC:
        out = copy.deepcopy(live)
        for k, v in applied.items():
            out[k] = merge(live.get(k, _MISSING), v, k)
        return out
    if _is_keyed_list(field, applied) and isinstance(live, list) and _is_keyed_list(field, live):
        out_list = copy.deepcopy(live)
        for item in applied:
            kv = _key_values(field, item)
            idx = next((i for i, x in enumerate(out_list) if _key_values(field, x) == kv), None)
            if idx is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[idx] = merge(out_list[idx], item, "")
        return out_list
    return copy.deepcopy(applied)


# ---------------------------------------------------------------------------- managedFields
def _entries(obj: Obj) -> list[Obj]:
    return copy.deepcopy((obj.get("metadata") or {}).get("managedFields") or [])


def manager_label(entry: Obj) -> str:
    """How a conflict message names a manager (k8s fieldmanager ``printManager``)."""
    s = json.dumps(entry["manager"])
    if entry.get("subresource"):
        s += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == "Update":
        s += f" using {entry.get('apiVersion', '')}"
        if entry.get("time"):
            s += f" at {entry['time']}"
    return s


def conflict_error(conflicts: list[tuple[Obj, Path]]) -> ApiError:
    """409 ``Apply failed with N conflict(s): ...`` with FieldManagerConflict causes."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {manager_label(e)}",
            "field": path_string(p),
        }
        for e, p in conflicts
    ]
    if len(conflicts) == 1:
        text = f"conflict with {manager_label(conflicts[0][0])}: {path_string(conflicts[0][1])}"
    else:
        by: dict[str, list[str]] = {}
        for e, p in conflicts:
            by.setdefault(manager_label(e), []).append(path_string(p))
        lines = []
        for m in sorted(by):
            lines.append(f"conflicts with {m}:")
            lines += [f"- {p}" for p in by[m]]
        text = "\n".join(lines)
    n = len(conflicts)
    return ApiError(
        409, "Conflict", f"Apply failed with {n} conflict{'s' if n > 1 else ''}: {text}", {"causes": causes}
    )


def server_side_apply(live: Obj | None, applied: Obj, manager: str, force: bool, api_version: str) -> Obj:
    """The object after ``manager`` applies ``applied`` onto ``live`` (None: create).

    Raises a 409 :class:`ApiError` for conflicts unless ``force``.  The result carries updated
    ``managedFields``; defaulting and validation are the caller's job."""
    new_set = field_paths(applied)
    if live is None:
        obj = copy.deepcopy(applied)
        entry = _entry(manager, "Apply", api_version, new_set, True)
        obj.setdefault("metadata", {})["managedFields"] = [entry]
        return obj
    entries = _entries(live)
    mine = next((e for e in entries if e["manager"] == manager and e["operation"] == "Apply"), None)
    old_set = paths_from_fieldsv1(mine["fieldsV1"]) if mine else set()
    conflicts: list[tuple[Obj, Path]] = []
    for e in entries:
        if e is mine:
            continue
        owned = paths_from_fieldsv1(e.get("fieldsV1") or {})
        for p in sorted(owned & new_set):
            if p[-1] == ".":
                continue
            if get_path(live, p) != get_path(applied, p):
                conflicts.append((e, p))
    if conflicts and not force:
        raise conflict_error(conflicts)
    for e, p in conflicts:
        owned = paths_from_fieldsv1(e["fieldsV1"]) - {p}
        e["fieldsV1"] = fieldsv1_from_paths(owned)
    others: set[Path] = set()
    for e in entries:
        if e is not mine:
            others |= paths_from_fieldsv1(e.get("fieldsV1") or {})
    obj = copy.deepcopy(live)
    # A list item no longer applied goes whole ("." paths first); its key fields are its identity,
    # never removed from an item that stays (else the item would linger without its key).
    for p in sorted(old_set - new_set - others, key=lambda p: (p[-1] != ".", -len(p), p)):
        if not _is_key_field(p):
            _remove_path(obj, p)
    body = {k: v for k, v in applied.items() if k not in ("status",)}
    obj = merge(obj, body)
    obj["metadata"] = {
        **obj.get("metadata", {}),
        **{k: v for k, v in live.get("metadata", {}).items() if k in _SKIP_METADATA},
    }
    entries = [e for e in entries if paths_from_fieldsv1(e.get("fieldsV1") or {}) or e is mine]
    if mine is None:
        mine = _entry(manager, "Apply", api_version, new_set, False)
        entries.insert(0, mine)
    else:
        mine["fieldsV1"] = fieldsv1_from_paths(new_set)
    obj["metadata"]["managedFields"] = entries
    return obj


def stamp_apply_time(old: Obj | None, new: Obj, manager: str) -> None:
    """Set the applier's ``time`` when the object content changed (the API server leaves it alone
    for a write that only changes ownership)."""
    if old is not None and strip_managed(old) == strip_managed(new):
        return
    for e in new["metadata"].get("managedFields") or []:
        if e["manager"] == manager and e["operation"] == "Apply":
            e["time"] = now_rfc3339()
            _order_entry(e)


def strip_managed(obj: Obj) -> Obj:
    """The object without managedFields/resourceVersion/generation (to compare content)."""
    o = copy.deepcopy(obj)
    md = o.get("metadata") or {}
    for k in ("managedFields", "resourceVersion", "generation"):
        md.pop(k, None)
    return o


def _entry(
    manager: str, op: str, api_version: str, paths: set[Path], timed: bool, subresource: str = ""
) -> Obj:
    e: Obj = {"manager": manager, "operation": op, "apiVersion": api_version}
    if timed:
        e["time"] = now_rfc3339()
    e["fieldsType"] = "FieldsV1"
    e["fieldsV1"] = fieldsv1_from_paths(paths)
    if subresource:
        e["subresource"] = subresource
    return e


def _order_entry(e: Obj) -> None:
    order = ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"]
    items = {k: e[k] for k in order if k in e}
    e.clear()
    e.update(items)


def record_update(old: Obj | None, new: Obj, manager: str, api_version: str, subresource: str = "") -> Obj:
    """Give ``manager`` (operation Update) ownership of every field ``new`` changed relative to
    ``old``; drop ownership of fields that no longer exist.  Returns ``new`` with managedFields."""
    entries = _entries(old) if old is not None else []
    new_paths = field_paths(new)
    changed = {
        p
        for p in new_paths
        if old is None
        or get_path(old, p) is _MISSING
        or (p[-1] != "." and get_path(old, p) != get_path(new, p))
    }
    kept: list[Obj] = []
    for e in entries:
        owned = {p for p in paths_from_fieldsv1(e.get("fieldsV1") or {}) if get_path(new, p) is not _MISSING}
        if not (
            e["manager"] == manager and e["operation"] == "Update" and e.get("subresource", "") == subresource
        ):
            owned -= changed
        if owned or (
            e["manager"] == manager
            and e["operation"] == "Update"
            and e.get("subresource", "") == subresource
            and changed
        ):
            e["fieldsV1"] = fieldsv1_from_paths(owned)
            kept.append(e)
    if changed:
        mine = next(
            (
                e
                for e in kept
                if e["manager"] == manager
                and e["operation"] == "Update"
                and e.get("subresource", "") == subresource
            ),
            None,
        )
        if mine is None:
            kept.append(_entry(manager, "Update", api_version, changed, not subresource, subresource))
        else:
            mine["fieldsV1"] = fieldsv1_from_paths(paths_from_fieldsv1(mine["fieldsV1"]) | changed)
            if not subresource:
                mine["time"] = now_rfc3339()
                _order_entry(mine)
    new = copy.deepcopy(new)
    md = new.setdefault("metadata", {})
    if kept:
        md["managedFields"] = kept
    else:
        md.pop("managedFields", None)
    return new
