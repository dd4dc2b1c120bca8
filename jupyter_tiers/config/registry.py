"""A local sqlite record of every job and service started, so any process can list and reattach.

The database lives in the Jupyter data dir (``jupyter --data-dir``/tiers/registry.sqlite), or at
``$JUPYTER_TIERS_REGISTRY``. It stores no secrets: env values are never written, only env names.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..batch.status import ended_entry
from ..core.detail import entries, with_entries
from ..core.errors import JobNotFound, TiersError
from ..core.model import JobSpec, JobStatus, ServeSpec, WorkKind
from ..core.record import JobRecord as JobRecord  # defined below the registry's layer, used with it

ENV_VAR = "JUPYTER_TIERS_REGISTRY"
MAX_LIST = 1_000_000
LOCK_TIMEOUT_S = 30.0  # how long a call waits for another process's write to end


class RegistryError(TiersError):
    """The registry file cannot be used (damaged, or locked too long); the message says which file
    and what to do."""


def registry_problem(path: Path, exc: sqlite3.DatabaseError) -> str:
    """One line for a sqlite error on the registry at ``path`` (pure)."""
    text = " ".join(str(exc).replace("*** in database main ***", "").split()) or type(exc).__name__
    if "locked" in text or "busy" in text:
        return (f"the registry {path} stayed locked by another process for {LOCK_TIMEOUT_S:.0f} s "
                f"({text}); try again")
    if isinstance(exc, sqlite3.OperationalError) and "disk" not in text and "malformed" not in text:
        return f"cannot use the registry {path}: {text}"
    return (f"the registry {path} is damaged ({text}) and was left as it is: move it aside to "
            f"start a new one, or recover its records with `sqlite3 {path} .recover`")


def _create_private(path: Path) -> None:
    """Create the database file 0600 without following a symlink (one planted in a shared data
    dir would make sqlite write elsewhere); an existing file of ours is made 0600 too."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise TiersError(f"the registry {path} is a symlink; refusing to follow it "
                             f"(remove it, or set ${ENV_VAR} to another file)") from None
        raise TiersError(f"cannot open the registry {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)

#: Version of the table layout, kept in sqlite's ``user_version``. 0: the first layout (jobs
#: only, written before versions were recorded); 2: jobs and services (``kind``), ``jobdir``
#: optional, ``detail``; 3: ``restarts`` (how many times a requeued job started again).
SCHEMA_VERSION = 3

_COLUMNS = ("key", "kind", "profile", "tier", "job_id", "name", "jobdir", "submitted_at", "state",
            "nodelist", "world_size", "spec", "script", "updated_at", "detail", "restarts")

_CREATE = """
CREATE TABLE IF NOT EXISTS jobs (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL DEFAULT 'job',
    profile TEXT NOT NULL,
    tier TEXT NOT NULL,
    job_id TEXT NOT NULL,
    name TEXT NOT NULL,
    jobdir TEXT,
    submitted_at REAL NOT NULL,
    state TEXT NOT NULL,
    nodelist TEXT,
    world_size INTEGER NOT NULL DEFAULT 0,
    spec TEXT NOT NULL,
    script TEXT NOT NULL,
    updated_at REAL NOT NULL,
    detail TEXT,
    restarts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_by_name ON jobs(profile, name);
CREATE INDEX IF NOT EXISTS jobs_by_time ON jobs(submitted_at);
"""

# Columns of the first layout, copied as they are when a version-0 file is migrated.
_V0_COLUMNS = ("key", "profile", "tier", "job_id", "name", "jobdir", "submitted_at", "state",
               "nodelist", "world_size", "spec", "script", "updated_at")


def migrate(db: sqlite3.Connection) -> None:
    """Bring a registry database to SCHEMA_VERSION in place (one transaction; data kept)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise TiersError(f"the registry was written by a newer jupyter-tiers (layout {version}, "
                         f"this one knows {SCHEMA_VERSION}); upgrade jupyter-tiers")
    if version == SCHEMA_VERSION:
        return
    has_jobs = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone()
    if has_jobs and version == 2:
        db.execute("ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0")
    elif has_jobs:
        # The first layout had NOT NULL jobdir/world_size and no kind: sqlite cannot relax a
        # constraint in place, so the table is rebuilt and its rows copied.
        cols = ", ".join(_V0_COLUMNS)
        db.execute("ALTER TABLE jobs RENAME TO jobs_v0")
        db.execute("DROP INDEX IF EXISTS jobs_by_name")
        db.execute("DROP INDEX IF EXISTS jobs_by_time")
        for statement in _CREATE.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"INSERT INTO jobs ({cols}, kind) SELECT {cols}, 'job' FROM jobs_v0")
        db.execute("DROP TABLE jobs_v0")
    else:
        for statement in _CREATE.split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def default_path() -> Path:
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "tiers" / "registry.sqlite"




def spec_for_record(spec: JobSpec | ServeSpec) -> dict[str, Any]:
    """A job's or a service's spec as stored: everything but env values (names only) and the
    cell body (a JobSpec's ``script``, a ServeSpec's ``body``)."""
    data = asdict(spec)
    data["env"] = [[k, None] for k, _ in spec.env]
    data.pop("script", None)
    data.pop("body", None)
    data.pop("metadata", None)
    return data


class Registry:
    """Thread-safe access to the registry database (one short connection per call)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.Lock()
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _create_private(self.path)
        with self._lock, self._connect() as db:
            self._check(db)
            migrate(db)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            db = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT_S)
            try:
                db.row_factory = sqlite3.Row
                with db:
                    yield db
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:  # never sqlite's traceback: one line naming the file
            raise RegistryError(registry_problem(self.path, exc)) from None

    def _check(self, db: sqlite3.Connection) -> None:
        """Refuse a damaged file (pages lost or garbled) rather than list it with records silently
        missing; the file is left exactly as it is."""
        rows = db.execute("PRAGMA quick_check").fetchall()
        found = [str(r[0]) for r in rows]
        if found != ["ok"]:
            raise sqlite3.DatabaseError(found[0] if found else "quick_check gave no answer")

    def add(self, record: JobRecord) -> None:
        row = asdict(record)
        row["spec"] = json.dumps(record.spec, sort_keys=True)
        row["key"] = record.key
        names = ", ".join(_COLUMNS)
        values = ", ".join(":" + c for c in _COLUMNS)
        with self._lock, self._connect() as db:
            db.execute(f"INSERT OR REPLACE INTO jobs ({names}) VALUES ({values})", row)

    def update(self, key: str, *, state: str, nodelist: str | None = None,
               detail: str | None = None, restarts: int | None = None) -> None:
        """Record a new state (and node list, detail line or restart count, when given)."""
        with self._lock, self._connect() as db:
            db.execute(
                "UPDATE jobs SET state = ?, nodelist = COALESCE(?, nodelist),"
                " detail = COALESCE(?, detail), restarts = COALESCE(?, restarts),"
                " updated_at = ? WHERE key = ?",
                (state, nodelist, detail, restarts, time.time(), key),
            )

    def change_detail(self, key: str, change: Callable[[str | None], str | None]) -> None:
        """Replace a record's ``detail`` by ``change(current detail)`` in one transaction (read
        and write together), so writers of different parts of one detail (an array's task
        counts, its tasks' checkpoint uploads) keep each other's part. No record: nothing."""
        with self._lock, self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT detail FROM jobs WHERE key = ?", (key,)).fetchone()
            if row is None:
                return
            db.execute("UPDATE jobs SET detail = ?, updated_at = ? WHERE key = ?",
                       (change(row["detail"]), time.time(), key))

    def set_entries(self, key: str, **changes: Any) -> None:
        """Replace the named entries of a record's ``detail`` (core.detail), keeping the others,
        in one transaction. No record: nothing."""
        self.change_detail(key, lambda detail: with_entries(detail, **changes))

    def record_end(self, record: JobRecord, status: JobStatus) -> None:
        """Keep what an ended job's final status says of its end in its ``detail`` (the one entry
        ``ended``: failure reason, run time, first failed rank; batch/status.ended_entry), so
        views that read the record alone (a sidebar row, History's EXIT) can say them. Call it
        before recording the final state, so a reader of that state finds the entry. No write
        while the job runs on or when ``record`` already holds the same entry."""
        entry = ended_entry(status)
        if entry is None or entries(record.detail).get("ended") == entry:
            return
        self.set_entries(record.key, ended=entry)

    def remove(self, key: str) -> None:
        """Forget one record (a deleted service)."""
        with self._lock, self._connect() as db:
            db.execute("DELETE FROM jobs WHERE key = ?", (key,))

    @staticmethod
    def _record(row: sqlite3.Row) -> JobRecord:
        data = dict(row)
        data.pop("key")
        data["spec"] = json.loads(data["spec"])
        data["jobdir"] = data["jobdir"] or ""
        # The column holds "job" or "service" (old rows: the default 'job'); read anything else as a job.
        data["kind"] = WorkKind.SERVICE if data["kind"] == WorkKind.SERVICE.value else WorkKind.JOB
        return JobRecord(**data)

    def get(self, ref: str, profile: str | None = None) -> JobRecord:
        """A job by ``profile/job_id``, or by bare job id (newest match; narrowed by profile)."""
        if not _storable(ref, profile):
            raise JobNotFound(f"no job {ref!r} in the registry ({self.path})")
        with self._connect() as db:
            if "/" in ref:
                row = db.execute("SELECT * FROM jobs WHERE key = ?", (ref,)).fetchone()
            elif profile:
                row = db.execute(
                    "SELECT * FROM jobs WHERE job_id = ? AND profile = ?"
                    " ORDER BY submitted_at DESC LIMIT 1",
                    (ref, profile),
                ).fetchone()
            else:
                row = db.execute(
                    "SELECT * FROM jobs WHERE job_id = ? ORDER BY submitted_at DESC LIMIT 1",
                    (ref,),
                ).fetchone()
        if row is None:
            raise JobNotFound(f"no job {ref!r} in the registry ({self.path})")
        return self._record(row)

    def find_by_name(self, profile: str, name: str) -> JobRecord | None:
        """The newest job of ``profile`` with this name, if any."""
        if not _storable(profile, name):
            return None
        with self._connect() as db:
            row = db.execute(
                "SELECT * FROM jobs WHERE profile = ? AND name = ?"
                " ORDER BY submitted_at DESC LIMIT 1",
                (profile, name),
            ).fetchone()
        return self._record(row) if row else None

    def find_named(self, name: str, kind: WorkKind = WorkKind.JOB) -> JobRecord | None:
        """The newest record of any profile with this name and kind, if any."""
        if not _storable(name, kind):
            return None
        with self._connect() as db:
            row = db.execute(
                "SELECT * FROM jobs WHERE name = ? AND kind = ? ORDER BY submitted_at DESC LIMIT 1",
                (name, kind),
            ).fetchone()
        return self._record(row) if row else None

    def list(self, limit: int = 50, profile: str | None = None,
             kind: WorkKind | None = None) -> list[JobRecord]:
        """Newest first, optionally of one profile and one kind (``job`` or ``service``)."""
        if not _storable(profile, kind):
            return []
        limit = max(0, min(int(limit), MAX_LIST))  # sqlite integers are 64-bit
        where = [(col, val) for col, val in (("profile", profile), ("kind", kind)) if val]
        query = "SELECT * FROM jobs"
        args: tuple[Any, ...] = tuple(val for _, val in where)
        if where:
            query += " WHERE " + " AND ".join(f"{col} = ?" for col, _ in where)
        query += " ORDER BY submitted_at DESC LIMIT ?"
        with self._connect() as db:
            rows = db.execute(query, (*args, limit)).fetchall()
        return [self._record(r) for r in rows]


def _storable(*texts: str | None) -> bool:
    """Whether sqlite can take these as text: a lone surrogate (typed, or from a front end's
    JSON) cannot be encoded, so nothing stored can match it."""
    try:
        for text in texts:
            if text is not None:
                text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

