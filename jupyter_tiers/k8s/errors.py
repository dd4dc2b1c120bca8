"""Kubernetes API errors -> one line a notebook user can act on (pure: no client import).

The API server answers a refused request with a ``Status`` body (see the golden transcripts 02, 07
and 10): ``message`` is already precise (which verb on which resource, which field and why), so it
is kept and only a hint is added saying what to do about it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_CONFLICT_MANAGER = re.compile(r'conflict with "([^"]*)"(?: with subresource "([^"]*)")?')
_INVALID_VALUE = re.compile(r"Invalid value: (.*?): (.*)", re.DOTALL)
_STATUS_JSON = re.compile(r'\{"kind":\s*"Status".*\}', re.DOTALL)
# The field path from its run's first dot (``spec.x.y: field ...`` -> ``.x.y``), tried once per run
# of path characters (a search from every dot in a long run of them was quadratic).
_UNKNOWN_FIELD = re.compile(r"(?<![\w.\[\]-])[\w\[\]-]*(\.[\w.\[\]-]+): field not declared in schema")
_MAX_LEN = 1000

PROFILE_HINT = "the profile's credentials lack this permission"


def _status_body(body: str | Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """(Status dict or {}, raw text) from whatever the client handed over."""
    if body is None:
        return {}, ""
    if isinstance(body, Mapping):
        return dict(body), ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    try:
        parsed = json.loads(text)
    except ValueError:
        match = _STATUS_JSON.search(text)  # e.g. a port-forward handshake error with the Status inside
        if match:
            try:
                parsed = json.loads(match.group(0))
            except ValueError:
                parsed = None
        else:
            parsed = None
    return (parsed if isinstance(parsed, dict) else {}), text.strip()


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_LEN else line[: _MAX_LEN - 1] + "…"


def _causes(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return [c for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []


def _what(status: Mapping[str, Any], resource: str | None) -> str:
    details = status.get("details") if isinstance(status.get("details"), Mapping) else {}
    assert isinstance(details, Mapping)
    kind, name = details.get("kind"), details.get("name")
    if kind and name:
        return f'{kind} "{name}"'
    return str(kind or resource or "object")


def _where(namespace: str | None) -> str:
    return f' in namespace "{namespace}"' if namespace else ""


def _conflict(status: Mapping[str, Any]) -> str | None:
    owners: dict[str, list[str]] = {}
    for cause in _causes(status):
        if cause.get("reason") != "FieldManagerConflict":
            continue
        match = _CONFLICT_MANAGER.search(str(cause.get("message", "")))
        owner = f'"{match.group(1)}"' if match else "another manager"
        if match and match.group(2):
            owner += f" (through the {match.group(2)} subresource)"
        owners.setdefault(owner, []).append(str(cause.get("field", "?")))
    if not owners:
        return None
    parts = [f"{', '.join(fields)} owned by {owner}" for owner, fields in owners.items()]
    return (
        "apply conflict: " + "; ".join(parts)
        + " — another tool changed these fields; re-apply with force to take them back, "
        "or leave them out of the manifest"
    )


def _invalid(status: Mapping[str, Any], message: str) -> str:
    details = status.get("details") if isinstance(status.get("details"), Mapping) else {}
    assert isinstance(details, Mapping)
    kind, name = details.get("kind"), details.get("name")
    subject = f'{kind} "{name}"' if kind and name else str(kind or "the object")
    reasons = []
    for cause in _causes(status):
        field = str(cause.get("field") or "?")
        text = str(cause.get("message") or "")
        match = _INVALID_VALUE.fullmatch(text)
        if match:
            text = f"{match.group(2)} (got {match.group(1)})"
        else:
            for prefix in ("Required value: ", "Forbidden: ", "Unsupported value: ", "Duplicate value: "):
                if text.startswith(prefix):
                    text = text[len(prefix):]
                    break
        reasons.append(f"{field}: {text}")
    if not reasons:
        return f"rejected as invalid: {message}" if message else f"{subject} was rejected as invalid"
    return f"{subject} rejected: " + "; ".join(reasons)


def api_error_message(
    status: int,
    body: str | Mapping[str, Any] | None,
    *,
    verb: str | None = None,
    resource: str | None = None,
    namespace: str | None = None,
) -> str:
    """One line for a failed Kubernetes API call.

    ``status`` is the HTTP status (0 when the server was not reached), ``body`` the response body
    as text (``ApiException.body``) or parsed, or ``None``. ``verb``, ``resource`` and
    ``namespace`` say what was attempted; they fill in when the body does not.
    """
    parsed, raw = _status_body(body)
    code = parsed.get("code") if isinstance(parsed.get("code"), int) else None
    if not status and code:
        status = code  # a Status carried inside a transport error (port-forward handshake)
    message = str(parsed.get("message") or "").strip()
    reason = str(parsed.get("reason") or "")
    attempted = " ".join(p for p in (verb, resource) if p) + _where(namespace)
    doing = f" while trying to {attempted.strip()}" if attempted.strip() else ""

    if status == 401:
        text = (
            f"401 Unauthorized{doing}: the cluster rejected the credentials — the token or certificate "
            "in the profile's kubeconfig is invalid or expired; log in again or refresh it"
        )
    elif status == 403:
        base = message or f"forbidden{doing}"
        if '"system:anonymous"' in base:
            hint = "no credentials were sent; check the profile's kubeconfig (user, token or certificate)"
        else:
            hint = (
                f"{PROFILE_HINT}; ask a cluster admin for a Role that grants it, "
                "or use a profile with another namespace or account"
            )
        text = f"403 Forbidden: {base} — {hint}"
    elif status == 404:
        details = parsed.get("details") if isinstance(parsed.get("details"), Mapping) else {}
        assert isinstance(details, Mapping)
        if details.get("kind") == "namespaces":
            ns = details.get("name") or namespace
            text = (
                f'404: namespace "{ns}" does not exist — create it '
                "(kubectl create namespace) or set the profile's namespace"
            )
        elif message:
            text = f"404 Not Found: {message}{_where(namespace)}"
        else:
            text = f"404 Not Found: {resource or 'object'}{_where(namespace)}"
    elif status == 409:
        conflict = _conflict(parsed)
        if conflict:
            text = f"409 {conflict}"
        elif reason == "AlreadyExists":
            text = f"409 Conflict: {message or _what(parsed, resource) + ' already exists'}"
        else:
            text = (
                f"409 Conflict: {message or 'the object changed meanwhile'}"
                " — it was changed by someone else meanwhile; try again"
            )
    elif status == 410:
        text = f"410 Gone: {message or 'the resource version is too old'} (list again to resume)"
    elif status == 422:
        text = f"422 Invalid: {_invalid(parsed, message)}"
    elif status == 400:
        text = f"400 Bad Request: {message or raw or 'the API server refused the request'}"
    elif status == 429:
        text = f"429 Too Many Requests: {message or 'the API server is throttling'}; try again shortly"
    elif status and status >= 500:
        if message and _UNKNOWN_FIELD.search(message):
            field = _UNKNOWN_FIELD.search(message)
            assert field is not None
            text = (
                f"{status}: unknown field {field.group(1)} ({message}) — "
                "check the patch option for a misspelt field"
            )
        elif "quantities must match" in message:
            text = (
                f"{status}: a resource quantity is malformed ({message}) — "
                "check cpu, memory and the patch option"
            )
        elif status in (502, 503, 504):
            said = message or raw or reason
            text = f"{status}: the API server is unavailable{doing}: {said} — try again shortly"
        else:
            text = f"{status} API server error{doing}: {message or raw or reason or 'no details'}"
    elif not status:
        detail = raw or "no answer"
        text = f"cannot reach the Kubernetes API server{doing}: {detail}"
    else:
        text = f"{status}{' ' + reason if reason else ''}: {message or raw or 'request failed'}{doing}"
    return _one_line(text)
