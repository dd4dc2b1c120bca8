"""The options of each spec, declared once.

The magic's arguments (``%%slurm_train``, ``%%k8s_serve``), the keys a profile's ``defaults`` may
set, the keyword options of ``tier.make_spec`` and the option names used in error messages are
all derived from these tables, so an option is added or renamed in one place.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..batch.metrics import parse_patterns
from ..batch.signals import canonical_signal
from ..core.errors import SpecError, TiersError
from ..core.model import LAUNCHERS, PULL_POLICIES, SERVE_STRATEGIES, SERVICE_TYPES
from ..data.objectstore import parse_uri
from ..data.sync import check_sync_paths
from .servespec import parse_autoscale, parse_shm_size

YamlType = type | tuple[type, ...]
#: How many values a flag takes: one word, none (store_true), or one per repetition.
Arity = Literal["value", "flag", "multi"]


@dataclass(frozen=True)
class Option:
    """One spec field as the magic, the profile and the API see it.

    ``flags``: the magic's flags, long form first (the form named in errors). ``arity``: ``value``
    (one word), ``flag`` (store_true), ``multi`` (repeatable, collected in a list). ``convert``
    turns what the magic or the API got into the spec's value and ``from_yaml`` does the same for
    a profile default; both raise SpecError naming the field.
    """

    field: str
    flags: tuple[str, ...]
    help: str
    arity: Arity = "value"
    type: type = str
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    yaml: YamlType | None = str  # what a profile default may be; None: not settable in a profile
    convert: Callable[[Any], Any] | None = None
    from_yaml: Callable[[Any], Any] | None = None

    @property
    def flag(self) -> str:
        return self.flags[0]


def _pairs(field: str, sep: str = "=") -> Callable[[Any], tuple[tuple[str, str], ...]]:
    """``["K=V", ...]`` or a mapping -> sorted-as-given pairs."""

    def convert(value: Any) -> tuple[tuple[str, str], ...]:
        if isinstance(value, Mapping):
            return tuple((str(k), str(v)) for k, v in value.items())
        out = []
        for n, item in enumerate(value or (), 1):
            if isinstance(item, (tuple, list)) and len(item) == 2:
                out.append((str(item[0]), str(item[1])))
                continue
            key, found, val = str(item).partition(sep)
            if not found or not key:
                shown = f"entry {n}" if field == "env" else repr(item)  # an env value may be a secret
                raise SpecError(field, f"{shown}: write KEY{sep}VALUE")
            out.append((key, val))
        return tuple(out)

    return convert


def _tolerations(value: Any) -> tuple[tuple[tuple[str, str], ...], ...]:
    if not isinstance(value, (list, tuple)):
        raise SpecError("tolerations", "expected a list of mappings (key, operator, value, effect)")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Mapping):
            out.append(tuple(sorted((str(k), str(v)) for k, v in item.items())))
        elif isinstance(item, tuple):
            out.append(tuple(item))
        else:
            raise SpecError("tolerations", f"entry {i} is not a mapping")
    return tuple(out)


def _autoscale(value: Any) -> tuple[int, int, int] | None:
    if value is None or isinstance(value, tuple):
        return value
    return parse_autoscale(str(value))


def _patch(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, Mapping):
        raise SpecError("patch", f"expected a dict of kind -> partial object, got {type(value).__name__}")
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise SpecError("patch", f"not JSON-serialisable: {exc}") from None


def _text(value: Any) -> str | None:
    """YAML may give numbers for fields Slurm takes as text (``time: 30``, ``gpus_per_node: 8``)."""
    return None if value is None else str(value)


_ENV_HELP = ("environment variable (repeatable), taken literally: no {var} or $name expansion in it;"
             " a bare NAME passes the kernel's own value")


def _metric_patterns(value: Any) -> tuple[tuple[str, str], ...]:
    return parse_patterns(value)


def _checkpoint_to(value: Any) -> str | None:
    """``store`` or a valid ``s3://`` URI (whether the profile has a store: BatchTier.validate)."""
    if value is None or value == "store":
        return value
    try:
        parse_uri(value)
    except ValueError as exc:
        raise SpecError("checkpoint_to", f"{exc}; or store (the profile's object_store)") from None
    return str(value)

def _sync(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise SpecError("sync", f"expected a list of paths such as [.], got {type(value).__name__}")
    try:
        return check_sync_paths(value)
    except TiersError as exc:
        raise SpecError("sync", str(exc).removeprefix("--sync").lstrip(": ")) from None


_SYNC_HELP = ("send this file or directory of the notebook's directory along (repeatable; . for all "
              "of it); .gitignore and .tiersignore are honoured; the job runs in the synced copy, "
              "which is on PYTHONPATH")


def _signal(value: Any) -> str | None:
    return canonical_signal(None if value is None else str(value))


JOB_OPTIONS: tuple[Option, ...] = (
    Option("name", ("--name", "-n"), "job name (letters, digits, . _ + = @ -)", yaml=None),
    Option("nodes", ("--nodes", "-N"), "number of nodes", type=int, yaml=int),
    Option("ntasks_per_node", ("--ntasks-per-node",), "tasks (ranks) per node with the srun launcher",
           type=int, yaml=int),
    Option("gpus_per_node", ("--gpus-per-node",), "GPUs per node: 8 or a100:8", yaml=(str, int),
           convert=_text, from_yaml=_text),
    Option("cpus_per_task", ("--cpus-per-task",), "CPUs per task", type=int, yaml=int),
    Option("mem", ("--mem",), "memory per node: 4000, 16G", yaml=(str, int), convert=_text, from_yaml=_text),
    Option("time", ("--time", "-t"), "time limit: minutes, HH:MM:SS or D-HH:MM:SS", yaml=(str, int),
           convert=_text, from_yaml=_text),
    Option("partition", ("--partition",), "partition"),
    Option("account", ("--account",), "account to charge"),
    Option("qos", ("--qos",), "quality of service"),
    Option("constraint", ("--constraint",), "node features, Slurm syntax"),
    Option("exclusive", ("--exclusive",), "whole nodes only", arity="flag", yaml=bool),
    Option("requeue", ("--requeue",), "allow Slurm to requeue the job", arity="flag", yaml=bool),
    Option("signal", ("--signal",),
           "send SIG to every rank SECONDS before the time limit (USR1, USR2, HUP, URG, ALRM, XCPU;"
           " 0..65535 s), e.g. USR1@120 to checkpoint", metavar="SIG@SECONDS",
           yaml=(str, int), convert=_signal, from_yaml=_signal),
    Option("switches", ("--switches",), "at most N leaf switches, waiting up to T: N@HH:MM:SS"),
    Option("launcher", ("--launcher",), "torchrun (c10d) or srun (one task per rank)",
           choices=LAUNCHERS),
    Option("nproc_per_node", ("--nproc-per-node",), "ranks per node with torchrun", type=int, yaml=int),
    Option("python", ("--python",),
           "interpreter on the cluster (torchrun runs as PATH -m torch.distributed.run)"),
    Option("shell", ("--shell",), "the cell is a bash script, not Python", arity="flag", yaml=None),
    Option("env", ("--env", "-e"), _ENV_HELP, arity="multi", metavar="K=V", yaml=None, convert=_pairs("env")),
    Option("sbatch_options", ("--sbatch",), "extra sbatch option (validated)", arity="multi",
           metavar="--OPT=VALUE", yaml=list, convert=tuple, from_yaml=tuple),
    Option("checkpoint_dir", ("--checkpoint-dir",),
           "JT_CHECKPOINT_DIR of every rank (default {workdir}/{name}/{job_id}/checkpoints)",
           metavar="PATH"),
    Option("checkpoint_to", ("--checkpoint-to",),
           "when the job COMPLETES, upload its newest checkpoint to s3://BUCKET/PREFIX/{name}/{job_id}/"
           " (store: the profile's object_store), from the cluster side", metavar="s3://BUCKET/PREFIX|store",
           convert=_checkpoint_to, from_yaml=_checkpoint_to),
    Option("metrics", ("--metrics",),
           "a metric read from rank 0's log: KEY=REGEX, the regex's first group is the number "
           "(repeatable; common keys such as loss, lr, step are read without it)", arity="multi",
           metavar="KEY=REGEX", yaml=(list, dict), convert=_metric_patterns, from_yaml=_metric_patterns),
    Option("array", ("--array",),
           "a job array, Slurm's syntax: 0-15, 1,3,5, 0-30:10, then %%LIMIT to run at most LIMIT "
           "at once (0-15%%4); with --sweep only the limit (%%4)", metavar="SPEC", yaml=None),
    Option("sweep", ("--sweep",),
           "a grid of parameters, one array task per combination: \"lr=1e-4,3e-4 bs=32,64\"; task "
           "i gets them as JSON in $JT_PARAMS and, in a Python body, as the dict params",
           metavar="GRID", yaml=None),
    Option("sync", ("--sync",), _SYNC_HELP, arity="multi", metavar="PATH", yaml=(list, str),
           convert=_sync, from_yaml=_sync),
)

SERVE_OPTIONS: tuple[Option, ...] = (
    Option("name", ("--name", "-n"), "service name (DNS-1123 label: a-z, 0-9, '-')", yaml=None),
    Option("image", ("--image",), "container image, e.g. vllm/vllm-openai:v0.6.0"),
    Option("replicas", ("--replicas", "-r"), "number of pods", type=int, yaml=int),
    Option("gpus", ("--gpus",), "GPUs per pod (nvidia.com/gpu limit)", type=int, yaml=int),
    Option("cpu", ("--cpu",), "CPU per pod: 500m, 2", yaml=(str, int, float), convert=_text,
           from_yaml=_text),
    Option("memory", ("--memory",), "memory per pod: 512Mi, 16Gi", yaml=(str, int), convert=_text,
           from_yaml=_text),
    Option("shm_size", ("--shm-size",),
           "size of each pod's /dev/shm, a memory-backed volume that counts against its memory "
           "(default 1Gi, or half of --memory below 2Gi; 0: the runtime's own 64 MiB); model "
           "servers (vLLM, TGI), DataLoader workers and NCCL need more than 64 MiB",
           metavar="SIZE", yaml=(str, int), convert=parse_shm_size, from_yaml=parse_shm_size),
    Option("port", ("--port",), "port the server listens on", type=int, yaml=int),
    Option("env", ("--env", "-e"), _ENV_HELP + " (delivered through a Secret)", arity="multi",
           metavar="K=V", yaml=None, convert=_pairs("env")),
    Option("secret_env", ("--secret-env",), "environment variable from an existing Secret",
           arity="multi", metavar="K=SECRET/KEY", yaml=dict, convert=_pairs("secret_env"),
           from_yaml=_pairs("secret_env")),
    Option("readiness", ("--readiness",), "HTTP path of the readiness probe (default: TCP on the port)",
           metavar="PATH"),
    Option("autoscale", ("--autoscale",), "HorizontalPodAutoscaler: MIN:MAX[:CPU%%]",
           metavar="MIN:MAX[:CPU%]", convert=_autoscale, from_yaml=_autoscale),
    Option("strategy", ("--strategy",), "rolling update, or blue-green (switch when ready)",
           choices=SERVE_STRATEGIES),
    Option("canary", ("--canary",), "run this cell on PERCENT of the replicas beside the live revision "
           "(then svc.promote() or svc.rollback())", type=int, metavar="PERCENT", yaml=None),
    Option("shell", ("--shell",), "the cell is a shell command line (e.g. vllm serve ...), not Python",
           arity="flag", yaml=None),
    Option("python", ("--python",), "interpreter in the image"),
    Option("image_pull_policy", ("--image-pull-policy",), "when to pull the image", choices=PULL_POLICIES),
    Option("node_selector", ("--node-selector",), "node label the pods need (repeatable)", arity="multi",
           metavar="K=V", yaml=dict, convert=_pairs("node_selector"), from_yaml=_pairs("node_selector")),
    Option("tolerations", ("--toleration",), "", arity="multi", yaml=list, convert=_tolerations,
           from_yaml=_tolerations),
    Option("patch", ("--patch",), "notebook dict {Kind: partial object} merged over the generated objects",
           metavar="VAR", yaml=None, convert=_patch),
    Option("sync", ("--sync",), _SYNC_HELP.replace("the job runs", "the server runs") +
           " (sent in the ConfigMap: at most about 1 MiB)", arity="multi", metavar="PATH",
           yaml=(list, str), convert=_sync, from_yaml=_sync),
    # Routing (Kubernetes only): per service, so not profile defaults; the profile gives
    # ingress_class, ingress_annotations and service_type.
    Option("ingress", ("--ingress",), "route HOST[/PATH] to the service through an Ingress (repeatable; "
           "path prefix, default /)", arity="multi", metavar="HOST[/PATH]", yaml=None),
    Option("tls_secret", ("--tls-secret",), "TLS for the --ingress hosts from this kubernetes.io/tls Secret",
           metavar="NAME", yaml=None),
    Option("service_type", ("--service-type",), "the Service's type (default: the profile's service_type, "
           "else ClusterIP)", choices=SERVICE_TYPES, yaml=None),
)


def bare_dash_option(words: Sequence[str]) -> str | None:
    """The option in ``words`` given ``--`` as its value (``--name=--``, ``-n--``), if any.

    argparse drops a ``--`` value and hands the option an empty list, which no option expects
    (an AttributeError, or a silently ignored ``--profile``); such a word must be refused.
    """
    for word in words:
        if not word.startswith("-") or word == "--":
            continue
        if word.endswith("=--"):
            return word[:-3]
        if len(word) == 4 and word[1] != "-" and word[2:] == "--":
            return word[:2]
    return None


def profile_keys(options: Sequence[Option]) -> dict[str, YamlType]:
    """The keys a profile's ``defaults`` may set, with the YAML types allowed."""
    return {o.field: o.yaml for o in options if o.yaml is not None}


def flag_names(options: Sequence[Option]) -> dict[str, str]:
    """Spec field -> the magic's long flag (for error messages)."""
    return {o.field: o.flag for o in options}


def add_arguments(parser: argparse.ArgumentParser, options: Sequence[Option],
                  skip: Sequence[str] = ()) -> None:
    """Add one argparse argument per option (the magic's parser)."""
    for o in options:
        if o.field in skip or not o.help:
            continue
        kwargs: dict[str, Any] = {"dest": o.field, "help": o.help}
        if o.arity == "flag":
            kwargs["action"] = "store_true"
            kwargs["default"] = None
        elif o.arity == "multi":
            kwargs["action"] = "append"
        else:
            kwargs["type"] = o.type
        if o.choices:
            kwargs["choices"] = list(o.choices)
        if o.metavar:
            kwargs["metavar"] = o.metavar
        parser.add_argument(*o.flags, **kwargs)


def given_values(args: argparse.Namespace, options: Sequence[Option]) -> dict[str, Any]:
    """The options given on a magic line (flags only when set; None = profile default applies)."""
    out: dict[str, Any] = {}
    for o in options:
        value = getattr(args, o.field, None)
        if value is None or (o.arity == "flag" and not value):
            continue
        out[o.field] = value
    return out


def convert_values(values: Mapping[str, Any], options: Sequence[Option], *,
                   from_yaml: bool = False) -> dict[str, Any]:
    """Turn given values into spec values (tuples, parsed forms), raising SpecError per field."""
    by_field = {o.field: o for o in options}
    out: dict[str, Any] = {}
    for key, value in values.items():
        o = by_field.get(key)
        fn = None if o is None else (o.from_yaml if from_yaml else o.convert)
        if fn is None and isinstance(value, list):
            fn = tuple
        out[key] = fn(value) if fn is not None and value is not None else value
    return out
