"""Pure: one training job or service as the registry records it (a plain value, no I/O).

It lives below the registry (which stores it) so that every layer can name it in its types;
``jupyter_tiers.config.registry`` re-exports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .model import WorkKind

#: A service record's key for its running canary (``--canary``): share, replica counts, revision.
LIVE_CANARY = "live_canary"

@dataclass(frozen=True)
class JobRecord:
    """One training job or service as the registry knows it.

    ``kind`` is a :class:`~jupyter_tiers.core.model.WorkKind` (job or service). For a service,
    ``job_id`` is its name (unique in its profile's namespace), ``jobdir`` is empty,
    ``world_size`` is 0, ``script`` is the rendered YAML (secrets redacted) and ``detail`` a
    short line such as ``2/2 ready``.
    """

    profile: str
    tier: str
    job_id: str
    name: str
    jobdir: str = ""
    world_size: int = 0
    submitted_at: float = field(default_factory=time.time)
    state: str = "PENDING"
    nodelist: str | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    script: str = ""
    updated_at: float = field(default_factory=time.time)
    kind: WorkKind = WorkKind.JOB
    detail: str | None = None
    restarts: int = 0  # a requeued job's restarts so far (requeue.py)

    def __post_init__(self) -> None:
        # A plain "job"/"service" (callers, tests) becomes the WorkKind; anything else is a ValueError.
        object.__setattr__(self, "kind", WorkKind(self.kind))

    @property
    def key(self) -> str:
        """Unique across clusters: ``profile/job_id``."""
        return f"{self.profile}/{self.job_id}"


class RecordStore(Protocol):
    """What the layers below the registry ask of it (``jupyter_tiers.config.registry.Registry`` is
    one): read a record, change its state and detail."""

    path: Path

    def get(self, ref: str, profile: str | None = None) -> JobRecord: ...

    def find_named(self, name: str, kind: WorkKind = WorkKind.JOB) -> JobRecord | None: ...

    def update(self, key: str, *, state: str, nodelist: str | None = None,
               detail: str | None = None, restarts: int | None = None) -> None: ...

    def change_detail(self, key: str, change: Callable[[str | None], str | None]) -> None: ...
