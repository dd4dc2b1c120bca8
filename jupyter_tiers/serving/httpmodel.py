"""Pure: one HTTP request to a service and its response, as plain data (Try it, ``svc.request``).

A request is validated here before anything is sent: a method from :data:`METHODS`, a path
(never a URL: the host is always the tier's own forward), headers as ``Name: value`` pairs and
a body given as JSON or as text/bytes. A response keeps its status, headers, body (bounded by
:data:`MAX_BODY`), time to first byte, total time and who answered (a response header naming
the pod or replica, else what the forward knows). No I/O: serve_http.py sends.
"""

from __future__ import annotations

import contextlib
import json as jsonlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import SpecError
from ..core.plaintext import printable

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
MAX_PATH = 8192
MAX_HEADERS = 64
MAX_BODY = 8 * 1024 * 1024  # bytes of a response body kept (the rest is read and dropped)
MAX_REQUEST_BODY = 8 * 1024 * 1024
MAX_SHOWN = 1_000_000  # characters of a body the Try it panel shows (the browser stays responsive)
#: Headers the client sets itself (the target is always the forward; lengths are computed).
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
#: Response headers that name the pod or replica that answered, first match wins.
ANSWER_HEADERS = ("x-served-by", "x-pod-name", "x-pod", "x-replica", "x-backend-server", "x-hostname")

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP header name (RFC 9110 token)
_PATH = re.compile(r"/[!-~]*")  # printable ASCII, no space: percent-encode the rest
_NO_JSON: Any = object()

Headers = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class HttpRequest:
    """A validated request: method, path (starting with one ``/``), headers and body bytes."""

    method: str
    path: str
    headers: Headers = ()
    body: bytes = b""


def make_request(method: str, path: str, *, json: Any = _NO_JSON, body: str | bytes | None = None,
                 headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None) -> HttpRequest:
    """Validate one request. ``json`` (any JSON value) and ``body`` (text or bytes) are
    exclusive; JSON sets ``Content-Type: application/json`` unless a header says otherwise.
    Raises SpecError naming the bad part and what is allowed."""
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise SpecError("method", f"one of {', '.join(METHODS)}, got {method!r}")
    method = method.upper()
    path = check_path(path)
    pairs = check_headers(headers)
    if json is not _NO_JSON and body is not None:
        raise SpecError("body", "give json= or body=, not both")
    data = b""
    if json is not _NO_JSON:
        try:
            data = jsonlib.dumps(json, ensure_ascii=False, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise SpecError("json", f"a JSON value (dict, list, str, number, bool, None): {exc}") from None
        if not any(name.lower() == "content-type" for name, _ in pairs):
            pairs += (("Content-Type", "application/json"),)
    elif isinstance(body, str):
        data = body.encode()
    elif isinstance(body, (bytes, bytearray)):
        data = bytes(body)
    elif body is not None:
        raise SpecError("body", f"text or bytes, got {type(body).__name__}")
    if len(data) > MAX_REQUEST_BODY:
        raise SpecError("body", f"at most {MAX_REQUEST_BODY} bytes, got {len(data)}")
    return HttpRequest(method, path, pairs, data)


def check_path(path: Any) -> str:
    """A request path: starts with one ``/`` (never ``//host`` or a URL), printable ASCII."""
    if not isinstance(path, str) or not path:
        raise SpecError("path", f"a path starting with '/', got {path!r}")
    if len(path) > MAX_PATH:
        raise SpecError("path", f"at most {MAX_PATH} characters, got {len(path)}")
    if not path.startswith("/") or path.startswith("//"):
        raise SpecError("path", f"a path starting with one '/' (no host or URL), got {path[:80]!r}")
    if not _PATH.fullmatch(path):
        raise SpecError("path", f"printable ASCII, no spaces (percent-encode the rest), got {path[:80]!r}")
    return path


def check_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> Headers:
    """Header pairs: token names, values without line breaks, no reserved names."""
    if headers is None:
        return ()
    if isinstance(headers, (str, bytes)):
        raise SpecError("headers", "a dict or (name, value) pairs; for 'Name: value' lines use parse_headers")
    if isinstance(headers, Mapping):
        items = list(headers.items())
    elif isinstance(headers, (list, tuple)):
        items = list(headers)
    else:
        raise SpecError("headers", f"a dict or (name, value) pairs, got {type(headers).__name__}")
    if len(items) > MAX_HEADERS:
        raise SpecError("headers", f"at most {MAX_HEADERS}, got {len(items)}")
    out: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise SpecError("headers", f"(name, value) pairs, got {item!r}"[:120])
        name, value = item
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            allowed = "letters, digits and !#$%&'*+-.^_`|~"
            raise SpecError("headers", f"a header name of {allowed}, got {name!r}"[:120])
        if name.lower() in RESERVED_HEADERS:
            raise SpecError("headers", f"{name} is set by the client; allowed: any other header")
        if not isinstance(value, str) or any(ch in value for ch in "\r\n\0"):
            raise SpecError("headers", f"{name}: a one-line text value, got {value!r}"[:120])
        out.append((name, value.strip()))
    return tuple(out)


def parse_headers(text: str) -> Headers:
    """``Name: value`` lines (blank lines skipped), as typed in the Try it panel."""
    if not isinstance(text, str):
        raise SpecError("headers", f"'Name: value' lines, got {type(text).__name__}")
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise SpecError("headers", f"line {number}: 'Name: value', got {line[:80]!r}")
        pairs.append((name.strip(), value.strip()))
    return check_headers(pairs)


@dataclass(frozen=True)
class HttpResponse:
    """What the service answered. ``ttfb`` (until the status line and headers) and ``total``
    (until the last body byte) are seconds from sending; ``answered_by`` names the pod or
    replica when a response header or the forward says so; ``truncated`` when the body was
    longer than :data:`MAX_BODY` (the rest was read and dropped)."""

    status: int
    reason: str
    headers: Headers
    body: bytes
    ttfb: float
    total: float
    answered_by: str | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 400

    @property
    def text(self) -> str:
        """The body decoded (UTF-8 unless the Content-Type names another charset; bad bytes replaced)."""
        return self.body.decode(charset(self.header("content-type")), errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON (ValueError if it is not JSON)."""
        return jsonlib.loads(self.text)

    def header(self, name: str) -> str | None:
        """The first header of that name (case-insensitive), or None."""
        low = name.lower()
        return next((v for k, v in self.headers if k.lower() == low), None)

    def __repr__(self) -> str:
        who = f" from {self.answered_by}" if self.answered_by else ""
        return (f"<HttpResponse {self.status} {self.reason}{who}: {len(self.body)} bytes, "
                f"ttfb {self.ttfb * 1000:.0f} ms, total {self.total * 1000:.0f} ms>")


def charset(content_type: str | None) -> str:
    """The charset a Content-Type names, if Python knows it; else UTF-8."""
    import codecs

    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "charset":
            name = value.strip().strip('"')
            try:
                return codecs.lookup(name).name
            except (LookupError, ValueError):
                break
    return "utf-8"


def answered_by(headers: Headers, fallback: str | None = None) -> str | None:
    """The pod or replica named by the first of :data:`ANSWER_HEADERS`, else ``fallback``."""
    index = {k.lower(): v for k, v in reversed(headers)}
    for name in ANSWER_HEADERS:
        value = index.get(name, "").strip()
        if value:
            return printable(value)[:253]
    return fallback


def is_json(content_type: str | None) -> bool:
    main = (content_type or "").split(";")[0].strip().lower()
    return main == "application/json" or main.endswith("+json")


def pretty_body(response: HttpResponse) -> str:
    """The body for a person: JSON indented when it parses as JSON, text otherwise. Control
    characters other than newlines and tabs are shown as ``?`` (never as escapes)."""
    text = response.text
    if is_json(response.header("content-type")) or text.lstrip()[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            text = jsonlib.dumps(jsonlib.loads(text), indent=2, ensure_ascii=False)
    return printable(text, keep="\n\t")


def view_of(response: HttpResponse) -> dict[str, Any]:
    """The response as the Try it panel shows it (plain JSON-able data, all text; a body longer
    than :data:`MAX_SHOWN` characters is cut there and ``shown_cut`` says so)."""
    body = pretty_body(response)
    return {
        "status": response.status,
        "reason": printable(response.reason)[:200],
        "headers": [[printable(k)[:200], printable(v)[:2000]] for k, v in response.headers],
        "body": body[:MAX_SHOWN],
        "shown_cut": len(body) > MAX_SHOWN,
        "truncated": response.truncated,
        "bytes": len(response.body),
        "ttfb_ms": round(response.ttfb * 1000, 1),
        "total_ms": round(response.total * 1000, 1),
        "answered_by": response.answered_by or "",
    }
