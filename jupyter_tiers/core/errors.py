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


class ConfigError(TiersError, ValueError):
    """A profile file or value is wrong. The message names the file, the key and what is allowed."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {problem}")


class Unsupported(TiersError):
    """The tier of this profile does not do that; the message names the profile and what does."""


class SubmitError(TiersError):
    """The scheduler refused a job (its own message is kept)."""


class JobNotFound(TiersError):
    """No job or service with that id in the registry or on the cluster."""


class OwnJob(TiersError):
    """A cancel that would end the Slurm job this notebook's server or kernel runs inside (it
    would stop JupyterLab itself): refused; the message names the job and how to end it."""


class ControllerUnreachable(TiersError):
    """The scheduler's controller did not answer (it may be restarting)."""


class ApiError(TiersError):
    """A cluster API refused a request. The message is one line saying what and why."""

    def __init__(self, message: str, status: int = 0) -> None:
        self.status = status
        super().__init__(message)


class ApiUnreachable(ApiError):
    """The cluster's API did not answer (it may be restarting, or the network is down)."""
