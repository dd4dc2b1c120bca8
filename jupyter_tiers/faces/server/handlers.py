"""Tornado handlers of ``{base_url}jupyter-tiers/api/`` (contract: API.md beside this file).

Every handler goes through Jupyter's authentication and authorization (``@web.authenticated`` +
``@authorized`` on resource ``tiers``; websockets: ``@ws_authenticated`` then an explicit
authorization check, as jupyter_server's own kernel websocket does). Mutations are POST/DELETE,
which ``APIHandler`` protects with the XSRF check. Blocking cluster calls run in a thread pool.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.ioloop import IOLoop
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from ...app import actions, ownjob
from ...app.viewstate.job_stream import JobStream
from ...batch.arrays import split_task_ref
from ...batch.celllines import in_cell
from ...batch.history import AccountingDisabled
from ...core.errors import SpecError, TiersError
from ...core.model import JobStatus, WorkKind
from ...doctor.render import report_data
from ...engine.handles import Job, Service
from ...engine.watch import LogFollower
from . import params
from .hub import Hub

log = logging.getLogger(__name__)

AUTH_RESOURCE = "tiers"
API_PATH = "jupyter-tiers/api"
_SEG = r"([^/]+)"

T = TypeVar("T")

_executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tiers-api")


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (SSH, the Kubernetes API, sqlite) off the tornado loop."""
    return await IOLoop.current().run_in_executor(_executor, lambda: fn(*args, **kwargs))


# An absolute path of two or more components (not a URL's path: no word, ':' or '/' before it).
_PATH_RE = re.compile(r"(?<![\w.:/~-])/(?:[^\s/'\"()<>\[\]{},;]+/)+([^\s/'\"()<>\[\]{},;]*)")


def public_text(text: str) -> str:
    """``text`` without absolute paths of this server (a registry, a workdir, a config file):
    a path aside in parentheses is dropped, any other becomes ``…/NAME`` (pure)."""
    text = re.sub(r" \(" + _PATH_RE.pattern + r"\)", "", text)
    return _PATH_RE.sub(lambda m: f"…/{m.group(1)}" if m.group(1) else "…", text)


def error_message(exc: BaseException) -> str:
    """The one line an API error shows: no traceback, no server paths, at most 1000 characters."""
    text = str(exc).strip() or type(exc).__name__
    return public_text(" ".join(text.split()))[:1000]


def public_errors(message: dict[str, Any]) -> dict[str, Any]:
    """A listing or hub message with its profile errors through :func:`public_text`."""
    out = dict(message)
    if isinstance(out.get("errors"), list):
        out["errors"] = [{**e, "message": public_text(str(e.get("message", "")))} for e in out["errors"]]
    if out.get("type") == "error" and "message" in out:
        out["message"] = public_text(str(out["message"]))
    return out


def api_error(status: int, message: str) -> web.HTTPError:
    """An HTTPError whose JSON ``error`` is ``message`` as is (tornado %-formats a log message
    with its args, so the message is an arg: a ``%%tiers`` in it stays ``%%tiers``)."""
    return web.HTTPError(status, "%s", message)


class TiersAPIHandler(APIHandler):
    """Base of the REST handlers: JSON errors as ``{"error": "..."}``.

    None of them counts as the user's activity (``_track_activity``): the sidebar polls them
    while nobody looks, and a hub's idle culler must still stop a server its student left.
    """

    auth_resource = AUTH_RESOURCE
    _track_activity = False

    @property
    def hub(self) -> Hub:
        hub: Hub = self.settings["jupyter_tiers_hub"]
        return hub

    def write_json(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        message = self._reason
        exc_info = kwargs.get("exc_info")
        if exc_info is not None:
            exc = exc_info[1]
            if isinstance(exc, web.HTTPError) and exc.log_message:
                message = exc.log_message % exc.args if exc.args else exc.log_message
            elif status_code == 500:
                message = "internal error in the jupyter-tiers server extension (see the server log)"
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": message}))

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call the service layer off the loop; its errors become JSON errors."""
        try:
            return await blocking(fn, *args, **kwargs)
        except (TiersError, ValueError) as exc:
            raise api_error(actions.http_status(exc), error_message(exc)) from None

    def parsed(self, fn: Callable[..., T], *args: Any) -> T:
        """A pure parser's result; its SpecError is a 400."""
        try:
            return fn(*args)
        except SpecError as exc:
            raise api_error(400, error_message(exc)) from None


class JobsHandler(TiersAPIHandler):
    """``GET jobs``: every job and service; ``?refresh=0`` reads the hub's cache."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        q = self.parsed(params.list_query, self.request.query_arguments)
        if not q.refresh:
            items, errors, rev = await self.run(self.hub.listing)
            items = [i for i in items if (q.profile is None or i["profile"] == q.profile)
                     and (q.kind is None or i["kind"] == q.kind)][:q.limit]
            self.write_json(public_errors({"items": items, "errors": errors, "rev": rev}))
            return
        # Taken before the clusters are asked: the answer is at least as new as every hub change
        # up to it, and older than any after it (the sidebar keeps those, see state.ts mergeList).
        rev = self.hub.rev
        listing = await self.run(actions.list_items, limit=q.limit, profile=q.profile, kind=q.kind)
        answer = listing.to_json()
        own = await self.run(self.hub.own_item)
        if own is not None:
            answer["items"] = ownjob.with_own(answer["items"], own, profile=q.profile, kind=q.kind)
        for item in answer["items"]:
            item["rev"] = rev
        answer["rev"] = rev
        self.write_json(public_errors(answer))


class ItemHandler(TiersAPIHandler):
    """``GET jobs/{profile}/{id}[?refresh=0]`` (details with the widget's view state; ``refresh=0``
    answers from the hub's watch when it has one); ``DELETE`` (a service)."""

    @web.authenticated
    @authorized
    async def get(self, profile: str, job_id: str) -> None:
        ref = self.parsed(params.ref, profile, job_id)
        refresh = self.parsed(params.flag, self.request.query_arguments, "refresh", True)
        self.write_json(await self.run(self.hub.details, ref, refresh=refresh))

    @web.authenticated
    @authorized
    async def delete(self, profile: str, job_id: str) -> None:
        ref = self.parsed(params.ref, profile, job_id)
        result = await self.run(actions.delete, ref)
        self.hub.scan()
        self.write_json(result.to_json())


_SERVICE_ACTIONS = {"restart": actions.restart, "promote": actions.promote, "rollback": actions.rollback}


class ActionHandler(TiersAPIHandler):
    """``POST jobs/{profile}/{id}/cancel|scale|restart|promote|rollback|forget``."""

    @web.authenticated
    @authorized
    async def post(self, profile: str, job_id: str, action: str) -> None:
        ref = self.parsed(params.ref, profile, job_id)
        if action == "cancel":
            result = await self.run(actions.cancel, ref)
        elif action == "forget":  # a record of a profile that no longer exists
            result = await self.run(actions.forget, ref)
            self.hub.scan()
        elif action in _SERVICE_ACTIONS:
            result = await self.run(_SERVICE_ACTIONS[action], ref)
        else:
            replicas = self.parsed(params.scale_body, self.request.body)
            result = await self.run(actions.scale, ref, replicas)
        self.write_json(result.to_json())


class StacksHandler(TiersAPIHandler):
    """``POST jobs/{profile}/{id}/stacks``: every running rank's Python stack, grouped."""

    @web.authenticated
    @authorized
    async def post(self, profile: str, job_id: str) -> None:
        ref = self.parsed(params.ref, profile, job_id)
        self.write_json(await self.run(actions.stacks_data_of, ref))


class LogsHandler(TiersAPIHandler):
    """``GET jobs/{profile}/{id}/logs?rank=|pod=&offset=&limit=``."""

    @web.authenticated
    @authorized
    async def get(self, profile: str, job_id: str) -> None:
        ref = self.parsed(params.ref, profile, job_id)
        q = self.parsed(params.log_query, self.request.query_arguments)
        result = await self.run(actions.log_range, ref, rank=q.rank, pod=q.pod, offset=q.offset,
                                limit=q.limit)
        self.write_json(result.to_json())


class FilesHandler(TiersAPIHandler):
    """``GET jobs/{profile}/{id}/files?pattern=``: what the job left (files.py)."""

    @web.authenticated
    @authorized
    async def get(self, profile: str, job_id: str) -> None:
        ref = self.parsed(params.ref, profile, job_id)
        pattern = self.parsed(params.file_pattern, self.request.query_arguments)
        self.write_json({"files": await self.run(actions.job_files, ref, pattern)})


class FileHandler(TiersAPIHandler):
    """``GET jobs/{profile}/{id}/files/{name}``: one listed file's bytes, streamed as an
    attachment (the browser saves it; flushed chunk by chunk, so memory stays bounded)."""

    @web.authenticated
    @authorized
    async def get(self, profile: str, job_id: str, name: str) -> None:
        ref = self.parsed(params.ref, profile, job_id)
        name = self.parsed(params.file_name, name)
        info, chunks = await self.run(actions.job_file, ref, name)
        base = name.rsplit("/", 1)[-1]
        self.set_header("Content-Type", "application/octet-stream")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Content-Length", str(info.size))
        self.set_header("Content-Disposition", params.attachment(base))
        sent = 0
        try:
            while sent < info.size:
                chunk = await blocking(next, chunks, b"")
                if not chunk:
                    break
                chunk = chunk[: info.size - sent]  # the file grew since it was listed
                sent += len(chunk)
                self.write(chunk)
                await self.flush()
        finally:
            await blocking(getattr(chunks, "close", lambda: None))
        if sent < info.size:  # it shrank, or the cluster went away: a short body, not a lie
            raise web.HTTPError(502, "the file ended early")
        self.finish(set_content_type="application/octet-stream")


class ProfilesHandler(TiersAPIHandler):
    """``GET profiles``: names, tiers, hosts — nothing secret."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        infos, default = await self.run(actions.profiles)
        self.write_json({"profiles": [p.to_json() for p in infos], "default": default})


class StatsHandler(TiersAPIHandler):
    """``GET stats``: what the hub does (listeners, watched items, its watchers' scheduler
    queries per profile) and the batched queries of ``GET jobs`` refreshes — for the sidebar's
    load benchmark and for debugging."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.write_json({"listeners": self.hub.listeners, "watched": self.hub.watched(),
                         "scheduler_queries": self.hub.scheduler_queries(),
                         "refresh_queries": dict(actions.refresh_queries), "scans": self.hub.scans})


class HistoryHandler(TiersAPIHandler):
    """``GET history?profile=&days=&user=&state=&limit=[&job=&tail=]``: a Slurm profile's jobs
    from accounting (one sacct query), every submitter's, ``ours`` marking this registry's.
    A cluster without accounting is a 409 with ``"accounting": false``."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        q = self.parsed(params.history_query, self.request.query_arguments)
        try:
            found = await blocking(actions.history, q.profile, days=q.days, user=q.user,
                                   state=list(q.states), limit=q.limit, job=q.job, tail=q.tail)
        except AccountingDisabled as exc:
            self.write_json({"error": error_message(exc), "accounting": False}, 409)
            return
        except (TiersError, ValueError) as exc:
            raise api_error(actions.http_status(exc), error_message(exc)) from None
        self.write_json({**found.to_json(), "days": q.days, "user": q.user, "states": list(q.states)})


class DoctorHandler(TiersAPIHandler):
    """``POST profiles/{name}/doctor[?suggest_role=1]``: ``jupyter tiers doctor NAME`` as JSON (the
    ``--json`` report: ``ok``, and the profile's checks); an unknown profile is a 404. A POST, so
    that Jupyter's XSRF check applies: the checks log in, write and delete an object, run the
    profile's python; a page that can make the browser send a GET must not start them."""

    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        if name not in await self.run(actions.profile_names):
            raise web.HTTPError(404, "no profile %r", name[:80])
        suggest = self.get_query_argument("suggest_role", "0") in ("1", "true", "yes")
        report = await self.run(actions.doctor, [name], suggest_role=suggest)
        self.write_json(report_data(report))


class TiersWebSocket(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """Base of the websockets: authenticated like jupyter_server's kernel websocket, then
    authorized for ``read`` on ``tiers``; JSON messages written from any thread."""

    auth_resource = AUTH_RESOURCE
    _loop: IOLoop
    _held: list[str] | None = None

    def set_default_headers(self) -> None:
        """JupyterHandler's default headers make no sense on a websocket."""

    async def authorize(self) -> None:
        user = self.current_user
        ok = await ensure_async(self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE))
        if not ok:
            raise web.HTTPError(403)

    @property
    def hub(self) -> Hub:
        hub: Hub = self.settings["jupyter_tiers_hub"]
        return hub

    def send_soon(self, message: dict[str, Any]) -> None:
        """Queue a message from any thread."""
        text = json.dumps(message)
        self._loop.add_callback(self._send, text)

    def _send(self, text: str) -> None:
        if self.ws_connection is None:
            return
        if self._held is not None:  # the first message is not out yet: keep the order
            self._held.append(text)
            return
        with contextlib.suppress(WebSocketClosedError):
            self.write_message(text)

    def _release(self, first: str) -> None:
        """Write the first message, then whatever was queued while it was being prepared."""
        held, self._held = self._held or [], None
        for text in (first, *held):
            with contextlib.suppress(WebSocketClosedError):
                self.write_message(text)

    def reject(self, status: int, message: str) -> None:
        """Refuse the upgrade with a JSON error (bad query, unknown job)."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": message}))

    def on_message(self, message: str | bytes) -> None:
        """Clients only listen; messages are ignored."""


class EventsHandler(TiersWebSocket):
    """``events``: a snapshot, then updates, removals and errors from the shared hub."""

    _token: int | None = None

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.authorize()
        self._loop = IOLoop.current()
        await super().get(*args, **kwargs)

    async def open(self, *args: Any, **kwargs: Any) -> None:
        super().open()
        self._held = []  # updates that arrive before the snapshot is written wait for it
        token, snapshot = await blocking(self.hub.listen, lambda m: self.send_soon(public_errors(m)))
        if self.ws_connection is None:  # closed while we were subscribing
            self.hub.unlisten(token)
            return
        self._token = token
        self._release(json.dumps(public_errors(snapshot)))

    def on_close(self) -> None:
        if self._token is not None:
            self.hub.unlisten(self._token)
            self._token = None


class LogStreamHandler(TiersWebSocket):
    """``jobs/{profile}/{id}/logs/stream?rank=|pod=&offset=O``: ``{"lines", "offset"}`` batches.

    A job's log is followed by byte offset, so a client reconnecting with its last ``offset``
    resumes without loss or repetition (``backlog=BYTES`` without an offset starts that far
    before the end, at a line boundary, for a long log); when the job ends, the rest of the log is sent, then
    ``{"lines": [], "offset": O, "eof": true}`` and the socket is closed. A service's pod logs
    are followed across restarts; there ``offset`` counts lines of this stream.

    ``view=1`` (a job, the lab panel's detail): the notebook JobView's messages instead of rows
    (app/viewstate/job_stream.py): ``lines`` messages with error lines and the fail-stop's fold,
    ``{"view": {...}}`` with the charts' series, the fold label and the end's summary; the socket
    stays open after eof for ``{"kind": "metrics_rank", "rank": N}`` (chart rank N)."""

    _follower: Any = None
    _hub_token: int | None = None
    _view: JobStream | None = None
    _status: JobStatus | None = None
    _service_sub: Any = None
    _tier: Any = None

    @ws_authenticated
    async def get(self, profile: str, job_id: str) -> None:
        await self.authorize()
        self._loop = IOLoop.current()
        try:
            ref = params.ref(profile, job_id)
            self._query = params.log_query(self.request.query_arguments, with_limit=False)
            self._handle = await blocking(actions.attach, ref)
            kind = self._handle.record.kind
            if kind == WorkKind.JOB and self._query.pod is not None:
                raise SpecError("pod", f"{ref} is a job; filter by rank, not pod")
            if kind == WorkKind.SERVICE and self._query.rank is not None:
                raise SpecError("rank", f"{ref} is a service; filter by pod, not rank")
            if kind == WorkKind.SERVICE and self._query.view:
                raise SpecError("view", f"{ref} is a service; view=1 is a job's stream")
            self._start, self._skip_partial = self._query.offset, False
            if kind == WorkKind.JOB and self._query.backlog is not None and self._query.offset == 0:
                tier: Any = self._handle.tier  # a BatchTier: the record is a job
                size = await blocking(tier.log_size, self._handle.record)
                self._start = max(0, size - self._query.backlog)
                self._skip_partial = self._start > 0
            if self._query.view and isinstance(self._handle, Job):  # the fold and summary need it
                known = self.hub.status_of(self._handle.record.key)
                self._status = known if isinstance(known, JobStatus) else await blocking(self._handle.status)
        except (TiersError, ValueError) as exc:
            self.reject(actions.http_status(exc), error_message(exc))
            return
        await super().get(profile, job_id)

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open()
        handle = self._handle
        self._tier = handle.tier
        if handle.record.kind == WorkKind.JOB:
            self._open_job()
        else:
            self._open_service()

    # --- a job: byte offsets, end from the hub ----------------------------------------------
    def _open_job(self) -> None:
        rank = self._query.rank
        record = self._handle.record

        def on_lines(batch: Any) -> None:
            rows = [[ln.rank, in_cell(ln.text, record.jobdir)] for ln in batch
                    if rank is None or ln.rank == rank]
            last = batch[-1].end_offset if len(batch) else None
            if rows and last is not None:
                self.send_soon({"lines": rows, "offset": last})

        if self._query.view and isinstance(self._handle, Job):
            self._view = JobStream(self.send_soon, self._handle.metric_patterns(), start=self._start,
                                   jobdir=record.jobdir)
            self._view.status(self._status)
        self._follower = LogFollower(self._tier, record, self._start,
                                     self._view.lines if self._view is not None else on_lines,
                                     skip_partial=self._skip_partial,
                                     metrics=self._view.metrics if self._view is not None else None)
        self._follower.start()

        # A task of an array (ID_7) is not an item of its own: it has ended once its array has.
        task = split_task_ref(record.key) if "_" in record.job_id else None
        keys = {record.key} | ({task[0]} if task else set())

        def on_hub(message: dict[str, Any]) -> None:
            if message.get("type") != "update":
                return
            for item in message.get("items", ()):
                if item.get("key") == record.key and self._view is not None:
                    self._view.status(self._latest_status())
                if item.get("key") in keys and item.get("terminal"):
                    self._finish_soon()

        token, snapshot = self.hub.listen(on_hub)
        self._hub_token = token
        if any(i["key"] in keys and i["terminal"] for i in snapshot["items"]):
            self._finish_soon()

    def _finish_soon(self) -> None:
        follower = self._follower
        if follower is None or getattr(self, "_finishing", False):
            return
        self._finishing = True

        def finish() -> None:
            follower.finish()
            if self._view is not None:
                status = self._latest_status()
                if status is None or not status.state.terminal:  # e.g. an array's task: ask once
                    with contextlib.suppress(TiersError):
                        status = self._handle.status()
                # Why it ended, as the notebook's JobView says it (read once per job and end).
                job = self._handle
                why = actions.end_reason(job, status) if isinstance(job, Job) and status else None
                used = actions.used_line(job, status) if isinstance(job, Job) and status else None
                self._view.end(status, why, used)
            self.send_soon({"lines": [], "offset": follower.offset, "eof": True})
            if self._view is None:
                self._loop.add_callback(self.close)
            else:  # a view stays open for the charts' rank picks, no longer listening to the hub
                self._loop.add_callback(self._unlisten)

        _executor.submit(finish)

    def _latest_status(self) -> JobStatus | None:
        """The job's newest status: the hub's watch's, else the one read at the start."""
        status = self.hub.status_of(self._handle.record.key)
        if isinstance(status, JobStatus):
            self._status = status
        return self._status

    def on_message(self, message: str | bytes) -> None:
        """``{"kind": "metrics_rank", "rank": N}`` (a view stream): chart rank N from now on, as
        the notebook widget does when its log's rank filter moves; anything else is ignored."""
        view, handle = self._view, getattr(self, "_handle", None)
        if view is None or handle is None:
            return
        try:
            msg = json.loads(message)
        except ValueError:
            return
        rank = msg.get("rank") if isinstance(msg, dict) and msg.get("kind") == "metrics_rank" else None
        record = handle.record
        if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < max(1, record.world_size):
            tier = self._tier
            view.pick(rank, lambda: tier.log_chunks(record, 0))

    # --- a service: the tier's pod-log followers ---------------------------------------------
    def _open_service(self) -> None:
        pod = self._query.pod
        skip = [self._query.offset]
        count = [0]

        def on_lines(lines: list[Any]) -> None:
            rows = []
            for line in lines:
                if pod is not None and line.pod != pod:
                    continue
                count[0] += 1
                if count[0] <= skip[0]:
                    continue
                rows.append([line.pod, line.text])
            if rows:
                self.send_soon({"lines": rows, "offset": count[0]})

        svc = self._handle
        assert isinstance(svc, Service)  # open() sends only services here

        def subscribe() -> None:
            sub = svc.watch(on_lines=on_lines)
            if self.ws_connection is None:
                sub.close()
            else:
                self._service_sub = sub

        _executor.submit(subscribe)

    def _unlisten(self) -> None:
        if self._hub_token is not None:
            self.hub.unlisten(self._hub_token)
            self._hub_token = None

    def on_close(self) -> None:
        self._unlisten()
        if self._follower is not None:
            self._follower.stop()
        if self._service_sub is not None:
            sub, self._service_sub = self._service_sub, None
            _executor.submit(sub.close)


def handler_table(base_url: str) -> list[tuple[str, type]]:
    """Every route of the extension (the tests iterate it to check each refuses strangers)."""
    base = url_path_join(base_url, API_PATH)
    item = f"jobs/{_SEG}/{_SEG}"
    return [
        (url_path_join(base, "jobs"), JobsHandler),
        (url_path_join(base, item), ItemHandler),
        (url_path_join(base, item, "logs"), LogsHandler),
        (url_path_join(base, item, "logs", "stream"), LogStreamHandler),
        (url_path_join(base, item, "(cancel|scale|restart|promote|rollback|forget)"), ActionHandler),
        (url_path_join(base, item, "stacks"), StacksHandler),
        (url_path_join(base, item, "files"), FilesHandler),
        (url_path_join(base, item, "files", "(.+)"), FileHandler),
        (url_path_join(base, "events"), EventsHandler),
        (url_path_join(base, "profiles"), ProfilesHandler),
        (url_path_join(base, "stats"), StatsHandler),
        (url_path_join(base, "history"), HistoryHandler),
        (url_path_join(base, "profiles", _SEG, "doctor"), DoctorHandler),
    ]

