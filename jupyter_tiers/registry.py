"""A local sqlite record of every job submitted, so any process can list and reattach to jobs.

The database lives in the Jupyter data dir (``jupyter --data-dir``/tiers/registry.sqlite), or at
``$JUPYTER_TIERS_REGISTRY``. It stores no secrets: env values are never written, only env names.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import JobNotFound
from .model import JobSpec

ENV_VAR = "JUPYTER_TIERS_REGISTRY"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    key TEXT PRIMARY KEY,
    profile TEXT NOT NULL,
    tier TEXT NOT NULL,
    job_id TEXT NOT NULL,
    name TEXT NOT NULL,
    jobdir TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    state TEXT NOT NULL,
    nodelist TEXT,
    world_size INTEGER NOT NULL,
    spec TEXT NOT NULL,
    script TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_by_name ON jobs(profile, name);
CREATE INDEX IF NOT EXISTS jobs_by_time ON jobs(submitted_at);
"""


def default_path() -> Path:
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "tiers" / "registry.sqlite"


def spec_for_record(spec: JobSpec) -> dict[str, Any]:
    """The spec as stored: everything but env values (names only) and the cell body."""
    data = asdict(spec)
    data["env"] = [[k, None] for k, _ in spec.env]
    data.pop("script", None)
    data.pop("metadata", None)
    return data


@dataclass(frozen=True)
class JobRecord:
    """One submitted job as the registry knows it."""

    profile: str
    tier: str
    job_id: str
    name: str
    jobdir: str
    world_size: int
    submitted_at: float = field(default_factory=time.time)
    state: str = "PENDING"
    nodelist: str | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    script: str = ""
    updated_at: float = field(default_factory=time.time)

    @property
    def key(self) -> str:
        """Unique across clusters: ``profile/job_id``."""
        return f"{self.profile}/{self.job_id}"


class Registry:
    """Thread-safe access to the registry database (one short connection per call)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30)
        try:
            db.row_factory = sqlite3.Row
            with db:
                yield db
        finally:
            db.close()

    def add(self, record: JobRecord) -> None:
        row = asdict(record)
        row["spec"] = json.dumps(record.spec, sort_keys=True)
        row["key"] = record.key
        with self._lock, self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO jobs (key, profile, tier, job_id, name, jobdir,"
                " submitted_at, state, nodelist, world_size, spec, script, updated_at)"
                " VALUES (:key, :profile, :tier, :job_id, :name, :jobdir, :submitted_at, :state,"
                " :nodelist, :world_size, :spec, :script, :updated_at)",
                row,
            )

    def update(self, key: str, *, state: str, nodelist: str | None = None) -> None:
        with self._lock, self._connect() as db:
            db.execute(
                "UPDATE jobs SET state = ?, nodelist = COALESCE(?, nodelist), updated_at = ?"
                " WHERE key = ?",
                (state, nodelist, time.time(), key),
            )

    @staticmethod
    def _record(row: sqlite3.Row) -> JobRecord:
        data = dict(row)
        data.pop("key")
        data["spec"] = json.loads(data["spec"])
        return JobRecord(**data)

    def get(self, ref: str, profile: str | None = None) -> JobRecord:
        """A job by ``profile/job_id``, or by bare job id (newest match; narrowed by profile)."""
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
        with self._connect() as db:
            row = db.execute(
                "SELECT * FROM jobs WHERE profile = ? AND name = ?"
                " ORDER BY submitted_at DESC LIMIT 1",
                (profile, name),
            ).fetchone()
        return self._record(row) if row else None

    def list(self, limit: int = 50, profile: str | None = None) -> list[JobRecord]:
        """Newest first."""
        query = "SELECT * FROM jobs"
        args: tuple[Any, ...] = ()
        if profile:
            query += " WHERE profile = ?"
            args = (profile,)
        query += " ORDER BY submitted_at DESC LIMIT ?"
        with self._connect() as db:
            rows = db.execute(query, (*args, limit)).fetchall()
        return [self._record(r) for r in rows]

