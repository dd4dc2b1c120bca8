"""Exceptions shared across tiers. Messages are short and say what was wrong and what is allowed."""

from __future__ import annotations


class TiersError(Exception):
    """Base of every error jupyter-tiers raises on purpose."""


class SpecError(TiersError, ValueError):
    """A job or serve spec has a bad value. ``field`` names it."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class SubmitError(TiersError):
    """The scheduler refused a job (its own message is kept)."""


class JobNotFound(TiersError):
    """No job with that id in the registry or on the cluster."""


class ControllerUnreachable(TiersError):
    """The scheduler's controller did not answer (it may be restarting)."""
