"""The load generator behind ``Service.load_test`` and the ServeView's Load panel: an asyncio
HTTP/1.1 client on a thread of its own, sending a plan's requests open loop (each at its
scheduled time, whatever earlier ones are doing) to the service's own forwards, at most
``concurrency`` in flight over kept-alive connections. Given several forwards (one per pod on
Kubernetes), request ``i`` goes to forward ``i mod n``: every pod gets its share, and the
summary's ``measured`` says which pods were. The pure parts (plan, schedule, percentiles, series,
findings) are loadplan.py's.

Stop (``LoadRun.stop``) is honoured within a fraction of a second: no request is sent after
``stop`` returns, and requests in flight are abandoned (their rows say ``stopped``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..core.errors import TiersError
from .httpmodel import ANSWER_HEADERS, answered_by
from .loadplan import LoadPlan, Sample, Series, arrival, canary_counts, findings, summarize, to_frame
from .openai_compat import StreamErrorScan

#: How often a run's ``on_update`` gets the changed rows of the series (seconds).
UPDATE_INTERVAL = 0.5
#: A kept-alive connection is replaced after this many requests, so replicas added by scaling
#: (the local tier relays connection by connection) get their share.
REQUESTS_PER_CONNECTION = 100
_POLL = 0.1  # the schedule's longest sleep: how soon a stop is seen
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")

Update = dict[str, Any]


def forward_address(url: str) -> tuple[str, int]:
    """Host and port of a forward URL (``http://127.0.0.1:PORT``); only loopback HTTP, as the
    tiers' forwards are: the generator never aims anywhere else."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "http" or host not in _LOOPBACK or parts.port is None:
        raise TiersError(f"the service's forward {url!r} is not a local http://127.0.0.1:PORT address")
    return host, parts.port


class _Conn:
    __slots__ = ("reader", "target", "used", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: int) -> None:
        self.reader = reader
        self.writer = writer
        self.target = target
        self.used = 0

    def close(self) -> None:
        self.writer.close()


class _Closed(Exception):
    """The server closed a kept-alive connection before answering (retried once on a new one)."""


class LoadRun:
    """One load test against ``url`` (the service's forward, or a list of forwards: request
    ``i`` goes to the ``i mod n``-th). ``start()`` runs it on a thread; ``stop()`` ends it
    early; ``wait()`` blocks until it is over. ``on_update`` (called on the run's thread about
    twice a second and once at the end) gets ``{"rows": [...changed series rows], "summary":
    {...}, "done": bool}``. ``replicas`` is fed with (ready, desired) by whoever watches the
    service (``note_replicas``). ``pods``: the pod behind each forward (None: not one pod's),
    which answers are counted for; ``measured``: the sentence the summary says about what the
    run measured (one pod, every pod, every replica)."""

    def __init__(self, url: str | Sequence[str], plan: LoadPlan, *,
                 on_update: Callable[[Update], None] | None = None,
                 update_interval: float = UPDATE_INTERVAL, pods: Sequence[str | None] = (),
                 measured: str | None = None) -> None:
        urls = [url] if isinstance(url, str) else list(url)
        if not urls:
            raise TiersError("a load test needs at least one forward to send to")
        self.urls = [u.rstrip("/") for u in urls]
        self._targets = [forward_address(u) for u in self.urls]
        self.url = self.urls[0]
        self.host, self.port = self._targets[0]
        self.pods = list(pods) if pods else [None] * len(self.urls)
        self.measured = measured
        self.plan = plan
        self.on_update = on_update
        self.update_interval = update_interval
        self.samples: list[Sample] = []
        self.series = Series()
        self.error: str | None = None
        self.stopped = False
        self._stop = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()  # samples, series: the run's thread and note_replicas
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._started_at: float | None = None
        self._ended_at: float | None = None
        self._requests = [plan.request.encode(f"{host}:{port}" if ":" not in host else f"[{host}]:{port}")
                          for host, port in self._targets]
        self._pool: dict[int, list[_Conn]] = {k: [] for k in range(len(self._targets))}
        self._inflight = 0
        self._ready: tuple[int, int] | None = None
        self._canary_pods: set[str] = set()  # every canary pod seen while the run lasted

    # --- control -------------------------------------------------------------------------------
    def start(self) -> LoadRun:
        self._thread = threading.Thread(target=self._run, name="jt-load", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        """End the run now: nothing more is sent once this returns (in-flight requests are
        abandoned). Waits up to ``timeout`` for the run's thread."""
        if not self._done.is_set():
            self.stopped = True
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """True once the run is over (``timeout`` seconds at most)."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def note_replicas(self, ready: int, desired: int, canary_pods: Iterable[str] = ()) -> None:
        """The service's ready and desired replicas now (from a status watch), and the pods of
        its canary (``--canary``) if one runs: answers naming one count as the canary's."""
        with self._lock:
            self._ready = (ready, desired)
            self._canary_pods.update(canary_pods)
            if self._started_at is not None:
                self.series.replicas(time.monotonic() - self._t0, ready, desired)

    # --- results -----------------------------------------------------------------------------------
    @property
    def clock_zero(self) -> float | None:
        """The run's start on ``time.monotonic()`` (None before it starts): the records' times
        count from it, so they line up with a server's own monotonic log on the same machine."""
        return self._started_at

    def elapsed(self) -> float:
        """Seconds the run has lasted so far (or lasted, once done)."""
        if self._started_at is None:
            return 0.0
        end = self._ended_at if self._ended_at is not None else time.monotonic()
        return end - self._started_at

    def summary(self) -> dict[str, Any]:
        with self._lock:
            out = summarize(self.samples, self._send_window(), self.plan.rps)
            if self._canary_pods:
                out.update(canary_counts(self.samples, self._canary_pods))
            if any(self.pods):
                answered: dict[str, int] = {}
                for s in self.samples:
                    if s.status is not None and s.replica is not None:
                        answered[s.replica] = answered.get(s.replica, 0) + 1
                out["answered_by"] = answered
        out["concurrency"] = self.plan.concurrency
        out["findings"] = findings(out, self.plan.concurrency)
        if self.measured:
            out["measured"] = self.measured
        out["stopped"] = self.stopped
        if self.error:
            out["error"] = self.error
        return out

    def _send_window(self) -> float:
        """Seconds the schedule ran: its whole length (N arrivals, 1/rps apart, fill N/rps
        seconds), or up to the stop."""
        full = self.plan.count / self.plan.rps
        elapsed = self.elapsed()
        return min(full, elapsed) if (self.stopped or not self._done.is_set()) and elapsed > 0 else full

    def records(self) -> list[dict[str, Any]]:
        """Every scheduled request as a plain row (loadplan.Sample.record)."""
        with self._lock:
            return [s.record() for s in self.samples]

    def result(self) -> Any:
        """The rows as a pandas DataFrame when pandas is installed, else the list of rows."""
        return to_frame(self.records())

    # --- the run's thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as exc:  # reported in the summary, never lost on a thread
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._ended_at = time.monotonic()
            self._done.set()
            self._report(done=True)

    def _report(self, done: bool = False) -> None:
        if self.on_update is None:
            return
        with self._lock:
            if self._started_at is not None:
                self.series.upto(min(time.monotonic() - self._t0, self.plan.count / self.plan.rps))
            rows = self.series.rows()
        update = {"rows": rows, "summary": self.summary(), "done": done}
        with contextlib.suppress(Exception):  # a broken listener must not stop the load
            self.on_update(update)

    async def _main(self) -> None:
        tasks: set[asyncio.Task[None]] = set()
        reporter = asyncio.ensure_future(self._reporter())
        rps, count, concurrency = self.plan.rps, self.plan.count, self.plan.concurrency
        with self._lock:
            self._started_at = self._t0 = time.monotonic()
            if self._ready is not None:
                self.series.replicas(0.0, *self._ready)
        try:
            for i in range(count):
                due = arrival(i, rps)
                while True:
                    if self._stop.is_set():
                        return
                    wait = due - (time.monotonic() - self._t0)
                    if wait <= 0:
                        break
                    await asyncio.sleep(min(wait, _POLL))
                sample = Sample(i, due)
                with self._lock:
                    sample.ready = self._ready[0] if self._ready else None
                    self.samples.append(sample)
                    if self._inflight >= concurrency:
                        sample.error = f"not sent: {concurrency} requests in flight (concurrency)"
                        self.series.dropped(due)
                        continue
                    self._inflight += 1
                task = asyncio.ensure_future(self._one(sample))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            # the schedule is over: let what is in flight finish (each bounded by the timeout)
            while tasks and not self._stop.is_set():
                await asyncio.wait(set(tasks), timeout=_POLL)
        finally:
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            reporter.cancel()
            await asyncio.gather(reporter, return_exceptions=True)
            for pool in self._pool.values():
                for conn in pool:
                    conn.close()
                pool.clear()

    async def _reporter(self) -> None:
        while True:
            await asyncio.sleep(self.update_interval)
            self._report()

    async def _one(self, sample: Sample) -> None:
        now = time.monotonic() - self._t0
        sample.start = now
        with self._lock:
            self.series.sent(now, sample.late)
        # One timer cancels the request at its timeout (asyncio.wait_for would add a task per
        # request, which costs latency at hundreds of requests a second).
        task = asyncio.current_task()
        expired = [False]

        def expire() -> None:
            expired[0] = True
            if task is not None:
                task.cancel()

        timer = asyncio.get_running_loop().call_later(self.plan.timeout, expire)
        try:
            try:
                await self._exchange(sample)
            except _Closed:  # a kept-alive connection the server had closed: once more, afresh
                if self.plan.request.method in ("POST", "PATCH"):  # not idempotent: never twice
                    raise
                await self._exchange(sample, fresh=True)
        except asyncio.CancelledError:
            if not expired[0] or self._stop.is_set():
                sample.error = "stopped"
                raise
            uncancel = getattr(task, "uncancel", None)  # Python 3.11+: the cancel was ours, handled
            if uncancel is not None:
                uncancel()
            sample.error = f"timeout after {self.plan.timeout:g} s"
        except (OSError, ValueError, _Closed, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            sample.error = _error_text(exc)
        finally:
            timer.cancel()
            with self._lock:
                self._inflight -= 1
                if sample.error != "stopped":
                    sample.end = time.monotonic() - self._t0
                    self.series.ended(sample.end, sample.latency, sample.ok)

    async def _exchange(self, sample: Sample, fresh: bool = False) -> None:
        target = sample.i % len(self._targets)
        pool = self._pool[target]
        conn = None if fresh or not pool else pool.pop()
        reused = conn is not None
        if conn is None:
            host, port = self._targets[target]
            reader, writer = await asyncio.open_connection(host, port)
            conn = _Conn(reader, writer, target)
        keep = False
        try:
            conn.used += 1
            conn.writer.write(self._requests[target])
            await conn.writer.drain()
            line = await conn.reader.readline()
            if not line:
                if reused:
                    raise _Closed()
                raise ConnectionResetError("the service closed the connection without answering")
            sample.ttfb = time.monotonic() - self._t0
            status, keep, replica, inband = await _read_response(conn.reader, line, self.plan.request.method)
            sample.status, sample.replica = status, replica or self.pods[target]
            if inband is not None:  # HTTP 200, then an error in the stream: not a success
                sample.error = f"error in the stream after HTTP {status}: {inband}"
        except (OSError, asyncio.IncompleteReadError) as exc:
            if reused and sample.ttfb is None:
                raise _Closed() from exc
            raise
        finally:
            if keep and conn.used < REQUESTS_PER_CONNECTION and not self._stop.is_set():
                pool.append(conn)
            else:
                conn.close()


async def _read_response(reader: asyncio.StreamReader, status_line: bytes, method: str
                         ) -> tuple[int, bool, str | None, str | None]:
    """Read one response after its status line (the body is read and dropped); returns the
    status, whether the connection may carry another request, who answered when a header
    of :data:`~jupyter_tiers.serving.httpmodel.ANSWER_HEADERS` names it (the first of them that
    does), and the in-band error of a ``text/event-stream`` body (None without one)."""
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP/1.x response: {status_line[:60]!r}")
    version, status = parts[0], int(parts[1])
    length: int | None = None
    chunked = False
    conn_header = b""
    named: list[tuple[str, str]] = []  # the headers that may name who answered
    scan: StreamErrorScan | None = None  # a streamed answer: watched for an in-band error
    for _ in range(200):
        line = await reader.readline()
        if not line:
            raise asyncio.IncompleteReadError(b"", None)
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length":
            length = int(value.strip())
        elif key == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif key == b"connection":
            conn_header = value.strip().lower()
        elif key == b"content-type" and b"text/event-stream" in value.lower():
            scan = StreamErrorScan()
        elif key.decode("latin-1") in ANSWER_HEADERS and value.strip():
            named.append((key.decode("latin-1"), value.strip().decode("utf-8", "replace")))
    else:
        raise ValueError("more than 200 response headers")
    replica = answered_by(tuple(named))
    keep = (b"close" not in conn_header) if version == b"HTTP/1.1" else (b"keep-alive" in conn_header)
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return status, keep, replica, None
    if chunked:
        while True:
            size_line = await reader.readline()
            size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                return status, keep, replica, None if scan is None else scan.error
            await _skip(reader, size, scan)
            await _skip(reader, 2)  # the chunk's CRLF
    if length is not None:
        await _skip(reader, length, scan)
        return status, keep, replica, None if scan is None else scan.error
    while chunk := await reader.read(1 << 16):  # no length: the body ends with the connection
        if scan is not None:
            scan.feed(chunk)
    return status, False, replica, None if scan is None else scan.error


async def _skip(reader: asyncio.StreamReader, n: int, scan: StreamErrorScan | None = None) -> None:
    while n > 0:
        chunk = await reader.readexactly(min(n, 1 << 16))
        n -= len(chunk)
        if scan is not None:
            scan.feed(chunk)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, _Closed):
        return "the service closed a kept-alive connection without answering"
    if isinstance(exc, asyncio.IncompleteReadError):
        return "connection closed mid-response"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)[:200] or type(exc).__name__
