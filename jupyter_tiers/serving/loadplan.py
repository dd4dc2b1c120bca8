"""Pure parts of a service's load test (``Service.load_test``): the checked plan, the request it
sends, the open-loop arrival schedule, percentiles from raw samples, the per-second series and
the summary. No I/O here; loadgen.py sends the requests.

Times are seconds from the run's start on one monotonic clock. Latency is ``end - start`` of a
request that got a response; a request that could not start at its scheduled time because
``concurrency`` requests were already in flight is not sent and is counted as ``dropped`` (it is
still a row, with the error saying so), so a slow service shows as drops and latency, never as a
quietly lower rate.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import SpecError

#: A profile's ``load_limit_rps`` when it sets none.
DEFAULT_LIMIT_RPS = 200
#: The highest ``load_limit_rps`` a profile may set (config validation).
MAX_LIMIT_RPS = 10_000
MAX_SECONDS = 3600
MAX_CONCURRENCY = 1024
#: At most this many requests in one run (rps x seconds), so the samples stay a few hundred MB at most.
MAX_REQUESTS = 1_000_000
MAX_BODY_BYTES = 1 << 20
#: A request that starts more than this after its scheduled time is counted as late.
LATE_S = 0.05
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# A path and query in RFC 3986's characters (no fragment: it is not sent).
_PATH_RE = re.compile(r"/[A-Za-z0-9._~:/?@!$&'()*+,;=%\[\]-]*")
_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_REQUEST_KEYS = ("method", "path", "headers", "body", "json")
# Headers the generator sets itself.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


@dataclass(frozen=True)
class LoadRequest:
    """What every request of a run sends: a method, a path on the service, headers and a body."""

    method: str = "GET"
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def encode(self, host: str) -> bytes:
        """The HTTP/1.1 request bytes for the service at ``host`` (``127.0.0.1:PORT``)."""
        lines = [f"{self.method} {self.path} HTTP/1.1", f"Host: {host}", "Connection: keep-alive"]
        names = {k.lower() for k, _ in self.headers}
        if "user-agent" not in names:
            lines.append("User-Agent: jupyter-tiers-load")
        lines += [f"{k}: {v}" for k, v in self.headers]
        if self.body or self.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


@dataclass(frozen=True)
class LoadPlan:
    """A checked load test: ``rps`` arrivals a second for ``seconds``, at most ``concurrency`` in flight."""

    rps: float
    seconds: float
    concurrency: int
    request: LoadRequest = field(default_factory=LoadRequest)
    timeout: float = 30.0

    @property
    def count(self) -> int:
        """How many requests the schedule holds."""
        return arrival_count(self.rps, self.seconds)


def _number(name: str, value: Any, low: float, high: float, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(name, f"{allowed}, got {value!r}")
    if not low <= value <= high:
        raise SpecError(name, f"{allowed}, got {value!r}")
    return float(value)


def limit_of(settings: Mapping[str, Any]) -> float:
    """A profile's ``load_limit_rps`` (default :data:`DEFAULT_LIMIT_RPS`)."""
    value = settings.get("load_limit_rps", DEFAULT_LIMIT_RPS)
    return _number("load_limit_rps", value, 1, MAX_LIMIT_RPS,
                   f"a number of requests per second from 1 to {MAX_LIMIT_RPS}")


def check_plan(rps: Any, seconds: Any, concurrency: Any, request: Any = None, *, limit_rps: float,
               profile: str = "", timeout: Any = 30.0) -> LoadPlan:
    """The plan for these arguments, or SpecError naming the argument, what was given and what
    is allowed (``rps`` over the profile's ``load_limit_rps`` names that key)."""
    rate = _number("rps", rps, 0, math.inf, "requests per second above 0")
    if rate <= 0:
        raise SpecError("rps", f"requests per second above 0, got {rps!r}")
    if rate > limit_rps:
        where = f"profile {profile!r}" if profile else "the profile"
        raise SpecError("rps", f"{rps!r} is over the load_limit_rps of {where} ({limit_rps:g}); "
                               "ask for less, or raise load_limit_rps in tiers.yaml")
    secs = _number("seconds", seconds, 0, MAX_SECONDS, f"a duration above 0, at most {MAX_SECONDS}")
    if secs <= 0:
        raise SpecError("seconds", f"a duration above 0, at most {MAX_SECONDS}, got {seconds!r}")
    if (isinstance(concurrency, bool) or not isinstance(concurrency, int)
            or not 1 <= concurrency <= MAX_CONCURRENCY):
        raise SpecError("concurrency", f"a whole number from 1 to {MAX_CONCURRENCY}, got {concurrency!r}")
    wait = _number("timeout", timeout, 0, 3600, "seconds above 0, at most 3600")
    if wait <= 0:
        raise SpecError("timeout", f"seconds above 0, at most 3600, got {timeout!r}")
    if arrival_count(rate, secs) > MAX_REQUESTS:
        raise SpecError("seconds", f"rps x seconds is at most {MAX_REQUESTS:,} requests in one run")
    if arrival_count(rate, secs) < 1:
        raise SpecError("rps", f"{rps!r} for {seconds!r} s sends no request; ask for more")
    return LoadPlan(rate, secs, concurrency, parse_request(request), wait)


def parse_request(request: Any) -> LoadRequest:
    """``None`` (GET /), a path (``"/health"``), ``"METHOD /path"``, or a mapping with ``method``,
    ``path``, ``headers`` (a mapping), and ``body`` (text or bytes) or ``json`` (any JSON value,
    sent with ``Content-Type: application/json``). Only a path on the service: never a URL."""
    if request is None:
        return LoadRequest()
    if isinstance(request, str):
        parts = request.split()
        if len(parts) == 2 and parts[0].upper() in METHODS:
            return parse_request({"method": parts[0], "path": parts[1]})
        return parse_request({"path": request})
    if not isinstance(request, Mapping):
        raise SpecError("request", f"a path, 'METHOD /path' or a mapping, got {type(request).__name__}")
    unknown = [str(k) for k in request if k not in _REQUEST_KEYS]
    if unknown:
        raise SpecError("request", f"unknown key {unknown[0][:40]!r}; allowed: {', '.join(_REQUEST_KEYS)}")
    method = request.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise SpecError("request.method", f"one of {', '.join(METHODS)}, got {_shown(method)}")
    path = request.get("path", "/")
    if (not isinstance(path, str) or not _PATH_RE.fullmatch(path) or path.startswith("//")
            or len(path) > 8192):
        raise SpecError("request.path", "a path on the service starting with '/' (not a URL), in URL "
                                        "characters (others %-encoded), at most 8192 characters; "
                                        f"got {_shown(path)}")
    headers = _headers(request.get("headers") or {})
    if "body" in request and "json" in request:
        raise SpecError("request", "give body or json, not both")
    body = request.get("body", b"")
    if "json" in request:
        try:
            body = json.dumps(request["json"]).encode()
        except (TypeError, ValueError) as exc:
            raise SpecError("request.json", f"a JSON value: {exc}") from None
        if "content-type" not in {k.lower() for k, _ in headers}:
            headers += (("Content-Type", "application/json"),)
    elif isinstance(body, str):
        body = body.encode()
    elif not isinstance(body, bytes):
        raise SpecError("request.body", f"text or bytes, got {type(body).__name__}")
    if len(body) > MAX_BODY_BYTES:
        raise SpecError("request.body", f"at most {MAX_BODY_BYTES} bytes, got {len(body)}")
    return LoadRequest(method.upper(), path, headers, body)


def _headers(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Mapping):
        raise SpecError("request.headers", f"a mapping of name to value, got {type(raw).__name__}")
    out = []
    for name, value in raw.items():
        if not isinstance(name, str) or not _TOKEN_RE.fullmatch(name):
            raise SpecError("request.headers",
                            f"a header name is a token (letters, digits, -), got {_shown(name)}")
        if name.lower() in _OWN_HEADERS:
            raise SpecError("request.headers", f"{name} is set by the load generator")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise SpecError(f"request.headers.{name}", f"text, got {type(value).__name__}")
        text = str(value)
        if len(text) > 8192 or any((not c.isprintable() and c != "\t") or ord(c) > 255 for c in text):
            raise SpecError(f"request.headers.{name}",
                            "printable Latin-1 text on one line, at most 8192 characters")
        out.append((name, text))
    return tuple(out)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- the schedule ---------------------------------------------------------------------------------
def arrival_count(rps: float, seconds: float) -> int:
    """Arrivals in ``seconds`` at ``rps``: at 0, 1/rps, 2/rps, ... before ``seconds``."""
    return max(0, math.ceil(rps * seconds - 1e-9))


def arrival(i: int, rps: float) -> float:
    """The scheduled time of request ``i``: open loop, fixed from the start, never moved by
    how long earlier requests took."""
    return i / rps


# --- samples, percentiles, series, summary -------------------------------------------------------
class Sample:
    """One scheduled request. Times in seconds from the run's start; ``start`` is None for a
    request never sent (``dropped``), ``ttfb`` and ``status`` None without a response."""

    __slots__ = ("end", "error", "i", "ready", "replica", "scheduled", "start", "status", "ttfb")

    def __init__(self, i: int, scheduled: float) -> None:
        self.i = i
        self.scheduled = scheduled
        self.start: float | None = None
        self.ttfb: float | None = None
        self.end: float | None = None
        self.status: int | None = None
        self.error: str | None = None
        self.ready: int | None = None  # the service's ready replicas when it was scheduled
        self.replica: str | None = None  # who answered, when the response names it (X-Served-By, ...)

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 400 and self.error is None

    @property
    def latency(self) -> float | None:
        if self.status is None or self.start is None or self.end is None:
            return None
        return self.end - self.start

    @property
    def dropped(self) -> bool:
        return self.start is None and self.error is not None

    @property
    def late(self) -> bool:
        return self.start is not None and self.start - self.scheduled > LATE_S

    def record(self) -> dict[str, Any]:
        """The sample as a plain row (times in seconds from the start)."""
        latency = self.latency
        return {"i": self.i, "scheduled": self.scheduled, "start": self.start,
                "ttfb": None if self.ttfb is None or self.start is None else self.ttfb - self.start,
                "end": self.end, "latency": latency, "status": self.status, "error": self.error,
                "late": self.late, "ready": self.ready, "replica": self.replica}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values`` by linear interpolation between the closest
    ranks: numpy's default (``method="linear"``) and ``statistics.quantiles(method="inclusive")``.
    None for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"q is from 0 to 100, got {q!r}")
    xs = sorted(values)
    if not xs:
        return None
    h = (len(xs) - 1) * q / 100
    lo = math.floor(h)
    if lo + 1 >= len(xs):
        return float(xs[-1])
    return float(xs[lo] + (h - lo) * (xs[lo + 1] - xs[lo]))


def latency_percentiles(latencies: Iterable[float]) -> dict[str, float | None]:
    """p50, p95 and p99 in milliseconds (None without values)."""
    xs = sorted(latencies)
    out: dict[str, float | None] = {}
    for q in (50, 95, 99):
        v = percentile(xs, q)
        out[f"p{q}_ms"] = None if v is None else round(v * 1000, 3)
    return out


def canary_counts(samples: Sequence[Sample], canary_pods: Collection[str]) -> dict[str, Any]:
    """What the canary's pods answered (known only from responses that name who answered):
    ``canary_answered``, ``canary_errors`` and ``canary_error_rate`` (None without answers)."""
    mine = [s for s in samples if s.replica is not None and s.replica in canary_pods and s.end is not None]
    errors = sum(1 for s in mine if not s.ok)
    return {"canary_answered": len(mine), "canary_errors": errors,
            "canary_error_rate": round(errors / len(mine), 4) if mine else None}


def findings(summary: Mapping[str, Any], concurrency: int | None = None) -> list[str]:
    """What the numbers of a run mean, one sentence each, the test's own failures apart from
    the service's: drops (the generator's ``concurrency`` was full: a limit of the test, and
    what to change), late starts (the generator fell behind its schedule), errors (the
    service's answers or connections). Empty when the run went as planned."""
    out: list[str] = []
    scheduled = int(summary.get("scheduled") or 0)
    dropped = int(summary.get("dropped") or 0)
    late = int(summary.get("late") or 0)
    errors = int(summary.get("errors") or 0)
    sent = int(summary.get("sent") or 0)
    if dropped:
        pct = 100 * dropped / max(scheduled, 1)
        text = (f"TEST LIMIT: {dropped} of {scheduled} requests ({pct:.1f} %) were dropped, never sent: "
                f"all {concurrency if concurrency else 'allowed'} requests in flight were still waiting "
                f"for answers. A failure of the test, not of the service: ")
        p95, rps = summary.get("p95_ms"), summary.get("asked_rps")
        if isinstance(p95, (int, float)) and isinstance(rps, (int, float)) and rps > 0:
            need = max(1, math.ceil(rps * p95 / 1000 * 1.5))
            text += f"raise concurrency to about {need} (rps x p95 latency, with room) or lower rps"
        else:
            text += "raise concurrency or lower rps"
        out.append(text)
    if late:
        pct = 100 * late / max(sent, 1)
        out.append(f"TEST LIMIT: {late} of {sent} sent requests ({pct:.1f} %) started late (more than "
                   f"{LATE_S * 1000:g} ms after their time): the load generator fell behind, so the "
                   f"service saw a lower rate than asked; lower rps or run it on a less busy machine")
    if errors:
        pct = 100 * errors / max(sent, 1)
        out.append(f"SERVICE: {errors} of {sent} sent requests ({pct:.1f} %) failed (an error status, "
                   f"a timeout or a refused connection): see the rows' error column")
    return out


def summarize(samples: Sequence[Sample], elapsed: float, rps: float) -> dict[str, Any]:
    """The run in numbers: counts, achieved send rate and throughput over ``elapsed`` seconds,
    latency percentiles (ms) of the answered requests, error rate among the sent ones, and the
    share of the scheduled requests dropped and of the sent ones started late."""
    sent = [s for s in samples if s.start is not None]
    answered = [s for s in sent if s.status is not None]
    errors = sum(1 for s in sent if not s.ok and s.end is not None)
    lat = [s.latency for s in answered if s.latency is not None]
    ttfbs = sorted(s.ttfb - s.start for s in answered if s.ttfb is not None and s.start is not None)
    p50_ttfb = percentile(ttfbs, 50)
    elapsed = max(elapsed, 1e-9)
    return {
        "asked_rps": rps,
        "scheduled": len(samples),
        "sent": len(sent),
        "answered": len(answered),
        "ok": sum(1 for s in answered if s.ok),
        "errors": errors,
        "dropped": sum(1 for s in samples if s.dropped),
        "late": sum(1 for s in sent if s.late),
        "seconds": round(elapsed, 3),
        "sent_rps": round(len(sent) / elapsed, 2),
        "throughput_rps": round(len(answered) / elapsed, 2),
        "error_rate": round(errors / len(sent), 4) if sent else 0.0,
        "dropped_rate": round(sum(1 for s in samples if s.dropped) / len(samples), 4) if samples else 0.0,
        "late_rate": round(sum(1 for s in sent if s.late) / len(sent), 4) if sent else 0.0,
        **latency_percentiles(lat),
        "ttfb_p50_ms": None if p50_ttfb is None else round(p50_ttfb * 1000, 3),
    }


class Series:
    """The live per-second series: per bucket of ``width`` seconds, requests sent (by start),
    answered (by end: throughput), errors, drops and late starts, latency percentiles of the requests that
    ended in it, and the service's ready replicas at its end. Fed as the run goes; ``rows``
    gives the buckets changed since the last call (or all of them)."""

    def __init__(self, width: float = 1.0) -> None:
        self.width = width
        self._sent: dict[int, int] = {}
        self._done: dict[int, list[float]] = {}
        self._errors: dict[int, int] = {}
        self._ended: dict[int, int] = {}
        self._dropped: dict[int, int] = {}
        self._late: dict[int, int] = {}
        self._ready: list[tuple[float, int, int]] = []  # (t, ready, desired) as it changed
        self._dirty: set[int] = set()
        self._last = -1

    def _bucket(self, t: float) -> int:
        b = max(0, int(t // self.width))
        self._dirty.add(b)
        self._last = max(self._last, b)
        return b

    def sent(self, t: float, late: bool = False) -> None:
        b = self._bucket(t)
        self._sent[b] = self._sent.get(b, 0) + 1
        if late:
            self._late[b] = self._late.get(b, 0) + 1

    def dropped(self, t: float) -> None:
        b = self._bucket(t)
        self._dropped[b] = self._dropped.get(b, 0) + 1

    def ended(self, t: float, latency: float | None, ok: bool) -> None:
        b = self._bucket(t)
        self._ended[b] = self._ended.get(b, 0) + 1
        if latency is not None:
            self._done.setdefault(b, []).append(latency)
        if not ok:
            self._errors[b] = self._errors.get(b, 0) + 1

    def replicas(self, t: float, ready: int, desired: int) -> None:
        if not self._ready or self._ready[-1][1:] != (ready, desired):
            self._ready.append((t, ready, desired))
            self._bucket(t)

    def ready_at(self, t: float) -> tuple[int | None, int | None]:
        """Ready and desired replicas at time ``t`` (None before the first status)."""
        last: tuple[int | None, int | None] = (None, None)
        for when, ready, desired in self._ready:
            if when > t:
                break
            last = (ready, desired)
        return last

    def replica_points(self) -> list[tuple[float, int, int]]:
        return list(self._ready)

    def upto(self, t: float) -> None:
        """Mark the buckets up to ``t`` (so quiet seconds still get a row)."""
        self._bucket(t)

    def row(self, b: int) -> dict[str, Any]:
        done = self._done.get(b, [])
        sent = self._sent.get(b, 0)
        errors = self._errors.get(b, 0)
        ready, desired = self.ready_at((b + 1) * self.width)
        return {
            "t": round(b * self.width, 3),
            "sent": sent,
            "answered": len(done),
            "throughput_rps": round(len(done) / self.width, 2),
            "errors": errors,
            "dropped": self._dropped.get(b, 0),
            "late": self._late.get(b, 0),
            "error_rate": round(errors / max(self._ended.get(b, 0), 1), 4),
            **latency_percentiles(done),
            "ready": ready,
            "desired": desired,
        }

    def rows(self, changed_only: bool = True) -> list[dict[str, Any]]:
        if changed_only:
            wanted = sorted(self._dirty)
        else:
            wanted = list(range(self._last + 1))
        self._dirty.clear()
        return [self.row(b) for b in wanted]


def to_frame(records: list[dict[str, Any]]) -> Any:
    """A pandas DataFrame of ``records`` (one row each, indexed by ``i``) when pandas is
    installed; otherwise the list itself."""
    import importlib

    try:
        pd: Any = importlib.import_module("pandas")  # optional, not a dependency
    except ImportError:
        return records
    frame = pd.DataFrame.from_records(records, columns=list(_RECORD_COLUMNS))
    return frame.set_index("i")


_RECORD_COLUMNS = ("i", "scheduled", "start", "ttfb", "end", "latency", "status", "error", "late", "ready")
