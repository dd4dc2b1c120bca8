"""Kubernetes ``Status`` failure bodies, raised as :class:`ApiError` anywhere in the emulator."""

from __future__ import annotations

from typing import Any


def qualified(resource: str, group: str) -> str:
    """``deployments`` + ``apps`` -> ``deployments.apps``; core resources stay bare."""
    return f"{resource}.{group}" if group else resource


class ApiError(Exception):
    """An API failure carrying the HTTP code and the Kubernetes ``Status`` body the server answers with."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.metadata = metadata or {}

    def body(self) -> dict[str, Any]:
        """The ``Status`` object as the real API server serialises it (empty reason/details omitted)."""
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.details is not None:
            out["details"] = self.details
        out["code"] = self.code
        return out


def not_found(resource: str, group: str, name: str) -> ApiError:
    """404 ``deployments.apps "web" not found``."""
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    return ApiError(404, "NotFound", f'{qualified(resource, group)} "{name}" not found', details)


def already_exists(resource: str, group: str, name: str) -> ApiError:
    """409 ``deployments.apps "web" already exists``."""
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    return ApiError(409, "AlreadyExists", f'{qualified(resource, group)} "{name}" already exists', details)


def conflict_modified(resource: str, group: str, name: str) -> ApiError:
    """409 for an update carrying a stale resourceVersion."""
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        details,
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid. ``causes`` are (reason, field, message-after-field) triples, e.g.
    ("FieldValueInvalid", "spec.replicas", "Invalid value: -1: must be greater than or equal to 0")."""
    qual = f"{kind}.{group}" if group else kind
    parts = [f"{field}: {msg}" for _r, field, msg in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": r, "message": m, "field": f} for r, f, m in causes]
    return ApiError(422, "Invalid", f'{qual} "{name}" is invalid: {joined}', details)


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    """410 Expired."""
    return ApiError(410, "Expired", message)


def unauthorized() -> ApiError:
    """401 exactly as golden 07 (no details)."""
    return ApiError(401, "Unauthorized", "Unauthorized")
