"""JSON patch (RFC 6902), JSON merge patch (RFC 7386) and a strategic-merge-patch subset."""

from __future__ import annotations

import copy
from typing import Any

from .apply import ATOMIC, _key_values
from .errors import ApiError

_MISSING = object()


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Like a merge patch, but lists of keyed items (containers, env, ports, ...) merge by key;
    ``{"$patch": "delete"}`` items remove, ``$patch: replace`` replaces."""
    if isinstance(patch, dict):
        if patch.get("$patch") == "replace":
            return {k: v for k, v in copy.deepcopy(patch).items() if k != "$patch"}
        if not isinstance(target, dict) or field in ATOMIC:
            target = {}
        out = copy.deepcopy(target)
        for k, v in patch.items():
            if k.startswith("$"):
                continue
            if v is None:
                out.pop(k, None)
            else:
                out[k] = strategic_merge_patch(out.get(k), v, k)
        return out
    if (
        isinstance(patch, list)
        and isinstance(target, list)
        and patch
        and field not in ATOMIC
        and all(isinstance(i, dict) and _key_values(field, i) is not None for i in patch)
        and all(isinstance(i, dict) and _key_values(field, i) is not None for i in target)
    ):
        out_list = copy.deepcopy(target)
        for item in patch:
            kv = _key_values(field, item)
            idx = next((i for i, x in enumerate(out_list) if _key_values(field, x) == kv), None)
            if item.get("$patch") == "delete":
                if idx is not None:
                    out_list.pop(idx)
            elif idx is None:
                out_list.append({k: v for k, v in item.items() if not k.startswith("$")})
            else:
                out_list[idx] = strategic_merge_patch(out_list[idx], item, "")
        return out_list
    return copy.deepcopy(patch)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(500, "", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str]) -> Any:
    node = doc
    for p in parts:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return _MISSING
    return node


def json_patch(doc: Any, ops: Any) -> Any:
    """Apply RFC 6902 operations; failures give the API server's 500/422-ish messages."""
    if not isinstance(ops, list):
        raise ApiError(
            400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    doc = copy.deepcopy(doc)
    for op in ops:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        if kind in ("move", "copy"):
            src = _resolve(doc, _pointer(op.get("from", "")))
            if src is _MISSING:
                raise ApiError(500, "", f"missing path {op.get('from')}")
            if kind == "move":
                doc = _remove(doc, _pointer(op["from"]))
            doc = _add(doc, parts, copy.deepcopy(src))
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, parts)
        elif kind == "replace":
            doc = _remove(doc, parts)
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "test":
            if _resolve(doc, parts) != op.get("value"):
                raise ApiError(500, "", "testing value failed")
        else:
            raise ApiError(500, "", f"Unexpected kind: {kind}")
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise ApiError(
                500, "", f'add operation does not apply: doc is missing path: "/{"/".join(parts)}"'
            )
    else:
        raise ApiError(500, "", f'add operation does not apply: doc is missing path: "/{"/".join(parts)}"')
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    parent = _resolve(doc, parts[:-1])
    last = parts[-1] if parts else ""
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        parent.pop(int(last))
    else:
        raise ApiError(500, "", f'remove operation does not apply: doc is missing path: "/{"/".join(parts)}"')
    return doc
