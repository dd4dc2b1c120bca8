"""Pure parsers of the REST API's query strings, path segments and JSON bodies.

Every function raises :class:`~jupyter_tiers.core.errors.SpecError` naming what was wrong and what is
allowed; the handlers turn that into a 400 JSON error. No I/O here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...app.actions import MAX_LOG_LINES, MAX_REPLICAS
from ...batch import history
from ...core.errors import SpecError, TiersError
from ...core.model import WorkKind
from ...data.sync import check_relpath

#: Longest query value, path segment or body accepted (everything real is far shorter).
MAX_TEXT = 256
MAX_BODY = 4096
MAX_DEPTH = 8  # JSON nesting of a body (``{"replicas": N}`` is 1)
_SEGMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")
_INT_RE = re.compile(r"\d{1,12}")

Query = Mapping[str, Sequence[bytes]]


def _one(query: Query, name: str) -> str | None:
    """The single value of ``name`` (None when absent); repeated or undecodable is an error."""
    values = query.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise SpecError(name, "give it once")
    raw = values[0]
    if len(raw) > MAX_TEXT:
        raise SpecError(name, f"too long (at most {MAX_TEXT} characters)")
    try:
        return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    except UnicodeDecodeError:
        raise SpecError(name, "not valid UTF-8") from None


def _int(query: Query, name: str, low: int, high: int, default: int | None) -> int | None:
    text = _one(query, name)
    if text is None or text == "":
        return default
    if not _INT_RE.fullmatch(text) or not low <= int(text) <= high:
        raise SpecError(name, f"give a whole number from {low} to {high}")
    return int(text)


def segment(text: str, what: str) -> str:
    """A profile name or job id from the URL path (already URL-decoded)."""
    if not isinstance(text, str) or not _SEGMENT_RE.fullmatch(text):
        raise SpecError(what, "letters, digits, '.', '_' and '-' only, starting with a letter or digit")
    return text


def ref(profile: str, job_id: str) -> str:
    """The registry key of ``jobs/{profile}/{id}``."""
    return f"{segment(profile, 'profile')}/{segment(job_id, 'id')}"


def flag(query: Query, name: str, default: bool) -> bool:
    """A boolean query flag: 1/0, true/false, yes/no."""
    text = _one(query, name)
    if text is None or text == "":
        return default
    low = text.lower()
    if low in ("1", "true", "yes"):
        return True
    if low in ("0", "false", "no"):
        return False
    raise SpecError(name, "give 1 or 0")


@dataclass(frozen=True)
class ListQuery:
    refresh: bool = True
    profile: str | None = None
    kind: WorkKind | None = None
    limit: int = 200


def list_query(query: Query) -> ListQuery:
    """``GET jobs?refresh=0|1&profile=P&kind=job|service&limit=N``."""
    profile = _one(query, "profile") or None
    if profile is not None:
        segment(profile, "profile")
    kind_text = _one(query, "kind") or None
    if kind_text is not None and kind_text not in (WorkKind.JOB.value, WorkKind.SERVICE.value):
        raise SpecError("kind", "give job or service")
    kind = WorkKind(kind_text) if kind_text is not None else None
    limit = _int(query, "limit", 1, 1000, 200)
    assert limit is not None
    return ListQuery(refresh=flag(query, "refresh", True), profile=profile, kind=kind, limit=limit)


@dataclass(frozen=True)
class LogQuery:
    rank: int | None = None
    pod: str | None = None
    offset: int = 0
    limit: int | None = None
    backlog: int | None = None
    #: A job's stream in the notebook widget's messages (app/viewstate/job_stream.py), not rows.
    view: bool = False


def log_query(query: Query, *, with_limit: bool = True) -> LogQuery:
    """``logs?rank=N|pod=NAME&offset=O&limit=L`` for a range; a stream takes ``backlog=BYTES``
    instead of ``limit`` (without an offset: start that many bytes before the log's end), and
    ``view=1`` for a job's whole log as the notebook widget gets it (no rank or pod filter)."""
    rank = _int(query, "rank", 0, 10_000_000, None)
    pod = _one(query, "pod") or None
    if pod is not None:
        segment(pod, "pod")
    if rank is not None and pod is not None:
        raise SpecError("rank", "give rank (a job) or pod (a service), not both")
    offset = _int(query, "offset", 0, 10**12, 0)
    assert offset is not None
    limit = _int(query, "limit", 1, 10**9, None) if with_limit else None
    if limit is not None:
        limit = min(limit, MAX_LOG_LINES)
    backlog = None if with_limit else _int(query, "backlog", 0, 10**12, None)
    view = False if with_limit else flag(query, "view", False)
    if view and (rank is not None or pod is not None):
        raise SpecError("view", "view=1 streams the whole job's log as the notebook widget shows it; "
                        "leave out rank and pod")
    return LogQuery(rank=rank, pod=pod, offset=offset, limit=limit, backlog=backlog, view=view)


def nesting_depth(text: str) -> int:
    """How deeply JSON arrays/objects nest in ``text`` (brackets inside strings not counted)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def json_body(body: bytes, expected: str) -> Any:
    """A request body as JSON (None when empty), at most MAX_BODY bytes nested at most
    MAX_DEPTH deep: a deeper body is refused before the parser recurses into it."""
    if len(body) > MAX_BODY:
        raise SpecError("body", f"too long (at most {MAX_BODY} bytes)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("body", f"not UTF-8 JSON; {expected}") from None
    if not text.strip():
        return None
    if nesting_depth(text) > MAX_DEPTH:
        raise SpecError("body", f"nested too deeply (at most {MAX_DEPTH} levels); {expected}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise SpecError("body", f"not JSON; {expected}") from None


def scale_body(body: bytes) -> int:
    """``{"replicas": n}`` with n from 0 to MAX_REPLICAS."""
    data = json_body(body, 'send {"replicas": N}')
    if not isinstance(data, dict) or "replicas" not in data:
        raise SpecError("body", 'send {"replicas": N}')
    unknown = sorted(set(data) - {"replicas"})
    if unknown:
        raise SpecError(str(unknown[0])[:40], 'unknown field; send {"replicas": N}')
    replicas = data["replicas"]
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= MAX_REPLICAS:
        raise SpecError("replicas", f"give a whole number from 0 to {MAX_REPLICAS}")
    return replicas


@dataclass(frozen=True)
class HistoryParams:
    """``GET history``'s validated query (the values checked by jupyter_tiers.batch.history)."""

    profile: str | None = None
    days: int = 7
    user: str | None = None
    states: tuple[str, ...] = ()
    limit: int = 50
    job: str | None = None
    tail: int | None = None


def history_query(query: Query) -> HistoryParams:
    """``GET history?profile=P&days=N&user=U|all&state=S[,S]&limit=N[&job=ID&tail=N]``.

    ``state`` takes sacct names or their short codes (``FAILED,TO``); ``job`` asks for one job
    (``123``, ``123_4``) whenever it ran, and ``tail`` (with ``job`` only) for the end of its output."""
    profile = _one(query, "profile") or None
    if profile is not None:
        segment(profile, "profile")
    days = _int(query, "days", 1, history.MAX_DAYS, history.DEFAULT_DAYS)
    limit = _int(query, "limit", 1, history.MAX_LIMIT, history.DEFAULT_LIMIT)
    assert days is not None and limit is not None
    user = history.check_user(_one(query, "user") or None)
    states = history.check_states(_one(query, "state") or None)
    job_text = _one(query, "job") or None
    job = None if job_text is None else history.check_job_ref(job_text)
    tail = _int(query, "tail", 0, history.MAX_TAIL, None)
    if tail is not None and job is None:
        raise SpecError("tail", "give it with job=ID (the end of one job's output)")
    return HistoryParams(profile=profile, days=days, user=user, states=states, limit=limit, job=job,
                         tail=tail)


def file_pattern(query: Query) -> str:
    """``?pattern=``: a glob (default ``*``)."""
    return _one(query, "pattern") or "*"


def file_name(text: str) -> str:
    """A listed file's name from the URL path: a safe relative path (sync.check_relpath)."""
    try:
        return check_relpath(text, "name")
    except TiersError as exc:
        raise SpecError("name", str(exc)) from None


def attachment(name: str) -> str:
    """A Content-Disposition header for ``name`` (RFC 6266: an ASCII fallback, then UTF-8)."""
    from urllib.parse import quote

    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\;' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
