"""Plain HTTP to a service through its tier's own forward: the one request path of Try it,
``svc.request``, ``svc.chat``, ``svc.models`` (and the load test).

:func:`forward_url` opens the forward on demand and reuses it: ``svc.port_forward()`` on
Kubernetes (a local port relayed to one ready pod), the front port on the local tier. Only a
loopback URL is ever used, so nothing here can reach another host. :func:`send` is one request
on one connection with its timings; :class:`ChatStream` reads a streamed chat answer as it
arrives. A request on a reused Kubernetes port-forward that gets no answer at all (the pod
behind it went away) is sent once more on a fresh forward.

Everything here takes a :class:`Forward` (``svc.forward()``): what the request path needs of a
service, and nothing of the handle. Many requests (a load test): look the forward up once,
validate the request once, send it::

    url = forward_url(svc.forward())
    req = make_request("POST", "/v1/completions", json={"prompt": "hi"})   # httpmodel.py
    resp = send(url, req, timeout=10)    # HttpResponse: status, ttfb, total, answered_by, ...
"""

from __future__ import annotations

import contextlib
import http.client
import json as jsonlib
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.errors import SpecError, TiersError
from ..serving.httpmodel import MAX_BODY, HttpRequest, HttpResponse, answered_by, make_request
from ..serving.openai_compat import (
    MAX_ANSWER,
    STREAM_OPTIONS,
    ChatStats,
    SSEError,
    SSEParser,
    answer_parts,
    chat_request,
    chunk_parts,
    error_text,
    model_ids,
)
from ..serving.status import check_track

DEFAULT_TIMEOUT = 30.0  # seconds: connect, and between any two reads
CHAT_TIMEOUT = 300.0
DRAIN_LIMIT = 64 * 1024 * 1024  # bytes read past MAX_BODY (so the connection ends cleanly) at most
_LOOPBACK = re.compile(r"http://(127\.0\.0\.1|localhost|\[::1\]):(\d{1,5})/?")

#: Services (record keys) whose server answered 400 to ``stream_options`` (older TGI, some
#: proxies): their streamed chats are sent without it from then on, in this process.
_no_stream_options: set[str] = set()
_forwards: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class ForwardingTier(Protocol):
    """What the request path asks of a serving tier about its forwards."""

    keeps_forwards: bool  # Kubernetes: port-forwards held open by the tier; local: a front port

    def forwarded_pod(self, url: str) -> str | None:
        """The pod an open forward relays to; None when ``url`` is not one of this tier's."""
        ...

    def forward_alive(self, url: str) -> bool:
        """Whether a track's forward (local tier) still listens."""
        ...


@dataclass(frozen=True, eq=False)
class Forward:
    """A service as the request path sees it: its ``name`` (for messages), a ``key`` (forwards
    and server quirks are remembered by it), its ``tier``, how to ``open`` a forward to a track
    (None: any ready pod) and the ``current`` endpoint its state names (the local tier's front
    port; None on Kubernetes). Made by :meth:`Service.forward`."""

    name: str
    key: str
    tier: ForwardingTier
    open: Callable[[str | None], str]
    current: Callable[[], str | None]


def forward_url(service: Forward, *, fresh: bool = False, track: str | None = None) -> str:
    """The service's forward (``http://127.0.0.1:PORT``), opened on first use and reused: a
    Kubernetes port-forward while its tier keeps it open, the local tier's front port while the
    service's state still names it (a restarted supervisor listens on a new port). ``fresh``
    opens a new one (the pod behind the old one may be gone)."""
    return _forward(service, fresh=fresh, track=track)[0]


def _forward(service: Forward, *, fresh: bool = False, track: str | None = None) -> tuple[str, bool]:
    """The forward's URL (to the pods of ``track``, "stable" or "canary", or either: None), and
    whether it is a reused Kubernetes port-forward."""
    track = check_track(track)
    tier, key = service.tier, f"{service.key}\0{track or ''}"
    with _lock:
        cached = _forwards.get(tier, {}).get(key)
    if cached and not fresh:
        if tier.keeps_forwards:
            if tier.forwarded_pod(cached) is not None:  # still open in this process
                return cached, True
        elif track is not None:
            if tier.forward_alive(cached):
                return cached, False
        elif (service.current() or "").rstrip("/") == cached:  # one small file read
            return cached, False
    url = service.open(track).rstrip("/")
    loopback(url)
    with _lock:
        _forwards.setdefault(tier, {})[key] = url
    return url, False


def loopback(url: str) -> tuple[str, int]:
    """Host and port of a loopback ``http://`` URL; TiersError for anything else."""
    match = _LOOPBACK.fullmatch(url)
    if not match or not 0 < int(match.group(2)) < 65536:
        raise TiersError(f"not a local forward: {url[:100]!r} (requests go only to the service's forward)")
    return match.group(1).strip("[]"), int(match.group(2))


def _connect(base_url: str, request: HttpRequest, timeout: float, *,
             on_socket: Callable[[socket.socket], None] | None = None) -> tuple[
        http.client.HTTPConnection, http.client.HTTPResponse, float]:
    host, port = loopback(base_url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    started = time.perf_counter()
    try:
        conn.connect()
        if on_socket is not None and conn.sock is not None:  # (the response may own it later)
            on_socket(conn.sock)
        conn.request(request.method, request.path, body=request.body or None, headers=dict(request.headers))
        resp = conn.getresponse()
    except BaseException:
        conn.close()
        raise
    return conn, resp, started


def send(base_url: str, request: HttpRequest, *, timeout: float = DEFAULT_TIMEOUT,
         pod: str | None = None) -> HttpResponse:
    """One request on a new connection to ``base_url`` (loopback only). ``pod`` is who answers
    when no response header says (the forward's pod). Socket errors propagate."""
    conn, resp, started = _connect(base_url, request, timeout)
    try:
        ttfb = time.perf_counter() - started
        body = bytearray()
        dropped = 0
        while True:
            piece = resp.read1(65536) if request.method != "HEAD" else b""
            if not piece:
                break
            room = MAX_BODY - len(body)
            body += piece[:room]
            dropped += max(0, len(piece) - room)
            if dropped > DRAIN_LIMIT:
                break
        total = time.perf_counter() - started
        headers = tuple((k, v) for k, v in resp.getheaders())
        return HttpResponse(resp.status, resp.reason, headers, bytes(body), ttfb, total,
                            answered_by(headers, pod), truncated=dropped > 0)
    finally:
        conn.close()


def _pod_of(service: Forward, url: str) -> str | None:
    """The pod a Kubernetes forward relays to (the local tier's front port has none)."""
    return service.tier.forwarded_pod(url)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return "no answer in time"
    return " ".join(str(exc).split()) or type(exc).__name__


_NO_ANSWER = (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine)


def request(service: Forward, method: str, path: str, *, json: Any = None, body: str | bytes | None = None,
            headers: Any = None, timeout: float = DEFAULT_TIMEOUT, track: str | None = None) -> HttpResponse:
    """Send one request to ``service`` through its forward; see :meth:`Service.request`."""
    given = {"json": json} if json is not None else {}
    req = make_request(method, path, body=body, headers=headers, **given)
    _check_timeout(timeout)
    url, reused = _forward(service, track=track)
    what = f"{req.method} {req.path}: no answer from {service.name}"
    while True:
        try:
            return send(url, req, timeout=timeout, pod=_pod_of(service, url))
        except _NO_ANSWER as exc:
            if reused:  # the forward may point at a pod that is gone: a fresh one, once
                url, reused = _forward(service, fresh=True, track=track)
                continue
            raise TiersError(f"{what}: {_describe(exc)}") from None
        except (OSError, http.client.HTTPException) as exc:
            raise TiersError(f"{what}: {_describe(exc)}") from None


def _check_timeout(timeout: Any) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise SpecError("timeout", f"seconds, more than 0 and at most 3600, got {timeout!r}")


def models(service: Forward, *, timeout: float = 10.0, track: str | None = None) -> list[str]:
    """The model ids ``/v1/models`` lists; TiersError when the server is not OpenAI-compatible."""
    resp = request(service, "GET", "/v1/models", timeout=timeout, track=track)
    payload: Any = None
    with contextlib.suppress(ValueError):
        payload = resp.json()
    ids = model_ids(payload) if resp.status == 200 else None
    if ids is None:
        why = f"HTTP {resp.status}" if resp.status != 200 else "not a models list"
        raise TiersError(f"{service.name} is not OpenAI-compatible: GET /v1/models gave {why}")
    return list(ids)


class ChatStream:
    """The text pieces of one chat answer as they arrive (iterate it), with ``stats`` (time to
    first token, tokens per second: the server's usage count when its last chunk has one),
    ``usage`` (the server's token counts, when it sent them), ``answered_by``, ``text`` (the
    answer so far), ``reasoning`` (a reasoning model's thinking, kept apart from the answer) and
    ``finish_reason``. :meth:`parts` gives the reasoning pieces too, as they arrive. ``close()``
    ends it early (``abort()`` from another thread).

    As real servers stream: ``:`` keep-alive comments, a role-only first chunk and a last usage
    chunk with empty ``choices`` give no piece; an in-band ``{"error": ...}`` after HTTP 200
    ends the stream with a TiersError naming it. A streamed chat asks for ``stream_options:
    {"include_usage": true}``; a server that answers that with a 400 is asked again without it
    (and, for this service, not asked again)."""

    def __init__(self, service: Forward, body: dict[str, Any], timeout: float,
                 track: str | None = None) -> None:
        self.track = track
        self.stats = ChatStats(started=time.perf_counter())
        self.answered_by: str | None = None
        self.text = ""
        self.reasoning = ""
        self.finish_reason: str | None = None
        self.aborted = False
        self._sock: socket.socket | None = None
        self._pieces = self._run(service, body, timeout)

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> str:
        while True:
            kind, piece = self._next_part()
            if kind == "text":
                return piece

    def parts(self) -> Iterator[tuple[str, str]]:
        """``("reasoning", piece)`` and ``("text", piece)`` pairs as they arrive (the answer is
        the ``text`` ones)."""
        while True:
            try:
                yield self._next_part()
            except StopIteration:
                return

    def _next_part(self) -> tuple[str, str]:
        kind, piece = next(self._pieces)
        self.stats.add(time.perf_counter())
        if kind == "text":
            self.text += piece
        else:
            self.reasoning += piece
        return kind, piece

    @property
    def usage(self) -> dict[str, int] | None:
        """The server's token counts (``prompt_tokens``, ``completion_tokens``,
        ``total_tokens``; openai_compat.usage_of) once it sent them, else None: then the panel
        counts pieces, not tokens. ``stats`` counts its tokens from the same counts."""
        return self.stats.usage

    def close(self) -> None:
        """End the stream (from the thread that iterates it)."""
        self._pieces.close()

    def abort(self) -> None:
        """End the stream from another thread: its connection is shut, so the iterating thread
        gets a TiersError at once (``aborted`` says why)."""
        self.aborted = True
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __repr__(self) -> str:
        return f"<ChatStream: {self.stats.pieces} pieces, {len(self.text)} characters>"

    def _run(self, service: Forward, body: dict[str, Any], timeout: float
             ) -> Generator[tuple[str, str], None, None]:
        stream = bool(body.get("stream"))
        key = service.key
        if stream and key not in _no_stream_options:
            body = {**body, "stream_options": STREAM_OPTIONS}
        url, reused = _forward(service, track=self.track)
        retried = False  # asked again without stream_options after a 400
        while True:
            req = make_request("POST", "/v1/chat/completions", json=body,
                               headers={"Accept": "text/event-stream" if stream else "application/json"})
            try:
                conn, resp, started = _connect(url, req, timeout, on_socket=self._keep_socket)
                if resp.status == 400 and "stream_options" in body:
                    with contextlib.suppress(OSError, http.client.HTTPException):
                        resp.read(MAX_ANSWER)
                    conn.close()
                    resp.close()
                    body = {k: v for k, v in body.items() if k != "stream_options"}
                    retried = True
                    continue
                if retried and resp.status < 400:
                    _no_stream_options.add(key)  # the 400 was for stream_options: not sent again
                break
            except _NO_ANSWER as exc:
                if reused:
                    url, reused = _forward(service, fresh=True, track=self.track)
                    continue
                raise TiersError(f"chat: no answer from {service.name}: {_describe(exc)}") from None
            except (OSError, http.client.HTTPException) as exc:
                raise TiersError(f"chat: no answer from {service.name}: {_describe(exc)}") from None
        self.stats.started = started
        try:
            headers = tuple(resp.getheaders())
            self.answered_by = answered_by(headers, _pod_of(service, url))
            ctype = (resp.getheader("content-type") or "").lower()
            if resp.status >= 400 or "text/event-stream" not in ctype:
                raw = resp.read(MAX_ANSWER + 1)
                if len(raw) > MAX_ANSWER and resp.status < 400:
                    raise TiersError(f"chat: the answer from {service.name} is longer than "
                                     f"{MAX_ANSWER // 1024 // 1024} MiB; ask for fewer tokens (max_tokens)")
                try:
                    payload = jsonlib.loads(raw.decode("utf-8", errors="replace"))
                except ValueError:
                    payload = None
                if resp.status >= 400:
                    fallback = raw.decode("utf-8", errors="replace") or resp.reason
                    raise TiersError(f"chat: HTTP {resp.status}: {error_text(payload, fallback)}")
                whole = answer_parts(payload)
                if whole.error is not None:  # an error body with HTTP 200
                    raise TiersError(f"chat: the server sent an error: {whole.error}")
                self.finish_reason = whole.finish_reason
                self.stats.usage = whole.usage
                for kind, piece in (("reasoning", whole.reasoning), ("text", whole.text)):
                    if piece:
                        yield kind, piece
                return
            parser = SSEParser()
            kept = 0  # bytes of answer text so far
            while True:
                try:
                    chunk = resp.read1(65536)
                except (OSError, http.client.HTTPException) as exc:
                    if self.aborted:  # a shut socket may read as a reset rather than as the end
                        raise TiersError("chat: stopped") from None
                    broke = f"chat: the stream from {service.name} broke"
                    raise TiersError(f"{broke}: {_describe(exc)}") from None
                if not chunk:
                    if self.aborted:
                        raise TiersError("chat: stopped")
                    return
                try:
                    events = parser.feed(chunk)
                except SSEError as exc:
                    raise TiersError(f"chat: the stream from {service.name} broke off: {exc}") from None
                for event in events:
                    parts = chunk_parts(event.data)
                    if event.event == "error" or (parts is not None and parts.error is not None):
                        why = parts.error if parts is not None and parts.error else None
                        if why is None:
                            payload = None
                            with contextlib.suppress(ValueError):
                                payload = jsonlib.loads(event.data)
                            why = error_text(payload, event.data)
                        raise TiersError(f"chat: the server sent an error: {why}")
                    if parts is None:
                        return
                    if parts.usage is not None:
                        self.stats.usage = parts.usage  # the last chunk that counts wins
                    if parts.finish_reason is not None:
                        self.finish_reason = parts.finish_reason
                    for kind, piece in (("reasoning", parts.reasoning), ("text", parts.text)):
                        if not piece:
                            continue
                        kept += len(piece.encode("utf-8", "surrogatepass"))
                        if kept > MAX_ANSWER:
                            raise TiersError(f"chat: the answer from {service.name} is longer than "
                                             f"{MAX_ANSWER // 1024 // 1024} MiB; the rest was not read "
                                             "(ask for fewer tokens: max_tokens)")
                        yield kind, piece
        finally:
            conn.close()
            resp.close()

    def _keep_socket(self, sock: socket.socket) -> None:
        self._sock = sock
        if self.aborted:  # stopped while connecting
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def chat(service: Forward, messages: Any, *, model: str | None = None, stream: bool = True,
         timeout: float = CHAT_TIMEOUT, track: str | None = None, **params: Any) -> ChatStream:
    """Ask ``/v1/chat/completions``; see :meth:`Service.chat`."""
    _check_timeout(timeout)
    body = chat_request(messages, model=model, stream=stream, params=params)
    return ChatStream(service, body, timeout, check_track(track))
