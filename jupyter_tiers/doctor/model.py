"""What ``jupyter tiers doctor`` reports: one :class:`Check` per line, grouped per profile (pure data)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(enum.Enum):
    """A check's verdict. ``SKIP``: not run, because an earlier check failed or it was not asked."""

    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True)
class Check:
    """One line of the report. ``fix`` says in words what to do (every FAIL has one); ``data`` is
    what a script may want (versions, counts, missing verbs) and goes into ``--json`` only."""

    name: str
    status: Status
    detail: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status is Status.FAIL and not self.fix:
            raise ValueError(f"check {self.name!r} failed without saying how to fix it")


def ok(name: str, detail: str, **data: Any) -> Check:
    return Check(name, Status.OK, detail, data=data)


def warn(name: str, detail: str, fix: str = "", **data: Any) -> Check:
    return Check(name, Status.WARN, detail, fix, data=data)


def fail(name: str, detail: str, fix: str, **data: Any) -> Check:
    return Check(name, Status.FAIL, detail, fix, data=data)


def skip(name: str, why: str) -> Check:
    return Check(name, Status.SKIP, why)


@dataclass(frozen=True)
class ProfileReport:
    """The checks of one profile, in the order they ran."""

    profile: str
    tier: str
    checks: tuple[Check, ...]
    extra: str = ""  # printed after the checks (``--suggest-role``: the Role's YAML)

    @property
    def failed(self) -> bool:
        return any(c.status is Status.FAIL for c in self.checks)


@dataclass(frozen=True)
class Report:
    """The whole run: one :class:`ProfileReport` per profile asked about."""

    profiles: tuple[ProfileReport, ...]

    @property
    def failed(self) -> bool:
        return any(p.failed for p in self.profiles)

    @property
    def exit_status(self) -> int:
        """1 when any check failed, else 0 (warnings do not fail a run)."""
        return 1 if self.failed else 0
