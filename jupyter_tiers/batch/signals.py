"""``--signal SIG@SECONDS``: parsing and the shell lines that deliver it to every rank (pure).

Slurm sends the signal ``SECONDS`` before the job's time limit (0..65535, Slurm's range; it checks
about once a minute, so the signal comes up to a minute early). jupyter-tiers always asks Slurm
to signal the batch shell only (``#SBATCH --signal=B:SIG@SECONDS``, whether or not ``B:`` was
written: it is accepted for familiarity and means the same). The batch shell traps it and
forwards it to the job's steps with ``scancel --signal``, and slurmstepd delivers it to every
process of the step: each rank's program gets it exactly once. The rank shim and its helpers
(the prefixer, the heartbeat) survive it, and so does torchrun's agent, which would otherwise die
of a SIGUSR1. ``scancel --batch --signal=SIG JOBID`` by hand takes the same path.

Allowed signals are the ones a program can catch and that mean nothing else to the job: TERM and
INT are how Slurm and the fail-stop stop ranks, KILL and STOP cannot be caught.
"""

from __future__ import annotations

import re

from ..core.errors import SpecError

# name -> Linux number (the same on every architecture Slurm runs on for these)
SIGNALS: dict[str, int] = {"USR1": 10, "USR2": 12, "HUP": 1, "URG": 23, "ALRM": 14, "XCPU": 24}
DEFAULT_SECONDS = 60  # Slurm's, when @SECONDS is left out
MAX_SECONDS = 65535

_SPEC_RE = re.compile(r"(?:(B):)?(?:SIG)?([A-Z0-9]{1,8})(?:@(\d{1,6}))?")
_ALLOWED = (f"SIG@SECONDS with SIG one of {', '.join(SIGNALS)} (name or number, SIG prefix "
            f"optional, B: accepted) and SECONDS 0..{MAX_SECONDS}, e.g. USR1@120")
_NUMBERS = {n: name for name, n in SIGNALS.items()}


def parse_signal(text: object) -> tuple[str, int]:
    """``"USR1@120"``, ``"B:SIGUSR1@120"``, ``"10@120"``, ``"USR1"`` -> ``("USR1", 120)``.

    Raises SpecError("signal", ...) naming what was wrong and what is allowed.
    """
    if not isinstance(text, str):
        raise SpecError("signal", f"expected text such as USR1@120, got {type(text).__name__}")
    shown = repr(text[:40]) + ("..." if len(text) > 40 else "")
    m = _SPEC_RE.fullmatch(text.strip().upper())
    if not m or "\n" in text:
        raise SpecError("signal", f"{shown} is not allowed; use {_ALLOWED}")
    word, seconds = m.group(2), m.group(3)
    name = _NUMBERS.get(int(word)) if word.isdigit() else word
    if name not in SIGNALS:
        why = {"TERM": "Slurm already sends TERM to stop the job", "INT": "INT stops the ranks",
               "KILL": "KILL cannot be caught", "STOP": "STOP cannot be caught"}.get(name or "")
        raise SpecError("signal", f"{shown}: {why + '; ' if why else ''}use {_ALLOWED}")
    secs = DEFAULT_SECONDS if seconds is None else int(seconds)
    if secs > MAX_SECONDS:
        raise SpecError("signal",
                        f"{shown}: {secs} seconds is more than Slurm's {MAX_SECONDS}; use {_ALLOWED}")
    return name, secs


def canonical_signal(value: object) -> str | None:
    """The spec's form of a ``--signal`` value: ``"USR1@120"`` (None stays None)."""
    if value is None:
        return None
    name, secs = parse_signal(value)
    return f"{name}@{secs}"


def signal_directive(value: str) -> str:
    """The ``#SBATCH`` line: the batch shell only; it forwards (see forward_lines)."""
    name, secs = parse_signal(value)
    return f"#SBATCH --signal=B:{name}@{secs}"


def forward_lines(value: str) -> list[str]:
    """Batch-script lines that trap the signal and forward it to every step's processes."""
    name, _ = parse_signal(value)
    return [
        f"# --signal: Slurm signals this shell; forward {name} to every rank (each program gets",
        "# it once; the rank shim, its helpers and torchrun's agent ignore it).",
        f"export JT_SIGNAL={name}",
        f"trap 'scancel --signal={name} \"$SLURM_JOB_ID\" 2>/dev/null || true' {name}",
    ]


def wait_lines() -> list[str]:
    """Lines after a launcher started with ``&``: wait for it while traps still run (bash runs a
    trap only between commands, so a foreground srun would hold the signal until the end)."""
    return [
        "jt_launcher=$!",
        'while kill -0 "$jt_launcher" 2>/dev/null; do wait "$jt_launcher"; done',
        "# bash keeps the status of a reaped child: this is srun's, not the trap's 128+N.",
        'wait "$jt_launcher"; exit $?',
    ]


def agent_prefix(value: str) -> str:
    """Words in front of torchrun under srun: its agent ignores the signal (the ranks it starts
    inherit that, and the rank shim gives the program the default action back)."""
    name, _ = parse_signal(value)
    return f"bash -c 'trap \"\" {name}; exec \"$@\"' jt-agent "
