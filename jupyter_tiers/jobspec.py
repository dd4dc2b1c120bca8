"""Validation of JobSpec values (pure). The syntax is Slurm's, which the local tier emulates;
every value is checked before it reaches a script or a shell."""

from __future__ import annotations

import re

from .errors import SpecError
from .model import LAUNCHERS, JobSpec

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=@-]{0,127}$")
_LIST_RE = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
_CONSTRAINT_RE = re.compile(r"^[A-Za-z0-9_.,&|\[\]*()!:-]+$")
_TIME_RE = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d{1,2}(:\d{1,2}){0,2})$")
_MEM_RE = re.compile(r"^\d+[KMGT]?$", re.IGNORECASE)
_SWITCHES_RE = re.compile(r"^\d+(@(\d+-)?\d{1,2}(:\d{1,2}){0,2})?$")
_GPUS_RE = re.compile(r"^([A-Za-z0-9_.-]+:)?\d+$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OPT_NAME_RE = re.compile(r"^--[a-z][a-z0-9-]*$")
_OPT_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:@%+=/\[\]*&|!()-]+$")
_PYTHON_RE = re.compile(r"^[A-Za-z0-9_./+~-]+$")

# Options jupyter-tiers sets itself; passing them through would break log following or status.
_MANAGED_OPTIONS = {
    "--output": "jupyter-tiers writes the log to the job directory",
    "--error": "jupyter-tiers writes the log to the job directory",
    "--chdir": "the job runs in its job directory",
    "--open-mode": "the log is opened in append mode",
    "--parsable": "set by jupyter-tiers",
    "--wrap": "the cell body is the script",
    "--array": "array jobs are not supported yet",
    "--job-name": "use --name",
    "--nodes": "use --nodes",
    "--ntasks-per-node": "use --ntasks-per-node",
    "--export": "use --env K=V",
}



def _need(field: str, value: str | None, pattern: re.Pattern[str], allowed: str) -> None:
    if value is None:
        return
    if not pattern.match(value):
        raise SpecError(field, f"{value!r} is not allowed; {allowed}")


def _positive(field: str, value: int | None, upper: int = 1_000_000) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise SpecError(field, f"must be a whole number from 1 to {upper}, got {value!r}")


def validate_spec(spec: JobSpec) -> None:
    """Raise SpecError for the first bad field of ``spec``."""
    _need("name", spec.name, _NAME_RE,
          "use letters, digits and . _ + = @ - (at most 128, starting with a letter or digit)")
    _positive("nodes", spec.nodes, 100_000)
    _positive("ntasks_per_node", spec.ntasks_per_node, 4096)
    _positive("cpus_per_task", spec.cpus_per_task, 4096)
    _positive("nproc_per_node", spec.nproc_per_node, 4096)
    if spec.rdzv_port is not None:
        _positive("rdzv_port", spec.rdzv_port, 65535)
    _need("gpus_per_node", spec.gpus_per_node, _GPUS_RE, "use a count like 8 or type:count like a100:8")
    _need("mem", spec.mem, _MEM_RE, "use a size like 4000, 16G or 512M")
    _need("time", spec.time, _TIME_RE,
          "use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")
    for field in ("partition", "account", "qos"):
        _need(field, getattr(spec, field), _LIST_RE,
              "use letters, digits, '.', '_', '-' (comma-separated for several)")
    _need("constraint", spec.constraint, _CONSTRAINT_RE,
          "use Slurm feature syntax: names with & | , [ ] * ( ) ! : (no spaces)")
    _need("switches", spec.switches, _SWITCHES_RE, "use COUNT or COUNT@HH:MM:SS, e.g. 1@10:00")
    if spec.launcher not in LAUNCHERS:
        raise SpecError("launcher", f"{spec.launcher!r} is not allowed; use one of {', '.join(LAUNCHERS)}")
    _need("python", spec.python, _PYTHON_RE, "give an interpreter path or name without spaces")
    for key, value in spec.env:
        if not _ENV_KEY_RE.match(key):
            raise SpecError(f"env {key!r}", "names use letters, digits and '_' and do not start with a digit")
        if "\x00" in value:
            raise SpecError(f"env {key}", "values cannot contain a NUL byte")
    for i, line in enumerate(spec.setup):
        if "\n" in line or "\r" in line or "\x00" in line:
            raise SpecError(f"setup[{i}]", "each setup entry is one line")
    for opt in spec.sbatch_options:
        parse_sbatch_option(opt)
    if "\x00" in spec.script:
        raise SpecError("script", "the cell body cannot contain a NUL byte")


def parse_sbatch_option(opt: str) -> tuple[str, str | None]:
    """Validate one passthrough option ``--key=value`` or ``--flag``; returns (key, value)."""
    name, sep, value = opt.partition("=")
    if not _OPT_NAME_RE.match(name):
        raise SpecError(
            "sbatch option", f"{opt!r} is not allowed; write long options as --key=value or --flag"
        )
    if name in _MANAGED_OPTIONS:
        raise SpecError("sbatch option", f"{name} cannot be passed through: {_MANAGED_OPTIONS[name]}")
    if sep and not _OPT_VALUE_RE.match(value):
        raise SpecError(
            "sbatch option",
            f"value of {name} {value!r} is not allowed; no spaces, quotes or shell characters",
        )
    return name, (value if sep else None)
