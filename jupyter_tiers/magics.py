"""IPython magics: ``%%slurm_train`` turns a cell into a job, ``%tiers`` manages jobs.

The magics are thin: parse arguments, build a JobSpec through the tier, submit, and hand the Job
to a view (the live widget, or plain text where no widget front end exists).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from .config import ConfigError
from .errors import SpecError, TiersError


def parse_env(pairs: list[str] | None,
              environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """``["K=V", "TOKEN", ...]`` -> pairs. A bare ``NAME`` takes its value from the kernel's own
    environment, so a secret (an API token) never has to be typed into the notebook."""
    environ = os.environ if environ is None else environ
    out = []
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not key:
            raise UsageError(f"--env {pair!r}: write --env NAME=VALUE, or --env NAME to pass the "
                             "kernel's own value")
        if not sep:
            if key not in environ:
                raise UsageError(f"--env {key}: not set in the kernel's environment; write "
                                 f"--env {key}=VALUE, or set it before starting Jupyter")
            value = environ[key]
        out.append((key, value))
    return tuple(out)


def spec_options(args: argparse.Namespace) -> dict[str, Any]:
    """The JobSpec options given on the magic line (None = not given, profile default applies)."""
    opts: dict[str, Any] = {
        "name": args.name,
        "nodes": args.nodes,
        "ntasks_per_node": args.ntasks_per_node,
        "gpus_per_node": args.gpus_per_node,
        "cpus_per_task": args.cpus_per_task,
        "mem": args.mem,
        "time": args.time,
        "partition": args.partition,
        "account": args.account,
        "qos": args.qos,
        "constraint": args.constraint,
        "switches": args.switches,
        "launcher": args.launcher,
        "nproc_per_node": args.nproc_per_node,
        "python": args.python,
        "env": parse_env(args.env),
        "sbatch_options": tuple(args.sbatch or ()),
    }
    if args.exclusive:
        opts["exclusive"] = True
    if args.requeue:
        opts["requeue"] = True
    if args.shell:
        opts["shell"] = True
    return opts


_SPEC_OPTION_FIELDS = frozenset({
    "name", "nodes", "ntasks_per_node", "gpus_per_node", "cpus_per_task", "mem", "time",
    "partition", "account", "qos", "constraint", "switches", "launcher", "nproc_per_node", "python",
})


def _usage(exc: Exception) -> UsageError:
    """A UsageError that names the option as typed on the magic line (``--gpus-per-node``, not
    the JobSpec field ``gpus_per_node``)."""
    if isinstance(exc, SpecError):
        field = exc.field
        if field in _SPEC_OPTION_FIELDS:
            field = "--" + field.replace("_", "-")
        elif field == "sbatch option":
            field = "--sbatch"
        elif field.startswith("env "):
            field = "--" + field
        return UsageError(f"{field}: {exc.problem}")
    return UsageError(str(exc))


@magics_class
class TiersMagics(Magics):
    """``%%slurm_train`` and ``%tiers``."""

    @magic_arguments()
    @argument("--profile", "-p", help="profile from tiers.yaml (default: default_profile, else local)")
    @argument("--name", "-n", help="job name (letters, digits, . _ + = @ -)")
    @argument("--nodes", "-N", type=int, help="number of nodes")
    @argument("--ntasks-per-node", type=int, help="tasks (ranks) per node with the srun launcher")
    @argument("--gpus-per-node", help="GPUs per node: 8 or a100:8")
    @argument("--cpus-per-task", type=int, help="CPUs per task")
    @argument("--mem", help="memory per node: 4000, 16G")
    @argument("--time", "-t", help="time limit: minutes, HH:MM:SS or D-HH:MM:SS")
    @argument("--partition", help="partition")
    @argument("--account", help="account to charge")
    @argument("--qos", help="quality of service")
    @argument("--constraint", help="node features, Slurm syntax")
    @argument("--exclusive", action="store_true", help="whole nodes only")
    @argument("--requeue", action="store_true", help="allow Slurm to requeue the job")
    @argument("--switches", help="at most N leaf switches, waiting up to T: N@HH:MM:SS")
    @argument("--launcher", choices=["torchrun", "srun"], help="torchrun (c10d) or srun (one task per rank)")
    @argument("--nproc-per-node", type=int, help="ranks per node with torchrun")
    @argument("--python", help="interpreter on the cluster (torchrun runs as PATH -m torch.distributed.run)")
    @argument("--shell", action="store_true", help="the cell is a bash script, not Python")
    @argument("--env", "-e", action="append", metavar="K=V",
              help="environment variable (repeatable); a bare NAME passes the kernel's own value")
    @argument("--sbatch", action="append", metavar="--OPT=VALUE", help="extra sbatch option (validated)")
    @argument("--dry-run", action="store_true", help="print the rendered job script; submit nothing")
    @argument("--wait", action="store_true", help="block until the job ends, then print a summary line")
    @argument("--out", metavar="VAR", help="store the Job handle in this notebook variable")
    @argument("--resubmit", action="store_true",
              help="submit even if a job with this --name is still running (default: attach to it)")
    @argument("--text", action="store_true", help="plain text output instead of the widget")
    @cell_magic
    def slurm_train(self, line: str, cell: str) -> Any:
        """Run this cell as a training job: every rank runs the cell body.

        Returns at once with a live view of the job unless --wait is given.
        """
        # Split once, POSIX-style, so quotes group words and are removed (IPython's parse_argstring
        # keeps them), then hand the words to the magic's argparse parser.
        words = _fix_dash_values(split_line(line, "%%slurm_train"))
        args = self.slurm_train.parser.parse_args(words)
        if args.out is not None and not args.out.isidentifier():
            raise UsageError(f"--out {args.out!r}: give a Python variable name")
        if not cell.strip():
            raise UsageError("the cell is empty: its body is the training script")
        try:
            from .api import connect

            tier = connect(args.profile)
            spec = tier.make_spec(cell, **spec_options(args))
            if args.dry_run:
                print(tier.render(spec), end="")
                return None
            job = None
            attached = False
            if args.name and not args.resubmit:
                job = _live_job_named(tier, args.name)
                if job is not None:
                    attached = True
                    print(f"job {job.id} ({job.name}) is still {job.status().state.value}: "
                          "attached to it (use --resubmit to start another)")
            if job is None:
                job = tier.submit(spec)
        except (SpecError, ConfigError) as exc:
            raise _usage(exc) from None
        except TiersError as exc:
            raise UsageError(f"{type(exc).__name__}: {exc}") from None
        if args.out and self.shell is not None:
            self.shell.user_ns[args.out] = job
        from .display import show_job

        show_job(job, wait=args.wait, text=args.text, attach=attached)
        return None

    @line_magic
    def tiers(self, line: str) -> Any:
        """Manage jobs across tiers.

        %tiers jobs [--profile P] [--limit N]
        %tiers attach ID                 the live view of a job (after a kernel restart, too)
        %tiers logs ID [--rank N] [--tail N]
        %tiers cancel ID
        %tiers profiles
        """
        from . import tiers_command

        try:
            return tiers_command.run(split_line(line, "%tiers"), shell=self.shell)
        except tiers_command.CommandUsage as exc:
            raise UsageError(str(exc)) from None
        except (SpecError, ConfigError) as exc:
            raise _usage(exc) from None
        except TiersError as exc:
            raise UsageError(f"{type(exc).__name__}: {exc}") from None


def split_line(line: str, magic: str) -> list[str]:
    """Shell-like words of a magic line; an unbalanced quote is a UsageError."""
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"{magic}: cannot split the line into words: {exc}") from None


def _fix_dash_values(words: list[str]) -> list[str]:
    """Let ``--sbatch --hold`` / ``--sbatch=--x=y`` pass: argparse treats a value starting with
    '--' as an option, so glue such a value to its option with '='."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--sbatch" and i + 1 < len(words) and words[i + 1].startswith("-"):
            out.append(f"--sbatch={words[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def _live_job_named(tier: Any, name: str) -> Any:
    record = tier.registry.find_by_name(tier.name, name)
    if record is None:
        return None
    job = tier.job(record)
    try:
        state = job.status().state
    except TiersError:
        return None
    return None if state.terminal else job


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(TiersMagics)
