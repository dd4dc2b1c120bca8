"""Validation of JobSpec values (pure). The syntax is Slurm's, which the local tier emulates;
every value is checked before it reaches a script or a shell."""

from __future__ import annotations

import re

from ..batch.arrays import plan_array
from ..batch.signals import parse_signal
from ..core.errors import SpecError
from ..core.model import LAUNCHERS, JobSpec

# Every pattern is used with fullmatch: "$" would also accept a trailing newline.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+=@-]{0,127}")
_LIST_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}(,[A-Za-z0-9_.-]{1,128}){0,63}")
_CONSTRAINT_RE = re.compile(r"[A-Za-z0-9_.,&|\[\]*()!:-]{1,1024}")
# Bounded digits: Slurm keeps limits in 32 bits, and the local tier turns them into seconds.
_TIME_RE = re.compile(r"\d{1,8}|\d{1,8}:\d{1,2}|\d{1,6}:\d{1,2}:\d{1,2}|\d{1,5}-\d{1,2}(:\d{1,2}){0,2}")
_MEM_RE = re.compile(r"\d{1,15}[KMGT]?", re.IGNORECASE)
_SWITCHES_RE = re.compile(r"\d{1,6}(@(\d{1,5}-)?\d{1,2}(:\d{1,2}){0,2})?")
_GPUS_RE = re.compile(r"([A-Za-z0-9_.-]{1,64}:)?\d{1,6}")
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_OPT_NAME_RE = re.compile(r"--[a-z][a-z0-9-]{0,63}")
_OPT_VALUE_RE = re.compile(r"[A-Za-z0-9_.,:@%+=/\[\]*&|!()-]{1,1024}")
# An interpreter name or path; "~/" only in front (the script expands it as $HOME).
_PYTHON_RE = re.compile(r"(~/)?[A-Za-z0-9_./+][A-Za-z0-9_./+-]{0,1023}")

# Names the job's environment gets from Slurm, torchrun or jupyter-tiers, or that the job script
# itself needs: an --env value would silently break ranks, rendezvous or the script.
# SBATCH_/SALLOC_/SRUN_: Slurm's commands read them as options (env.sh is sourced right before the
# srun launch line, so SRUN_EXPORT_ENV or SRUN_CONTAINER would choose every rank's environment).
RESERVED_ENV_PREFIXES = ("JT_", "SLURM_", "SLURMD_", "SBATCH_", "SALLOC_", "SRUN_", "TORCHELASTIC_",
                         "MASTER_")
RESERVED_ENV_NAMES = frozenset({
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "PATH", "HOME", "IFS", "BASH_ENV", "ENV",
    "SHELLOPTS", "BASHOPTS", "PYTHONUNBUFFERED",
})
# Real sbatch options that are also a prefix of a managed one (getopt takes the exact match).
_EXACT_OPTIONS = frozenset({"--ntasks"})

# Options jupyter-tiers sets itself; passing them through would break log following or status.
_MANAGED_OPTIONS = {
    "--output": "jupyter-tiers writes the log to the job directory",
    "--error": "jupyter-tiers writes the log to the job directory",
    "--chdir": "the job runs in its job directory",
    "--open-mode": "the log is opened in append mode",
    "--parsable": "set by jupyter-tiers",
    "--wrap": "the cell body is the script",
    "--array": "use --array (or --sweep)",
    "--job-name": "use --name",
    "--nodes": "use --nodes",
    "--ntasks-per-node": "use --ntasks-per-node",
    "--export": "use --env K=V",
}
# Options refused in passthrough from any file or magic line: each chooses code or a destination
# (a container image, a file of environment variables, where Slurm mails the job's events).
_REFUSED_OPTIONS = {
    "--container": "it chooses the container (code) the job runs in",
    "--container-id": "it chooses the container (code) the job runs in",
    "--export-file": "it loads environment variables from a file; use --env K=V",
    "--mail-user": "it sends the job's events to an address; Slurm mails the submitting user",
}



def _shown(value: str, limit: int = 60) -> str:
    return repr(value[:limit]) + ("..." if len(value) > limit else "")


def _need(field: str, value: str | None, pattern: re.Pattern[str], allowed: str) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not pattern.fullmatch(value):
        shown = _shown(value) if isinstance(value, str) else type(value).__name__
        raise SpecError(field, f"{shown} is not allowed; {allowed}")


def _utf8(field: str, value: str) -> None:
    """Text that must reach a file: a lone surrogate (an undecodable byte in the kernel's
    environment) cannot be written as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError(field, "is not valid UTF-8 text (it holds an undecodable byte)") from None


def check_env_name(key: str) -> None:
    """A name ``--env`` may set: a shell variable name that is not reserved (RESERVED_ENV_*)."""
    if not isinstance(key, str) or not _ENV_KEY_RE.fullmatch(key):
        shown = _shown(key) if isinstance(key, str) else type(key).__name__
        raise SpecError(f"env {shown}", "names use letters, digits and '_' and do not start with a digit")
    if key in RESERVED_ENV_NAMES or key.startswith(RESERVED_ENV_PREFIXES):
        raise SpecError(f"env {key}", "is set by Slurm, torchrun or jupyter-tiers for every rank (or "
                        "needed by the job script); reserved: "
                        + ", ".join(p + "*" for p in RESERVED_ENV_PREFIXES) + ", "
                        + ", ".join(sorted(RESERVED_ENV_NAMES))
                        + " (change PATH with the profile's setup lines)")


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
    _need("python", spec.python, _PYTHON_RE,
          "give an interpreter path or name without spaces ('~/' allowed in front)")
    for key, value in spec.env:  # the value is never shown: it may be a secret
        check_env_name(key)
        if not isinstance(value, str) or "\x00" in value:
            raise SpecError(f"env {key}", "values are text without a NUL byte")
        _utf8(f"env {key}", value)
    for i, line in enumerate(spec.setup):
        if not isinstance(line, str) or "\n" in line or "\r" in line or "\x00" in line:
            raise SpecError(f"setup[{i}]", "each setup entry is one line")
        _utf8(f"setup[{i}]", line)
    for opt in spec.sbatch_options:
        parse_sbatch_option(opt)
    if spec.signal is not None:
        parse_signal(spec.signal)
        if any(o.split("=", 1)[0] == "--signal" for o in spec.sbatch_options):
            raise SpecError("signal", "give either --signal or --sbatch --signal=..., not both")

    plan_array(spec.array, spec.sweep)
    if "\x00" in spec.script:
        raise SpecError("script", "the cell body cannot contain a NUL byte")
    _utf8("script", spec.script)


def parse_sbatch_option(opt: str) -> tuple[str, str | None]:
    """Validate one passthrough option ``--key=value`` or ``--flag``; returns (key, value).

    sbatch (getopt) also takes any unambiguous abbreviation (``--open-m`` for ``--open-mode``),
    so a name that abbreviates a managed option is refused like the option itself.
    """
    if not isinstance(opt, str):
        raise SpecError("sbatch option", f"expected text such as --hold, got {type(opt).__name__}")
    name, sep, value = opt.partition("=")
    if not _OPT_NAME_RE.fullmatch(name):
        raise SpecError(
            "sbatch option", f"{_shown(opt)} is not allowed; write long options as --key=value or --flag"
        )
    managed = name if name in _MANAGED_OPTIONS else next(
        (m for m in _MANAGED_OPTIONS if m.startswith(name) and name not in _EXACT_OPTIONS), None)
    if managed is not None:
        as_ = "" if managed == name else f" (sbatch reads it as {managed})"
        raise SpecError("sbatch option", f"{name} cannot be passed through{as_}: {_MANAGED_OPTIONS[managed]}")
    # --container* whatever follows; an abbreviation of a refused option like the option
    refused = (name if name in _REFUSED_OPTIONS or name.startswith("--container")
               else next((r for r in _REFUSED_OPTIONS if r.startswith(name)), None))
    if refused is not None:
        as_ = "" if refused == name else f" (sbatch reads it as {refused})"
        why = _REFUSED_OPTIONS.get(refused, _REFUSED_OPTIONS["--container"])
        raise SpecError("sbatch option", f"{name} cannot be passed through{as_}: {why}")
    if sep and not _OPT_VALUE_RE.fullmatch(value):
        raise SpecError(
            "sbatch option",
            f"value of {name} {_shown(value)} is not allowed; no spaces, quotes or shell characters",
        )
    return name, (value if sep else None)
