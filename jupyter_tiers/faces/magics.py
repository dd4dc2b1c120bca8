"""IPython magics: ``%%slurm_train`` turns a cell into a training job, ``%%k8s_serve`` into a
service, and ``%tiers`` manages both.

The magics are thin: parse arguments, build a JobSpec through the tier, submit, and hand the Job
to a view (the live widget, or plain text where no widget front end exists).

Only the option table loads at ``%load_ext``: the tier API, the views, the guard and the handoff
are imported inside the functions that first need them (bench/load_ext.py measures it).
"""

from __future__ import annotations

import argparse
import keyword
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import (
    Magics,
    cell_magic,
    line_cell_magic,
    line_magic,
    magics_class,
    no_var_expand,
)
from IPython.core.magic_arguments import ArgDecorator, argument, magic_arguments

from ..core.errors import ConfigError, SpecError, TiersError
from ..core.model import WorkKind
from ..spec.options import (
    JOB_OPTIONS,
    SERVE_OPTIONS,
    Option,
    add_arguments,
    bare_dash_option,
    flag_names,
    given_values,
)

# Only the option table, the errors and IPython's magic machinery load at %load_ext: the tier API,
# the views, the guard, the handoff and %tiers are imported by the functions that first need them
# (bench/load_ext.py measures it; tests/unit/test_load_ext_modules.py keeps the list short).
if TYPE_CHECKING:
    from ..core.model import JobSpec, ServeSpec
    from ..engine.tier import BatchTier, ServeTier, Tier

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_env(pairs: list[str] | None,
              environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """``["K=V", "TOKEN", ...]`` -> pairs. A bare ``NAME`` takes its value from the kernel's own
    environment, so a secret (an API token) never has to be typed into the notebook."""
    environ = os.environ if environ is None else environ
    out = []
    for n, pair in enumerate(pairs or [], 1):
        key, sep, value = pair.partition("=")
        if not key:  # the value is not shown: it may be a secret
            raise UsageError(f"--env {'=…' if sep else repr(pair)}: no NAME; write --env NAME=VALUE, "
                             "or --env NAME to pass the kernel's own value")
        if not sep:
            if not _ENV_NAME.fullmatch(key):  # e.g. NAME:VALUE: not shown, it may hold a secret
                raise UsageError(f"--env entry {n}: neither NAME=VALUE nor a variable NAME; write "
                                 "--env NAME=VALUE, or --env NAME to pass the kernel's own value")
            if key not in environ:
                raise UsageError(f"--env {key}: not set in the kernel's environment; write "
                                 f"--env {key}=VALUE, or set it before starting Jupyter")
            value = environ[key]
            try:  # an undecodable byte in the kernel's environment arrives as a lone surrogate
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise UsageError(f"--env {key}: the kernel's value is not valid UTF-8 text; "
                                 f"write --env {key}=VALUE") from None
        out.append((key, value))
    return tuple(out)


DRY_RUN_MODES = ("client", "server")


def dry_run_mode(value: str) -> str:
    """The value of ``--dry-run[=client|server]`` (a bare ``--dry-run`` is ``client``): print the
    objects, or have the API server check them. Anything else is an ArgumentTypeError naming
    what is allowed (the magic shows it as a one-line UsageError)."""
    if value in DRY_RUN_MODES:
        return value
    shown = repr(value) if len(value) <= 40 else repr(value[:40]) + "…"
    raise argparse.ArgumentTypeError(
        f"{shown} is not a dry-run mode; use --dry-run (print every object as YAML) or "
        "--dry-run=server (the API server validates them; nothing is created)")


def _note_inside_job() -> None:
    """Once per kernel, when it runs inside a Slurm job: say so (its jobs start clean)."""
    from ..app.items import inside_job_note  # lazy: as the tier machinery

    note = inside_job_note()
    if note:
        print(note, flush=True)


def _check_out(name: str | None) -> None:
    """``--out NAME`` must be a plain variable name: not a keyword (``class``, ``None``), and not
    a dunder such as ``__builtins__``, which would break every later cell of the notebook."""
    if name is None:
        return
    if not name.isidentifier() or keyword.iskeyword(name) or (name.startswith("__") and name.endswith("__")):
        raise UsageError(f"--out {name!r}: give a Python variable name (not a keyword or a __dunder__)")


class _SpecArguments(ArgDecorator):
    """Adds one magic argument per spec option (options.py), in the table's order."""

    def __init__(self, options: Sequence[Option]) -> None:
        self.options = options

    def add_to_parser(self, parser: Any, group: Any) -> None:
        add_arguments(parser, self.options)


def _usage(exc: Exception, options: Sequence[Option] = JOB_OPTIONS) -> UsageError:
    """A UsageError that names the option as typed on the magic line (``--gpus-per-node``, not
    the spec field ``gpus_per_node``)."""
    if isinstance(exc, SpecError):
        flags = flag_names(options)
        field = exc.field
        head, _, rest = field.partition(" ")
        if head in flags:
            field = flags[head] + (" " + rest if rest else "")
        elif field == "sbatch option":
            field = "--sbatch"
        return UsageError(f"{field}: {exc.problem}")
    if isinstance(exc, ConfigError):
        return UsageError(str(exc))
    # lazy: the tier machinery loads when a cell first needs it, not at %load_ext
    from ..api import OneTimeCodeRequired  # lazy: as above (api re-exports the transport's error)
    from ..data.handoff import HandoffError  # lazy: as above
    from ..data.model_cache import FetchError  # lazy: as above
    from ..data.sync import SyncError  # lazy: as above

    if isinstance(exc, (HandoffError, FetchError)):  # their messages start with --model-from
        return UsageError(str(exc))
    if isinstance(exc, SyncError):  # its message names --sync and what is allowed
        return UsageError(str(exc))
    if isinstance(exc, OneTimeCodeRequired):  # its message says who asks and why not here
        return UsageError(str(exc))
    return UsageError(f"{type(exc).__name__}: {exc}")


def _connect_batch(profile: str | None) -> BatchTier:
    """The training tier of ``profile`` (Slurm or local) for ``%%slurm_train``."""
    # lazy: the tier machinery loads when a cell first needs it, not at %load_ext
    from ..api import connect
    from ..engine.tier import BatchTier  # lazy: as above

    tier = connect(profile, kind=WorkKind.JOB)
    if not isinstance(tier, BatchTier):
        raise _wrong_profile(tier, "%%slurm_train", "a slurm or local profile")
    return tier


def _connect_serve(profile: str | None) -> ServeTier:
    """The serving tier of ``profile`` (Kubernetes or local) for ``%%k8s_serve``."""
    # lazy: the tier machinery loads when a cell first needs it, not at %load_ext
    from ..api import connect
    from ..engine.tier import ServeTier  # lazy: as above

    tier = connect(profile, kind=WorkKind.SERVICE)
    if not isinstance(tier, ServeTier):
        raise _wrong_profile(tier, "%%k8s_serve", "a kubernetes profile or a local one")
    return tier


def _wrong_profile(tier: Tier, magic: str, fits: str) -> UsageError:
    return UsageError(f"{magic} --profile {tier.name}: a {tier.profile.tier} profile; {magic} needs {fits}")


@magics_class
class TiersMagics(Magics):
    """``%%slurm_train`` and ``%tiers``."""

    @magic_arguments()
    @argument("--profile", "-p", help="profile from tiers.yaml (default: default_profile, else local)")
    @_SpecArguments(JOB_OPTIONS)
    @argument("--dry-run", action="store_true", help="print the rendered job script; submit nothing")
    @argument("--wait", action="store_true", help="block until the job ends, then print a summary line")
    @argument("--out", metavar="VAR", help="store the Job handle in this notebook variable")
    @argument("--resubmit", action="store_true",
              help="submit even if a job with this --name is still running (default: attach to it)")
    @argument("--text", action="store_true", help="plain text output instead of the widget")
    @argument("--force", action="store_true",
              help="do not warn when the cell looks like a long-running server")
    @no_var_expand
    @cell_magic
    def slurm_train(self, line: str, cell: str) -> Any:
        """Run this cell as a training job: every rank runs the cell body.

        Returns at once with a live view of the job unless --wait is given.
        """
        # Split once, POSIX-style, so quotes group words and are removed (IPython's parse_argstring
        # keeps them), then hand the words to the magic's argparse parser.
        words = _fix_dash_values(self._words(line, "%%slurm_train"))
        args = _parse(self.slurm_train.parser, words)
        _check_out(args.out)
        if not cell.strip():
            raise UsageError("the cell is empty: its body is the training script")
        # lazy: the tier machinery loads when a cell first needs it, not at %load_ext
        from ..spec.guard import train_warning  # lazy: as above
        from .display import show_job  # lazy: as above

        try:
            tier = _connect_batch(args.profile)
            options = given_values(args, JOB_OPTIONS)
            options["env"] = parse_env(args.env)
            spec = tier.make_spec(cell, **options)

            def warn_if_server() -> None:  # the guard's advice, worded for what happens to the cell
                if not args.force:
                    warning = train_warning(spec.script, shell=spec.shell, dry_run=args.dry_run)
                    if warning:
                        # flush: a kernel sends its streams apart; the warning must come first
                        print(warning, file=sys.stderr, flush=True)

            if args.dry_run:
                warn_if_server()
                print(tier.render(spec), end="")
                _print_sync_listing(tier, spec)
                return None
            job = None
            attached = False
            if args.name and not args.resubmit:
                job = tier.live_job_named(args.name)
                if job is not None:
                    attached = True
                    print(f"job {job.id} ({job.name}) is still {job.status().state.value}: "
                          "attached to it (use --resubmit to start another)")
            if job is None:
                warn_if_server()  # not when attached: this cell submits nothing then
                job = tier.submit(spec)
                _note_inside_job()
        except TiersError as exc:
            raise _usage(exc) from None
        if args.out and self.shell is not None:
            self.shell.user_ns[args.out] = job
        show_job(job, wait=args.wait, text=args.text, attach=attached)
        return None

    @magic_arguments()
    @argument("--profile", "-p", help="a kubernetes or local profile from tiers.yaml (default: "
              "default_profile, else local)")
    @_SpecArguments(SERVE_OPTIONS)
    @argument("--dry-run", nargs="?", const="client", type=dry_run_mode, metavar="client|server",
              help="print every object as YAML (Secret keys only), apply nothing; =server: the "
              "API server validates, admits and defaults every object (dryRun=All), nothing is created")
    @argument("--wait", action="store_true", help="block until ready or failed, then print a summary line")
    @argument("--out", metavar="VAR", help="store the Service handle in this notebook variable")
    @argument("--text", action="store_true", help="plain text output instead of the widget")
    @argument("--delete", action="store_true", help="delete the --name service and everything it made")
    @argument("--model-from", metavar="JOB",
              help="serve this training job's newest checkpoint (a job id, a job name or a Job "
              "variable; ID_7 or NAME_7 for a sweep's task 7, a whole array for its best task): "
              "the body sees its path as {model_path} and $JT_MODEL_PATH")
    @argument("--force", action="store_true", help="serve even a cell that looks like training")
    @no_var_expand
    @line_cell_magic
    def k8s_serve(self, line: str, cell: str | None = None) -> Any:
        """Serve this cell on Kubernetes: a Deployment + Service (+ ConfigMap, Secret, HPA); on a
        local profile, replicas as local processes behind one loopback port.

        The body is a Python program (default) or, with --shell, a command line such as
        ``vllm serve /models/x --port 8000``. Re-running the cell updates the service in place:
        an unchanged cell changes nothing, a changed one rolls the pods. Returns at once with a
        live view unless --wait is given.
        """
        args = _parse(self.k8s_serve.parser, self._words(line, "%%k8s_serve"))
        _check_out(args.out)
        if cell is None and not args.delete:
            raise UsageError("%k8s_serve as a line magic only deletes: %k8s_serve --name NAME --delete; "
                             "serving needs the cell body (%%k8s_serve)")
        cell = cell or ""
        if not cell.strip() and not args.delete:
            raise UsageError("the cell is empty: its body is the server program (or, with --shell, "
                             "its command line)")
        # lazy: the tier machinery loads when a cell first needs it, not at %load_ext
        from ..spec.guard import serve_refusal  # lazy: as above
        from .display import show_service  # lazy: as above

        try:
            tier = _connect_serve(args.profile)
            if args.delete:
                if not args.name:
                    raise UsageError("--delete: give the --name of the service to delete")
                service = tier.service_named(args.name)
                print(service.stop())
                return None
            options = given_values(args, SERVE_OPTIONS)
            options["env"] = parse_env(args.env)
            if args.patch is not None:
                options["patch"] = self._notebook_dict(args.patch)
            if args.model_from:
                cell = self._model_from(args.model_from, tier, cell, options, dry_run=bool(args.dry_run))
            spec = tier.make_spec(cell, **options)
            if not args.force:
                refusal = serve_refusal(spec.body, shell=spec.shell, replicas=spec.replicas,
                                        gpus=spec.gpus)
                if refusal:
                    raise UsageError(refusal)
            notebook = os.environ.get("JPY_SESSION_NAME")
            if notebook:
                spec = replace(spec, metadata=(("notebook", notebook),))
            if args.dry_run == "server":
                print(tier.dry_run_server(spec), end="")
                return None
            if args.dry_run:
                print(tier.render(spec), end="")
                _print_sync_listing(tier, spec)
                return None
            service = tier.apply(spec)
        except TiersError as exc:
            raise _usage(exc, SERVE_OPTIONS) from None
        if args.out and self.shell is not None:
            self.shell.user_ns[args.out] = service
        show_service(service, wait=args.wait, text=args.text, applied=True)
        return None

    def _model_from(self, ref: str, tier: ServeTier, cell: str, options: dict[str, Any], *,
                    dry_run: bool = False) -> str:
        """``--model-from``: the service layer's verb (app/model_from.py) sets the spec's model
        options; returns the body with {model_path} filled. Its lines print first."""
        # lazy: the tier machinery loads when a cell first needs it, not at %load_ext
        from ..api import connect, connect_batch  # lazy: as above
        from ..app.model_from import choose_model  # lazy: as above

        namespace = self.shell.user_ns if self.shell is not None else {}
        choice = choose_model(ref, tier, namespace, connect, connect_batch, dry_run=dry_run,
                              say=lambda line: print(line, flush=True))
        options.update(choice.options())
        return choice.fill(cell)

    def _notebook_dict(self, name: str) -> dict[str, Any]:
        namespace = self.shell.user_ns if self.shell is not None else {}
        if not name.isidentifier() or name not in namespace:
            raise UsageError(f"--patch {name}: no notebook variable of that name")
        value = namespace[name]
        if not isinstance(value, dict):
            raise UsageError(f"--patch {name}: expected a dict {{Kind: partial object}}, "
                             f"got {type(value).__name__}")
        return value

    def _words(self, line: str, magic: str) -> list[str]:
        """The line's words with notebook variables expanded ({var}, $var), except in --env."""
        namespace = self.shell.user_ns if self.shell is not None else None
        return expand_words(line, magic, namespace)

    @no_var_expand
    @line_magic
    def tiers(self, line: str) -> Any:
        """Manage training jobs and services across tiers.

        %tiers jobs [--profile P] [--limit N] [--kind job|service]
        %tiers attach ID                 the live view of a job or service (after a kernel restart, too)
        %tiers logs ID [--rank N | --pod P] [--tail N]
        %tiers cancel ID                 cancel a job
        %tiers stacks ID [--timeout S]   every running rank's Python stack, grouped (a job that hangs)
        %tiers delete ID                 delete a service
        %tiers scale ID N | restart ID   act on a service
        %tiers promote ID | rollback ID [--to REVISION]
                                         a service's canary (or an earlier revision on Kubernetes)
        %tiers forget ID                 drop a job or service whose profile no longer exists
        %tiers profiles
        %tiers doctor [-p P ...] [--json]
                                         check profiles: reach, login, scheduler, workdir, Python
        %tiers login [-p P]              connect a Slurm profile now (asks a login node's one-time code)
        %tiers history [-p P] [--days N] [--user U|all] [--state S] [--job ID [--tail N]]
                                         jobs from Slurm accounting, any submitter's
        %tiers init [--name N --tier T --host H ...] [--yes]
                                         a profile for ~/.jupyter/tiers.yaml from ~/.ssh/config and
                                         the kubeconfig (asks nothing here; writes with --yes)
        """
        # lazy: the tier machinery loads when a cell first needs it, not at %load_ext
        from . import tiers_command

        try:
            return tiers_command.run(self._words(line, "%tiers"), shell=self.shell)
        except tiers_command.CommandUsage as exc:
            raise UsageError(str(exc)) from None
        except TiersError as exc:
            raise _usage(exc) from None


MAX_LINE = 16_384  # characters of a magic line; a longer one is refused before any parsing
_SECRET_FLAGS = ("--env", "-e")


def expand_words(line: str, magic: str, namespace: Mapping[str, Any] | None) -> list[str]:
    """Split a magic line into words, then expand notebook variables (``{expr}``, ``$name``, as
    IPython does) in every word but the values of ``--env``: those reach the job literally (a
    password with a ``$`` in it stays as typed), so the magics opt out of IPython's expansion."""
    if len(line) > MAX_LINE:
        raise UsageError(f"{magic}: the line is {len(line)} characters long; at most {MAX_LINE}")
    words = split_line(line, magic)
    if namespace is None or not any(c in line for c in "{$"):
        return words
    # Mask the --env values in the raw text (quotes kept, as IPython expands before splitting).
    lexer = shlex.shlex(line, posix=False)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        raw = list(lexer)
    except ValueError:
        return words
    secrets: dict[str, str] = {}
    masked: list[str] = []
    nonce = os.urandom(6).hex()

    def hide(text: str) -> str:
        token = f"JTSECRET{len(secrets)}X{nonce}"
        secrets[token] = "".join(split_line(text, magic)) if text else text
        return token

    for i, word in enumerate(raw):
        if i and raw[i - 1] in _SECRET_FLAGS:
            masked.append(hide(word))
        elif word.startswith("--env="):
            masked.append("--env=" + hide(word[6:]))
        elif word.startswith("-e") and len(word) > 2 and not word.startswith("--"):
            masked.append("-e" + hide(word[2:]))
        else:
            masked.append(word)
    from IPython.utils.text import DollarFormatter

    joined = " ".join(masked)
    try:
        expanded = DollarFormatter().vformat(joined, args=[], kwargs=dict(namespace))
    except Exception:  # as IPython does: a line that does not format is used as typed
        expanded = joined
    if len(expanded) > MAX_LINE:
        raise UsageError(f"{magic}: the line is {len(expanded)} characters long once notebook "
                         f"variables are expanded; at most {MAX_LINE}")
    out = []
    for word in split_line(expanded, magic):
        for token, value in secrets.items():
            if token in word:
                word = word.replace(token, value)
        out.append(word)
    return out


def _parse(parser: Any, words: list[str]) -> Any:
    """The cell magics' arguments. They take options only, so a lone ``--`` (after which
    argparse would echo every word, --env values included) is refused; an argparse message that
    repeats a word with a line break in it stays one line."""
    if "--" in words:
        raise UsageError("'--': these magics take options only; remove it")
    # No abbreviations: argparse took `--node 2` as `--nodes 2` without a word (sbatch's own
    # abbreviations inside --sbatch are handled on purpose, spec/jobspec.py).
    parser.allow_abbrev = False
    try:
        return parser.parse_args(words)
    except UsageError as exc:
        raise UsageError(" ".join(str(exc).split()) or "bad arguments") from None


def split_line(line: str, magic: str) -> list[str]:
    """Shell-like words of a magic line; an unbalanced quote is a UsageError."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"{magic}: cannot split the line into words: {exc}") from None
    option = bare_dash_option(words)
    if option is not None:
        raise UsageError(f"{option}: '--' is not a value; give the value after {option}")
    return words


def _fix_dash_values(words: list[str]) -> list[str]:
    """Let ``--sbatch --hold`` / ``--sbatch=--x=y`` pass: argparse treats a value starting with
    '--' as an option, so glue such a value to its option with '='."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--sbatch" and i + 1 < len(words) and words[i + 1].startswith("-") \
                and words[i + 1] != "--":
            out.append(f"--sbatch={words[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def _print_sync_listing(tier: Tier, spec: JobSpec | ServeSpec) -> None:
    """--dry-run with --sync: what would be synced, and its size (sync.py)."""
    if spec.sync:
        # lazy: the tier machinery loads when a cell first needs it, not at %load_ext
        from ..data.sync import describe, notebook_manifest

        manifest, _ = notebook_manifest(spec.sync, tier.profile.settings)
        print(describe(manifest, spec.sync), end="")


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(TiersMagics)
