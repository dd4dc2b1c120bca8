"""The emulator's HTTP API server: real HTTP/1.1 (keep-alive, chunked watches and log follows)
speaking JSON to the official ``kubernetes`` client.

Hooks implemented elsewhere (the kubelet helper)
------------------------------------------------
* :class:`LogSource` (``ApiServer(log_source=...)``) serves ``GET .../pods/NAME/log``.  The server
  itself answers 404 for a missing pod and 403/401 for auth; everything else (container choice,
  waiting containers, tail/since/timestamps/limit) is the log source's job, raising
  :class:`~.errors.ApiError` for 400s.  ``read_log`` returning ``None`` gives HTTP 204.
* :data:`PortForwardHandler` (``ApiServer(portforward_handler=...)``) receives the
  ``BaseHTTPRequestHandler`` of a ``GET .../pods/NAME/portforward`` that asks for a WebSocket
  upgrade, after the server checked auth, that the pod exists (404) and has ``spec.nodeName``
  (400 ``pod NAME does not have a host assigned``).  The hook writes the ``101`` handshake itself
  (``handler.headers``, ``handler.wfile``/``handler.rfile``/``handler.connection``) and owns the
  socket until it returns; the server then closes the connection.  Without ``Upgrade`` the server
  answers 400 ``Upgrade request required``.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import copy
import json
import queue
import re
import socket
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import yaml

from . import discovery
from .admission import Defaulter, check_quantities, unknown_field, validate
from .apply import record_update, server_side_apply, stamp_apply_time, strip_managed
from .errors import ApiError, already_exists, bad_request, gone, not_found, qualified, unauthorized
from .patches import json_patch, merge_patch, strategic_merge_patch
from .store import RESOURCES, ResourceInfo, Store, now_rfc3339

Obj = dict[str, Any]


class LogSource(Protocol):
    """What the server needs from the kubelet to serve ``GET /api/v1/namespaces/NS/pods/NAME/log``.

    Implemented by ``kubelet.Kubelet.read_log``."""

    def read_log(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        follow: bool = False,
        previous: bool = False,
        tail_lines: int | None = None,
        since_seconds: int | None = None,
        since_time: str | None = None,
        timestamps: bool = False,
        limit_bytes: int | None = None,
    ) -> Iterator[bytes] | None:
        """``None``: HTTP 204 (pod not bound to a node).  Otherwise byte chunks of ``text/plain``;
        with ``follow`` the iterator blocks for new output and ends when the container instance ends.
        Raise :class:`ApiError` (400/404) before returning the iterator or at its first ``next``."""


PortForwardHandler = Callable[[BaseHTTPRequestHandler, str, str, list[int]], None]
"""``handler(http_handler, namespace, pod, ports)`` — see the module docstring."""


@dataclass
class User:
    """An authenticated identity.  ``namespace`` None + ``read_only`` False: cluster admin."""

    name: str
    read_only: bool = False
    namespace: str | None = None


_READ_VERBS = {"get", "list", "watch"}
_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
_RETURNS_OBJECT_ON_DELETE = {"services", "pods", "namespaces"}
_CONTINUE_TOO_OLD = " ".join(
    [
        "The provided continue parameter is too old to display a consistent list result.",
        "You can start a new list without the continue parameter, or use the continue token in this",
        "response to retrieve the remainder of the results. Continuing with the provided token results in",
        "an inconsistent list - objects that were created, modified, or deleted between the time the first",
        "chunk was returned and now may show up in the list.",
    ]
)
_ROOT_CA_DESCRIPTION = " ".join(
    [
        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints",
        "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across",
        "distributions of Kubernetes clusters.",
    ]
)
_SEND_INITIAL_EVENTS = (
    "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
)


# ---------------------------------------------------------------------------- selectors
_REQ = re.compile(
    r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9_.-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$"
)


def _split_selector(sel: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in sel:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def parse_label_selector(sel: str | None) -> Callable[[dict[str, str]], bool]:
    """A predicate over labels for a selector string (``a=b,c!=d,e in (x,y),f,!g``)."""
    if not sel:
        return lambda _labels: True
    reqs = []
    for part in _split_selector(sel):
        m = _REQ.match(part)
        if not m:
            raise bad_request(f"unable to parse requirement: {part!r}")
        neg, key, op, val, setop, vals = m.groups()
        reqs.append((neg, key, op, val, setop, [v.strip() for v in (vals or "").split(",") if v.strip()]))

    def pred(labels: dict[str, str]) -> bool:
        for neg, key, op, val, setop, vals in reqs:
            has = key in labels
            if op in ("=", "=="):
                ok = labels.get(key) == val
            elif op == "!=":
                ok = labels.get(key) != val
            elif setop == "in":
                ok = labels.get(key) in vals
            elif setop == "notin":
                ok = labels.get(key) not in vals
            else:
                ok = not has if neg else has
            if not ok:
                return False
        return True

    return pred


def parse_field_selector(sel: str | None) -> Callable[[Obj], bool]:
    """A predicate for ``metadata.name=x,involvedObject.name=y,status.phase!=Running`` style selectors."""
    if not sel:
        return lambda _o: True
    reqs = []
    for part in sel.split(","):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f"invalid selector: '{sel}'; can't understand '{part}'")
        reqs.append(m.groups())

    def value(o: Obj, path: str) -> str:
        node: Any = o
        for p in path.split("."):
            node = node.get(p) if isinstance(node, dict) else None
        return "" if node is None else str(node)

    return lambda o: all((value(o, p) == v) == (op != "!=") for p, op, v in reqs)


# ---------------------------------------------------------------------------- routing
@dataclass
class Route:
    """A parsed API path."""

    info: ResourceInfo | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    discovery: Obj | None = None


def _strip_list_item(o: Obj) -> Obj:
    return {k: v for k, v in o.items() if k not in ("kind", "apiVersion")}


def _encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00"}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(raw["rv"]), str(raw["start"]).rstrip("\x00")
    except Exception:
        raise bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ) from None


class ApiServer:
    """The HTTP API over a :class:`Store`.

    ``tokens`` maps bearer tokens to :class:`User`; requests with an unknown token get 401, requests
    without one are ``system:anonymous`` (discovery only, 403 otherwise)."""

    def __init__(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        bookmark_interval: float = 60.0,
        default_watch_timeout: float = 1800.0,
        log_source: LogSource | None = None,
        portforward_handler: PortForwardHandler | None = None,
        root_ca_configmap: bool = True,
    ) -> None:
        self.store = store
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        # Seconds each watch event waits before it is sent: a watch lagging behind the writes, as
        # a loaded real API server's can (tests of a client's read-after-write set it, then reset).
        self.watch_event_delay = 0.0
        self.log_source = log_source
        self.portforward_handler = portforward_handler
        self.root_ca_configmap = root_ca_configmap
        self.tokens: dict[str, User] = {}
        self.defaulter = Defaulter(store)
        self.stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        # Requests served, by (method, path kind, watch): the path kind is "pods" (a collection),
        # "pods/{name}", "pods/{name}/log" or "discovery"; watch is a watch=true list or a
        # follow=true subresource read (a log stream).
        self.request_counts: collections.Counter[tuple[str, str, bool]] = collections.Counter()
        # The same, per namespace (namespaced paths only): a test's window is not disturbed by
        # another test's threads still at work in its own namespace.
        self.namespace_counts: dict[str, collections.Counter[tuple[str, str, bool]]] = {}
        self._count_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> str:
        """Serve in a background thread; returns the base URL."""
        server = self

        class Handler(_Handler):
            api = server

        httpd = _HTTPServer((self.host, self.port), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="k8s-emulator-http", daemon=True
        )
        self._thread.start()
        return self.url

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        """Stop serving, end open watches/log streams and close client connections."""
        self.stopping.set()
        self.store.close_watchers()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._conns_lock:
            for c in list(self._conns):
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def count_request(self, method: str, path: str, query: dict[str, str]) -> None:
        """Count one request in :attr:`request_counts` (benchmarks read it)."""
        parts = [p for p in path.strip("/").split("/") if p]
        rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else []
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        kind = "/".join(rest[:1] + ["{name}"] * (len(rest) > 1) + rest[2:3]) if rest else "discovery"
        flag = "watch" if len(rest) == 1 else "follow"
        watch = method == "GET" and len(rest) != 2 and _parse_bool(query.get(flag))
        with self._count_lock:
            self.request_counts[(method, kind, watch)] += 1
            if namespace is not None:
                self.namespace_counts.setdefault(namespace, collections.Counter())[(method, kind, watch)] += 1

    def requests_snapshot(self, namespace: str | None = None) -> collections.Counter[tuple[str, str, bool]]:
        """A copy of :attr:`request_counts`, or of one namespace's counts (subtract two snapshots
        to count a window)."""
        with self._count_lock:
            counts = self.request_counts if namespace is None else self.namespace_counts.get(namespace)
            return collections.Counter(counts or {})

    def add_token(self, token: str, user: User) -> None:
        """Accept ``token`` as ``user``."""
        self.tokens[token] = user

    # ------------------------------------------------------------------ helpers used by the handler
    @staticmethod
    def may(user: User, verb: str, plural: str, namespace: str | None, subresource: str | None) -> bool:
        """Whether ``user`` may do ``verb`` on ``plural[/subresource]``: an admin anything; a viewer
        (the built-in ``view`` ClusterRole bound in its namespace) get/list/watch there, except
        secrets and subresources other than log/status/scale (so not pods/portforward)."""
        if not user.read_only and user.namespace is None and user.name != "system:anonymous":
            return True
        return (
            user.name != "system:anonymous"
            and verb in _READ_VERBS
            and plural != "secrets"
            and subresource in (None, "log", "status", "scale")
            and namespace is not None
            and namespace == user.namespace
        )

    def access_review(self, user: User, body: Any) -> Obj:
        """A SelfSubjectAccessReview answered as the real API does (k8s-golden/13d): the spec
        echoed with an empty group left out, ``status.allowed``, and for a viewer's allowed
        request the RBAC reason."""
        spec = body.get("spec") if isinstance(body, dict) else None
        attrs = spec.get("resourceAttributes") if isinstance(spec, dict) else None
        if not isinstance(attrs, dict) or not attrs.get("verb") or not attrs.get("resource"):
            raise ApiError(400, "BadRequest", 'SelfSubjectAccessReview in version "v1" cannot be handled '
                           "as a SelfSubjectAccessReview: spec.resourceAttributes.verb and resource "
                           "are required")
        echoed = {k: str(v) for k, v in attrs.items() if v not in ("", None)}
        allowed = self.may(user, str(attrs["verb"]), str(attrs["resource"]), attrs.get("namespace") or None,
                           attrs.get("subresource") or None)
        status: Obj = {"allowed": allowed}
        if allowed and user.read_only:
            sa = user.name.rsplit(":", 1)[-1]
            status["reason"] = (f'RBAC: allowed by RoleBinding "{sa}/{user.namespace}" of ClusterRole '
                                f'"view" to ServiceAccount "{sa}/{user.namespace}"')
        return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "spec": {"resourceAttributes": echoed},
                "status": status}

    def authorize(
        self,
        user: User,
        verb: str,
        info: ResourceInfo,
        namespace: str | None,
        name: str | None,
        subresource: str | None,
    ) -> None:
        """403 in the API server's words unless ``user`` may do ``verb``."""
        if self.may(user, verb, info.plural, namespace, subresource):
            return
        res = info.plural + (f"/{subresource}" if subresource else "")
        where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        qual = qualified(info.plural, info.group)
        subject = f'{qual} "{name}"' if name else qual
        details: Obj = {}
        if name:
            details["name"] = name
        if info.group:
            details["group"] = info.group
        details["kind"] = info.plural
        raise ApiError(
            403,
            "Forbidden",
            f'{subject} is forbidden: User "{user.name}" cannot {verb} resource "{res}" '
            f'in API group "{info.group}" {where}',
            details,
        )

    def after_namespace_created(self, ns: str) -> None:
        """What the real control plane adds to every new namespace."""
        if self.root_ca_configmap and self.store.get("configmaps", ns, "kube-root-ca.crt") is None:
            with contextlib.suppress(ApiError):
                self.store.create(
                    "configmaps",
                    {
                        "metadata": {
                            "name": "kube-root-ca.crt",
                            "namespace": ns,
                            "annotations": {"kubernetes.io/description": _ROOT_CA_DESCRIPTION},
                        },
                        "data": {
                            "ca.crt": "-----BEGIN CERTIFICATE-----\nemulator\n-----END CERTIFICATE-----\n"
                        },
                    },
                )
        if self.store.get("serviceaccounts", ns, "default") is None:
            with contextlib.suppress(ApiError):
                self.store.create("serviceaccounts", {"metadata": {"name": "default", "namespace": ns}})


def _parse_bool(v: str | None) -> bool:
    return (v or "").lower() in ("true", "1")


def _int_or_none(v: str | None) -> int | None:
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise bad_request(f"invalid integer: {v!r}") from None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "k8s-emulator"
    api: ApiServer  # set by ApiServer.start

    # ------------------------------------------------------------------ plumbing
    def setup(self) -> None:
        super().setup()
        with self.api._conns_lock:
            self.api._conns.add(self.connection)

    def finish(self) -> None:
        with self.api._conns_lock:
            self.api._conns.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode() + b"\n"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self, err: ApiError) -> None:
        self._send_json(err.code, err.body())

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def _end_chunked(self) -> None:
        with contextlib.suppress(OSError):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _read_body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _json_body(self, raw: bytes) -> Any:
        try:
            return json.loads(raw or b"null")
        except ValueError as e:
            raise bad_request(f"couldn't get version/kind; json parse error: {e}") from None

    def _user(self) -> User:
        auth = self.headers.get("Authorization") or ""
        if not auth:
            return User("system:anonymous", read_only=True)
        if not auth.startswith("Bearer "):
            raise unauthorized()
        user = self.api.tokens.get(auth[len("Bearer ") :].strip())
        if user is None:
            raise unauthorized()
        return user

    def _manager(self, query: dict[str, str]) -> str:
        if query.get("fieldManager"):
            return query["fieldManager"]
        ua = self.headers.get("User-Agent") or "unknown"
        return ua.split("/")[0]

    # ------------------------------------------------------------------ dispatch
    def _dispatch(self, method: str) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query, keep_blank_values=True).items()}
        raw = b"" if method in ("GET",) else self._read_body()
        self.api.count_request(method, parsed.path, query)
        try:
            user = self._user()
            if parsed.path.rstrip("/") == _ACCESS_REVIEWS and method == "POST":
                self._send_json(201, self.api.access_review(user, self._json_body(raw)))
                return
            route = self._route(parsed.path)
            if route.discovery is not None:
                if method != "GET":
                    raise ApiError(
                        405,
                        "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                    )
                self._send_json(200, route.discovery)
                return
            self._handle(method, route, query, raw, user)
        except ApiError as e:
            with contextlib.suppress(OSError):
                self._send_error(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # a bug in the emulator: answer 500 rather than hang the client
            with contextlib.suppress(OSError):
                self._send_error(ApiError(500, "InternalError", f"emulator error: {type(e).__name__}: {e}"))
            raise

    def _route(self, path: str) -> Route:
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
        host = f"{self.api.host}:{self.api.port}"
        if parts == ["version"]:
            return Route(discovery=discovery.VERSION)
        if parts == ["api"]:
            return Route(discovery=discovery.api_versions(host))
        if parts == ["apis"]:
            return Route(discovery=discovery.api_group_list())
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            if len(parts) == 2:
                g = discovery.api_group(parts[1])
                if g is None:
                    raise _page_not_found()
                return Route(discovery=g)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _page_not_found()
        if not rest:
            rl = discovery.resource_list(group, version)
            if rl is None:
                raise _page_not_found()
            return Route(discovery=rl)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        info = RESOURCES.get(plural)
        if info is None or (info.group, info.version) != (group, version):
            raise _page_not_found()
        if namespace is not None and not info.namespaced:
            raise _page_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if len(rest) > 3:
            raise _page_not_found()
        return Route(info=info, namespace=namespace, name=name, subresource=sub)

    def _handle(self, method: str, r: Route, q: dict[str, str], raw: bytes, user: User) -> None:
        info = r.info
        assert info is not None
        if info.namespaced and r.namespace is None and (r.name is not None or method != "GET"):
            raise _page_not_found()
        watching = method == "GET" and r.name is None and _parse_bool(q.get("watch"))
        verb = {
            "GET": "watch" if watching else ("get" if r.name else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete",
        }[method]
        if r.subresource == "portforward" and method == "GET":
            verb = "get"
        if r.subresource in ("token", "eviction") and method == "POST":
            verb = "create"
        self.api.authorize(user, verb, info, r.namespace, r.name, r.subresource)
        dry_run = _dry_run(method, q)
        if dry_run and not (
            (method == "POST" and (r.name is None or r.subresource == "eviction"))
            or (method == "PATCH" and not r.subresource
                and (self.headers.get("Content-Type") or "").startswith("application/apply-patch+yaml"))
        ):
            raise bad_request("the emulator supports dryRun=All only on create (POST) and server-side apply")
        if method == "GET" and r.name is None:
            if watching:
                self._watch(info, r.namespace, q)
            else:
                self._list(info, r.namespace, q)
        elif method == "GET":
            self._get(info, r, q)
        elif method == "POST" and r.name is None:
            self._create(info, r.namespace, q, raw)
        elif method == "POST" and r.subresource == "token":
            self._token_request(info, r, raw)
        elif method == "POST" and r.subresource == "eviction" and info.plural == "pods":
            self._evict(r, q, raw, dry_run)
        elif method == "PUT" and r.name is not None:
            self._replace(info, r, q, raw)
        elif method == "PATCH" and r.name is not None:
            self._patch(info, r, q, raw)
        elif method == "DELETE" and r.name is not None:
            self._delete(info, r, q, raw)
        else:
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )

    # ------------------------------------------------------------------ reads
    def _missing(self, info: ResourceInfo, r: Route) -> ApiError:
        if r.subresource in ("scale", "status"):
            e = not_found(f"{info.plural}/{r.subresource}", info.group, r.name or "")
            return e
        return not_found(info.plural, info.group, r.name or "")

    def _get(self, info: ResourceInfo, r: Route, q: dict[str, str]) -> None:
        store = self.api.store
        obj = store.get(info.plural, r.namespace, r.name or "")
        if r.subresource == "log" and info.plural == "pods":
            if obj is None:
                raise not_found("pods", "", r.name or "")
            self._log(r.namespace or "", r.name or "", q)
            return
        if r.subresource == "portforward" and info.plural == "pods":
            self._portforward(obj, r, q)
            return
        if obj is None:
            raise self._missing(info, r)
        if r.subresource == "scale" and info.plural in ("deployments", "replicasets"):
            self._send_json(200, _scale_of(obj))
        elif r.subresource in (None, "status"):
            self._send_json(200, obj)
        else:
            raise _page_not_found()

    def _list(self, info: ResourceInfo, namespace: str | None, q: dict[str, str]) -> None:
        store = self.api.store
        rv_param, match = q.get("resourceVersion"), q.get("resourceVersionMatch")
        if match == "Exact" and rv_param and int(rv_param) < store.oldest_resource_version:
            raise gone("The resourceVersion for the provided list is too old.")
        labels = parse_label_selector(q.get("labelSelector"))
        fields = parse_field_selector(q.get("fieldSelector"))
        with store.lock:
            list_rv = store.resource_version
            items = store.list(
                info.plural,
                namespace,
                predicate=lambda o: labels(o["metadata"].get("labels") or {}) and fields(o),
            )
        limit = _int_or_none(q.get("limit")) or 0
        cont = q.get("continue")
        meta: Obj = {"resourceVersion": str(list_rv)}
        if cont:
            tok_rv, start = _decode_continue(cont)
            if tok_rv != -1 and tok_rv < store.oldest_resource_version:
                raise ApiError(
                    410, "Expired", _CONTINUE_TOO_OLD, metadata={"continue": _encode_continue(-1, start)}
                )
            items = [o for o in items if _sort_key(o) > start]
            if tok_rv > 0:
                meta["resourceVersion"] = str(tok_rv)
        if limit and len(items) > limit:
            rest = len(items) - limit
            items = items[:limit]
            meta["continue"] = _encode_continue(int(meta["resourceVersion"]), _sort_key(items[-1]))
            meta["remainingItemCount"] = rest
        self._send_json(
            200,
            {
                "kind": f"{info.kind}List",
                "apiVersion": info.api_version,
                "metadata": meta,
                "items": [_strip_list_item(o) for o in items],
            },
        )

    def _watch(self, info: ResourceInfo, namespace: str | None, q: dict[str, str]) -> None:
        api, store = self.api, self.api.store
        if _parse_bool(q.get("sendInitialEvents")):
            msg = _SEND_INITIAL_EVENTS
            raise ApiError(
                422,
                "Invalid",
                f'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: {msg}',
                {
                    "group": "meta.k8s.io",
                    "kind": "ListOptions",
                    "causes": [
                        {"reason": "FieldValueForbidden", "message": msg, "field": "sendInitialEvents"}
                    ],
                },
            )
        labels = parse_label_selector(q.get("labelSelector"))
        fields = parse_field_selector(q.get("fieldSelector"))
        timeout = _int_or_none(q.get("timeoutSeconds"))
        duration = float(timeout) if timeout is not None else api.default_watch_timeout
        bookmarks = _parse_bool(q.get("allowWatchBookmarks"))
        try:
            watcher, backlog = store.watch(info.plural, namespace, q.get("resourceVersion"))
        except ApiError as e:
            if e.code != 410:
                raise
            self._start_chunked("application/json")
            with contextlib.suppress(OSError):
                self._chunk(json.dumps({"type": "ERROR", "object": e.body()}).encode() + b"\n")
            self._end_chunked()
            return
        start = time.monotonic()
        deadline = start + duration
        next_bookmark = start + api.bookmark_interval
        final_bookmark = deadline - min(1.5, duration / 5) if bookmarks and duration >= 3 else None

        def send(etype: str, obj: Obj) -> None:
            self._chunk(json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n")

        def bookmark() -> None:
            send(
                "BOOKMARK",
                {
                    "kind": info.kind,
                    "apiVersion": info.api_version,
                    "metadata": {"resourceVersion": str(store.resource_version), "creationTimestamp": None},
                },
            )

        try:
            self._start_chunked("application/json")
            for etype, obj in backlog:
                if labels(obj["metadata"].get("labels") or {}) and fields(obj):
                    send(etype, obj)
            while not api.stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                wake = deadline
                if bookmarks:
                    wake = min(wake, next_bookmark, final_bookmark or deadline)
                try:
                    item = watcher.queue.get(timeout=max(0.0, min(wake - now, 1.0)))
                except queue.Empty:
                    now = time.monotonic()
                    if bookmarks and now >= next_bookmark:
                        bookmark()
                        next_bookmark = now + api.bookmark_interval
                    elif bookmarks and final_bookmark is not None and now >= final_bookmark:
                        bookmark()
                        final_bookmark = None
                    continue
                if item is None:
                    break
                etype, obj = item
                if api.watch_event_delay:
                    time.sleep(api.watch_event_delay)
                if labels(obj["metadata"].get("labels") or {}) and fields(obj):
                    send(etype, obj)
            self._end_chunked()
        except OSError:
            self.close_connection = True
        finally:
            watcher.close()

    # ------------------------------------------------------------------ logs and port-forward
    def _log(self, namespace: str, pod: str, q: dict[str, str]) -> None:
        src = self.api.log_source
        chunks = None
        if src is not None:
            chunks = src.read_log(
                namespace,
                pod,
                container=q.get("container") or None,
                follow=_parse_bool(q.get("follow")),
                previous=_parse_bool(q.get("previous")),
                tail_lines=_int_or_none(q.get("tailLines")),
                since_seconds=_int_or_none(q.get("sinceSeconds")),
                since_time=q.get("sinceTime") or None,
                timestamps=_parse_bool(q.get("timestamps")),
                limit_bytes=_int_or_none(q.get("limitBytes")),
            )
        if chunks is None:
            self.send_response(204)
            self.end_headers()
            return
        it = iter(chunks)
        first = next(it, None)  # errors surface here, before any header is written
        self._start_chunked("text/plain")
        try:
            if first:
                self._chunk(first)
            for data in it:
                if self.api.stopping.is_set():
                    break
                self._chunk(data)
            self._end_chunked()
        except OSError:
            self.close_connection = True
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    def _portforward(self, pod: Obj | None, r: Route, q: dict[str, str]) -> None:
        if pod is None:
            raise not_found("pods", "", r.name or "")
        if "upgrade" not in (self.headers.get("Connection") or "").lower() and not self.headers.get(
            "Upgrade"
        ):
            raise bad_request("Upgrade request required")
        if not (pod.get("spec") or {}).get("nodeName"):
            raise bad_request(f"pod {r.name} does not have a host assigned")
        if self.api.portforward_handler is None:
            raise ApiError(500, "InternalError", "port-forward is not available in this emulator")
        ports = []
        for p in urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("ports", []):
            for part in p.split(","):
                if part.strip():
                    ports.append(int(part))
        self.close_connection = True
        self.api.portforward_handler(self, r.namespace or "", r.name or "", ports)

    # ------------------------------------------------------------------ writes
    def _prepare(self, info: ResourceInfo, obj: Obj, old: Obj | None) -> None:
        self.api.defaulter.apply(info.plural, obj, old)
        validate(info.plural, obj)

    def _create(self, info: ResourceInfo, namespace: str | None, q: dict[str, str], raw: bytes) -> None:
        obj = self._json_body(raw)
        if not isinstance(obj, dict):
            raise bad_request("Object 'Kind' is missing in 'null'")
        md = obj.setdefault("metadata", {})
        if info.namespaced:
            if md.get("namespace") and md["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            md["namespace"] = namespace
            if namespace and self.api.store.get("namespaces", None, namespace) is None:
                raise not_found("namespaces", "", namespace)
        if not md.get("name") and md.get("generateName"):
            from .store import _random_suffix

            md["name"] = md["generateName"] + _random_suffix()
        obj["kind"], obj["apiVersion"] = info.kind, info.api_version
        if info.plural != "pods" or not obj.get("status"):
            obj.pop("status", None) if info.plural not in ("pods", "events") else None
        self._prepare(info, obj, None)
        obj = record_update(None, obj, self._manager(q), info.api_version)
        if _dry_run("POST", q):
            if self.api.store.get(info.plural, namespace, md.get("name") or "") is not None:
                raise already_exists(info.plural, info.group, md.get("name") or "")
            self._send_json(201, _as_if_created(info, obj))
            return
        created = self.api.store.create(info.plural, obj)
        if info.plural == "namespaces":
            self.api.after_namespace_created(created["metadata"]["name"])
        self._send_json(201, created)

    def _token_request(self, info: ResourceInfo, r: Route, raw: bytes) -> None:
        if info.plural != "serviceaccounts":
            raise _page_not_found()
        sa = self.api.store.get("serviceaccounts", r.namespace, r.name or "")
        if sa is None:
            raise not_found("serviceaccounts", "", r.name or "")
        body = self._json_body(raw) or {}
        exp = int(((body.get("spec") or {}).get("expirationSeconds")) or 3600)
        import secrets as _s

        token = "emu-sa-" + _s.token_urlsafe(24)
        self.api.add_token(
            token,
            User(f"system:serviceaccount:{r.namespace}:{r.name}", read_only=True, namespace=r.namespace),
        )
        self._send_json(
            201,
            {
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": r.name, "namespace": r.namespace, "creationTimestamp": now_rfc3339()},
                "spec": {
                    "audiences": ["https://kubernetes.default.svc.cluster.local"],
                    "expirationSeconds": exp,
                    "boundObjectRef": None,
                },
                "status": {"token": token, "expirationTimestamp": now_rfc3339(exp)},
            },
        )

    def _replace(self, info: ResourceInfo, r: Route, q: dict[str, str], raw: bytes) -> None:
        store = self.api.store
        body = self._json_body(raw)
        if not isinstance(body, dict):
            raise bad_request("Object 'Kind' is missing in 'null'")
        with store.lock:
            old = store.get(info.plural, r.namespace, r.name or "")
            if old is None:
                raise self._missing(info, r)
            if r.subresource == "scale":
                new = dict(old)
                new["spec"] = {**old.get("spec", {}), "replicas": (body.get("spec") or {}).get("replicas", 0)}
                self._write_update(info, old, new, q, subresource="scale")
                self._send_json(200, _scale_of(store.get(info.plural, r.namespace, r.name or "") or new))
                return
            md = body.setdefault("metadata", {})
            if md.get("name") and md["name"] != r.name:
                raise bad_request(
                    f"the name of the object ({md['name']}) does not match the name on the URL ({r.name})"
                )
            md["name"] = r.name
            if info.namespaced:
                md["namespace"] = r.namespace
            if r.subresource == "status":
                new = dict(old)
                new["status"] = body.get("status", {})
                new["metadata"] = {
                    **old["metadata"],
                    "resourceVersion": md.get("resourceVersion", old["metadata"]["resourceVersion"]),
                }
            else:
                new = body
                if info.plural not in ("configmaps", "secrets", "events", "endpoints", "serviceaccounts"):
                    new["status"] = old.get("status", {})
                new.setdefault("metadata", {}).setdefault(
                    "managedFields", old["metadata"].get("managedFields")
                )
                if new["metadata"].get("managedFields") is None:
                    new["metadata"].pop("managedFields")
            result = self._write_update(info, old, new, q, subresource=r.subresource or "", check_rv=True)
        self._send_json(200, result)

    def _write_update(
        self,
        info: ResourceInfo,
        old: Obj,
        new: Obj,
        q: dict[str, str],
        subresource: str = "",
        check_rv: bool = False,
    ) -> Obj:
        new["kind"], new["apiVersion"] = info.kind, info.api_version
        if subresource != "status":
            self._prepare(info, new, old)
        if strip_managed(new) == strip_managed(old):
            return old
        new = record_update(
            old,
            new,
            self._manager(q),
            info.api_version,
            subresource if subresource in ("scale", "status") else "",
        )
        return self.api.store.update(info.plural, new, check_resource_version=check_rv)

    def _patch(self, info: ResourceInfo, r: Route, q: dict[str, str], raw: bytes) -> None:
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        store = self.api.store
        if ctype == "application/apply-patch+yaml":
            self._apply(info, r, q, raw)
            return
        try:
            patch = json.loads(raw or b"null")
        except ValueError as e:
            raise bad_request(f"error decoding patch: {e}") from None
        with store.lock:
            old = store.get(info.plural, r.namespace, r.name or "")
            if old is None:
                raise self._missing(info, r)
            if r.subresource == "scale":
                if info.plural not in ("deployments", "replicasets"):
                    raise _page_not_found()
                scale = _apply_patch(ctype, _scale_of(old), patch)
                replicas = (scale.get("spec") or {}).get("replicas", 0)
                new = json.loads(json.dumps(old))
                new["spec"]["replicas"] = replicas
                if isinstance(replicas, int) and replicas < 0:
                    from .errors import invalid

                    raise invalid(
                        "Scale",
                        "autoscaling",
                        r.name or "",
                        [
                            (
                                "FieldValueInvalid",
                                "spec.replicas",
                                f"Invalid value: {replicas}: must be greater than or equal to 0",
                            )
                        ],
                    )
                result = self._write_update(info, old, new, q, subresource="scale")
                self._send_json(200, _scale_of(result))
                return
            new = _apply_patch(ctype, old, patch)
            if not isinstance(new, dict):
                raise bad_request("patched object is not an object")
            new.setdefault("metadata", {})
            new["metadata"]["name"], new["metadata"]["uid"] = old["metadata"]["name"], old["metadata"]["uid"]
            if info.namespaced:
                new["metadata"]["namespace"] = old["metadata"]["namespace"]
            if r.subresource == "status":
                status = new.get("status", {})
                new = json.loads(json.dumps(old))
                new["status"] = status
            elif info.plural not in ("configmaps", "secrets", "events", "endpoints", "serviceaccounts"):
                new["status"] = old.get("status", {})
            result = self._write_update(
                info,
                old,
                new,
                q,
                subresource=r.subresource or "",
                check_rv=bool((patch or {}).get("metadata", {}).get("resourceVersion"))
                if isinstance(patch, dict)
                else False,
            )
        self._send_json(200, result)

    def _apply(self, info: ResourceInfo, r: Route, q: dict[str, str], raw: bytes) -> None:
        store = self.api.store
        manager = q.get("fieldManager")
        if not manager:
            msg = "Required value: is required for apply patch"
            raise ApiError(
                422,
                "Invalid",
                f'PatchOptions.meta.k8s.io "" is invalid: fieldManager: {msg}',
                {
                    "group": "meta.k8s.io",
                    "kind": "PatchOptions",
                    "causes": [{"reason": "FieldValueRequired", "message": msg, "field": "fieldManager"}],
                },
            )
        try:
            applied = yaml.safe_load(raw.decode() or "null")
        except yaml.YAMLError as e:
            raise bad_request(f"error decoding YAML: {e}") from None
        if not isinstance(applied, dict) or not applied.get("apiVersion") or not applied.get("kind"):
            av = applied.get("apiVersion", "") if isinstance(applied, dict) else ""
            kind = applied.get("kind", "") if isinstance(applied, dict) else ""
            g, _, v = av.rpartition("/")
            raise bad_request(f"invalid object type: {g}/{v}, Kind={kind}")
        if r.subresource:
            raise bad_request(f"server-side apply is not supported by the emulator on /{r.subresource}")
        md = applied.setdefault("metadata", {})
        if md.get("name") and md["name"] != r.name:
            raise bad_request(
                f"the name of the object ({md['name']}) does not match the name on the URL ({r.name})"
            )
        md["name"] = r.name
        if info.namespaced:
            if md.get("namespace") and md["namespace"] != r.namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            md["namespace"] = r.namespace
        bad = unknown_field(info.plural, applied)
        if bad:
            raise ApiError(
                500,
                "",
                f"failed to create typed patch object ({r.namespace or ''}/{r.name}; "
                f"{info.api_version}, Kind={info.kind}): {bad}: field not declared in schema",
            )
        with store.lock:
            if info.namespaced and store.get("namespaces", None, r.namespace or "") is None:
                raise not_found("namespaces", "", r.namespace or "")
            check_quantities(info.plural, applied)
            old = store.get(info.plural, r.namespace, r.name or "")
            new = server_side_apply(old, applied, manager, _parse_bool(q.get("force")), info.api_version)
            new["kind"], new["apiVersion"] = info.kind, info.api_version
            if old is not None:
                new["status"] = old.get("status", {}) if "status" in old else new.pop("status", None)
                if new.get("status") is None:
                    new.pop("status", None)
            else:
                new.pop("status", None)
            self._prepare(info, new, old)
            stamp_apply_time(old, new, manager)
            if _dry_run("PATCH", q):  # validated, defaulted, merged: answered, never stored
                if old is None:
                    self._send_json(201, _as_if_created(info, new))
                else:
                    self._send_json(200, new)
                return
            if old is None:
                created = store.create(info.plural, new)
                if info.plural == "namespaces":
                    self.api.after_namespace_created(created["metadata"]["name"])
                self._send_json(201, created)
                return
            if new == old or (
                strip_managed(new) == strip_managed(old)
                and new["metadata"].get("managedFields") == old["metadata"].get("managedFields")
            ):
                self._send_json(200, old)
                return
            result = store.update(info.plural, new)
        self._send_json(200, result)

    def _evict(self, r: Route, q: dict[str, str], raw: bytes, dry_run: bool) -> None:
        """``POST .../pods/NAME/eviction`` (policy/v1 Eviction): the pod gets the
        ``DisruptionTarget`` condition (``EvictionByEvictionAPI``, PodDisruptionConditions is on by
        default in 1.28) and is deleted gracefully (``deleteOptions.gracePeriodSeconds`` or the
        pod's own). PodDisruptionBudgets are not served by the emulator, so none is checked; a
        pod already being deleted is a success without a second deletion."""
        store = self.api.store
        body = self._json_body(raw) if raw.strip() else None
        # Without kind/apiVersion (the Python client's V1Eviction) the endpoint's own type is assumed.
        if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction" or body.get(
            "apiVersion", "policy/v1"
        ) not in ("policy/v1", "policy/v1beta1"):
            raise bad_request("the body must be a policy/v1 Eviction object")
        named = (body.get("metadata") or {}).get("name")
        if named and named != r.name:
            raise bad_request("name in URL does not match name in Eviction object")
        opts = body.get("deleteOptions") or {}
        opts = opts if isinstance(opts, dict) else {}
        dry_run = dry_run or opts.get("dryRun") == ["All"]
        grace = opts.get("gracePeriodSeconds")
        if grace is not None and not isinstance(grace, int):
            raise bad_request("deleteOptions.gracePeriodSeconds must be an integer")
        with store.lock:
            pod = store.get("pods", r.namespace, r.name or "")
            if pod is None:
                raise not_found("pods", "", r.name or "")
            if not dry_run and not pod["metadata"].get("deletionTimestamp"):
                status = copy.deepcopy(pod.get("status") or {})
                conditions = [c for c in status.get("conditions") or []
                              if c.get("type") != "DisruptionTarget"]
                conditions.insert(0, {"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                                      "lastTransitionTime": now_rfc3339(), "reason": "EvictionByEvictionAPI",
                                      "message": "Eviction API: evicting"})
                status["conditions"] = conditions
                store.patch_status("pods", r.namespace, r.name or "", status)
                store.delete("pods", r.namespace, r.name or "", "Background", grace)
        self._send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "code": 201})

    def _delete(self, info: ResourceInfo, r: Route, q: dict[str, str], raw: bytes) -> None:
        store = self.api.store
        opts = self._json_body(raw) if raw.strip() else {}
        opts = opts if isinstance(opts, dict) else {}
        policy = q.get("propagationPolicy") or opts.get("propagationPolicy") or "Background"
        orphan = q.get("orphanDependents") or opts.get("orphanDependents")
        if orphan in (True, "true"):
            policy = "Orphan"
        grace = _int_or_none(q.get("gracePeriodSeconds"))
        if grace is None and opts.get("gracePeriodSeconds") is not None:
            grace = int(opts["gracePeriodSeconds"])
        with store.lock:
            cur = store.get(info.plural, r.namespace, r.name or "")
            if cur is None or r.subresource:
                raise self._missing(info, r)
            result = store.delete(info.plural, r.namespace, r.name or "", policy, grace)
            still = store.get(info.plural, r.namespace, r.name or "")
        assert result is not None
        if still is not None or info.plural in _RETURNS_OBJECT_ON_DELETE:
            body = still if still is not None else result
            if policy == "Foreground" and still is not None:
                body = {k: v for k, v in body.items() if k != "apiVersion"}  # as recorded in golden 09
            self._send_json(200, body)
            return
        details: Obj = {"name": r.name}
        if info.group:
            details["group"] = info.group
        details["kind"] = info.plural
        details["uid"] = cur["metadata"]["uid"]
        self._send_json(
            200,
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details},
        )


class _HTTPServer(ThreadingHTTPServer):
    """A client that closes its connection (a stopped watch or log stream, shut down from
    another thread) is normal, not an error: no traceback on stderr, where it lands in whatever
    a test is capturing at that moment."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


def _dry_run(method: str, q: dict[str, str]) -> bool:
    """``dryRun=All`` on a write: True; absent: False; any other value: 422 as the real server."""
    value = q.get("dryRun")
    if value is None or method == "GET":
        return False
    if value != "All":
        kind = {"POST": "Create", "PUT": "Update", "PATCH": "Patch", "DELETE": "Delete"}[method]
        raise ApiError(
            422, "Invalid",
            f'{kind}Options.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
            f'[]string{{"{value}"}}: supported values: "All"',
        )
    return True


def _as_if_created(info: ResourceInfo, obj: Obj) -> Obj:
    """What a dry-run create answers: the object with uid and creationTimestamp, no resourceVersion."""
    out = copy.deepcopy(obj)
    md = out.setdefault("metadata", {})
    md["uid"] = str(uuid.uuid4())
    md["creationTimestamp"] = now_rfc3339()
    md.pop("resourceVersion", None)
    if info.has_generation:
        md["generation"] = 1
    return out


def _apply_patch(ctype: str, target: Obj, patch: Any) -> Any:
    if ctype == "application/json-patch+json":
        return json_patch(target, patch)
    if ctype == "application/merge-patch+json":
        return merge_patch(target, patch)
    if ctype == "application/strategic-merge-patch+json":
        return strategic_merge_patch(target, patch)
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted "
        f"media types include: application/json-patch+json, application/merge-patch+json, "
        f"application/apply-patch+yaml, application/strategic-merge-patch+json (got {ctype!r})",
    )


def _sort_key(o: Obj) -> str:
    md = o["metadata"]
    return f"{md.get('namespace', '')}/{md['name']}" if md.get("namespace") else md["name"]


def _selector_string(sel: Obj | None) -> str:
    if not sel:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        op = e.get("operator")
        if op in ("In", "NotIn"):
            parts.append(f"{e['key']} {op.lower()} ({','.join(sorted(e.get('values') or []))})")
        elif op == "Exists":
            parts.append(e["key"])
        elif op == "DoesNotExist":
            parts.append(f"!{e['key']}")
    return ",".join(parts)


def _scale_of(obj: Obj) -> Obj:
    md = obj["metadata"]
    status: Obj = {"replicas": (obj.get("status") or {}).get("replicas", 0)}
    sel = _selector_string((obj.get("spec") or {}).get("selector"))
    if sel:
        status["selector"] = sel
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": md["name"],
            "namespace": md.get("namespace"),
            "uid": md["uid"],
            "resourceVersion": md["resourceVersion"],
            "creationTimestamp": md["creationTimestamp"],
        },
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
        "status": status,
    }


def _page_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})
