"""The documentation's reference pages, generated from the code at build time so they cannot drift.

Pure: each ``*_markdown()`` returns MyST Markdown text (the Sphinx directive in ``jt_docs.py``
parses it into the page; ``tests/unit/test_docs_reference.py`` checks the text without Sphinx).

- the magics' options: the magics' own argparse parsers (``%%slurm_train?`` shows the same) and
  the option tables of ``jupyter_tiers/spec/options.py`` (which of them a profile's ``defaults`` sets);
- the profile keys: ``jupyter_tiers/config/profiles.py``'s per-tier key tables and trust lists, with a
  sentence per key from :data:`PROFILE_KEY_DOCS` (a key without one is an error: the build fails);
- ``%tiers`` / ``jupyter tiers``: the subcommand parser of ``jupyter_tiers/faces/tiers_command.py``;
- the REST routes: the server extension's ``handler_table()`` and each handler's docstring;
- every FAIL and WARN of ``jupyter tiers doctor`` with its fix, read from the doctor's source
  (each ``fail(...)`` / ``warn(...)`` call of ``jupyter_tiers/doctor/``).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCTOR_DIR = ROOT / "jupyter_tiers" / "doctor"

# One sentence per profile key (config.TIER_KEYS, every tier). The generator refuses a key that
# has none, so a new key cannot reach a release undocumented.
PROFILE_KEY_DOCS: dict[str, str] = {
    "tier": "`slurm`, `local` or `kubernetes` (`k8s` is accepted); required.",
    "description": "Free text for people reading the file, shown under the profile by "
                   "`%tiers profiles` (and in REST `GET profiles`).",
    "workdir": "Where job directories live: on the cluster for Slurm (default `~/jupyter-tiers`), "
               "on this machine for local, services under its `services/` (default `<jupyter data "
               "dir>/tiers/local-jobs`; it must be yours and not writable by others).",
    "setup": "Shell lines run before every job (e.g. `module load cuda/12.4`, `source "
             "~/venvs/train/bin/activate`); one line each.",
    "env": "Environment variables every job or pod gets (`NAME: value`); values are never "
           "printed or stored in the registry.",
    "defaults": "Default values of the magic's options for this profile (the table below).",
    "object_store": "An S3-compatible store for `--checkpoint-to store` and `--model-from`: "
                    "`bucket` (required), `endpoint_url` (https; `http://` only with "
                    "`allow_insecure_endpoint: true`), `prefix`, `region`, and `credentials: "
                    "cluster|kernel` (Slurm, local) or `credentials_secret` (Kubernetes).",
    "sync_max_mb": "Size cap of `--sync` in MB (default 100).",
    "host": "The login node: a host name or an alias from `~/.ssh/config`. Without it Slurm's "
            "commands run on this machine (Jupyter on the cluster; docs/howto/on-cluster.md).",
    "port": "SSH port (default 22, or the ssh config's `Port`).",
    "user": "Login name (default: the ssh config's `User`, else your local user).",
    "identity_file": "The private key to log in with (else ssh-agent and the default keys).",
    "known_hosts": "The known_hosts file; unknown or changed host keys are refused, never added.",
    "proxy_jump": "Jump host(s), `[user@]host[:port]`, comma-separated (as OpenSSH's `-J`).",
    "ssh_config": "The ssh config file to read alone, as `ssh -F` (default: `~/.ssh/config`, then "
                  "`/etc/ssh/ssh_config`).",
    "connect_timeout": "Seconds to wait for the SSH connection (1 to 600; default 15).",
    "status_interval": "Seconds between the watcher's batched `squeue` queries (1 to 3600; "
                       "default 15).",
    "rank_interval": "Seconds between reads of the ranks' state files (0.2 to 3600; default 1).",
    "hang_after": "Seconds without progress (every rank running, no new log line, every rank's "
                  "CPU near idle) after which a job's header says `no progress on any rank for N "
                  "min: Stacks?` (60 to 604800; default 300).",
    "path_map": "Where a cluster's checkpoint paths appear on this machine, `{cluster prefix: "
                "local prefix}`, for `%%k8s_serve --model-from` on the local tier.",
    "context": "The kubeconfig context (default: its current context).",
    "kubeconfig": "The kubeconfig file (default: the standard loading rules, then in-cluster "
                  "config).",
    "namespace": "The namespace services go to (a DNS-1123 label).",
    "service_type": "`ClusterIP` (default), `NodePort` or `LoadBalancer`.",
    "image_pull_secrets": "Names of Secrets the pods pull their images with.",
    "storage_class": "A storage class name; accepted and guarded as a connection key, not used by "
                     "this version (the tier creates no volumes).",
    "model_volume": "The volume `--model-from` mounts read-only at `/models`: exactly one of "
                    "`pvc: NAME`, `nfs: {server, path}`, `host_path: PATH`, with optional "
                    "`sub_path` and `path_map`.",
    "fetch_image": "Image of the init container that fetches a model from the object store "
                   "(default `amazon/aws-cli:2.15.0`, pinned by digest; a tag may be given).",
    "request_timeout": "Seconds a Kubernetes API request may take (1 to 3600; default 30).",
    "ingress_class": "The IngressClass of `--ingress` (`spec.ingressClassName`; without it the "
                     "cluster's default class decides); a connection key.",
    "ingress_annotations": "Annotations of the Ingress `--ingress` makes (a map of strings, e.g. "
                           "ingress-nginx's or Traefik's settings); a connection key.",
    "stale_after": "Seconds without an answer from the cluster after which a job or service is "
                   "shown as UNKNOWN (last seen state and when) instead of its last state (10 s to "
                   "7 days; default 300).",
    "load_limit_rps": "The highest rate `svc.load_test` and the Load panel may ask of a service "
                      "(1 to 10,000 requests/s; default 200); a connection key, so a project file "
                      "cannot raise it.",
}
TIER_TITLES = {"slurm": "Slurm", "local": "Local", "kubernetes": "Kubernetes"}
MAGICS = ("slurm_train", "k8s_serve")


def md_escape(text: str) -> str:
    """Text for a Markdown table cell: one line, Markdown's special characters escaped outside
    code spans (`...` stays code; only ``|`` is escaped in it, as tables need)."""
    text = " ".join(text.replace("%%", "%").split())  # %%: argparse's escape in help texts
    parts = re.split(r"(`+[^`]*`+)", text)
    return "".join(part.replace("|", "\\|") if i % 2 else re.sub(r"([\\|*<>\[\]_])", r"\\\1", part)
                   for i, part in enumerate(parts))


def code(text: str) -> str:
    """``text`` as inline code, even when it holds backticks or a ``|``."""
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --- the magics' options ----------------------------------------------------------------------


def _type_name(t: object) -> str:
    """A YAML type (or a tuple of them) in words: ``(str, int)`` -> ``string or integer``."""
    names: dict[object, str] = {int: "integer", str: "string", bool: "true/false", list: "list",
                                dict: "mapping", float: "number"}
    if isinstance(t, tuple):
        return " or ".join(_type_name(x) for x in t)
    return names.get(t, getattr(t, "__name__", str(t)))


def magic_parser(magic: str) -> argparse.ArgumentParser:
    """The argparse parser the magic ``%%{magic}`` parses its line with."""
    from jupyter_tiers.faces.magics import TiersMagics

    return getattr(TiersMagics, magic).parser


def _value_of(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices:
        return "|".join(str(c) for c in action.choices)
    if action.metavar:
        return str(action.metavar)
    return action.dest.upper()


def magic_options(magic: str) -> list[tuple[str, str, str, str, str]]:
    """(flags, value, profile default key, repeatable, help) per option of ``%%{magic}``."""
    from jupyter_tiers.spec.options import JOB_OPTIONS, SERVE_OPTIONS

    table = {o.field: o for o in (JOB_OPTIONS if magic == "slurm_train" else SERVE_OPTIONS)}
    rows = []
    for action in magic_parser(magic)._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        option = table.get(action.dest)
        key = ""
        if option is not None and option.yaml is not None:
            key = f"{option.field} ({_type_name(option.yaml)})"
        repeat = "yes" if isinstance(action, argparse._AppendAction) else ""
        rows.append((", ".join(action.option_strings), _value_of(action), key, repeat,
                     action.help or ""))
    return rows


def magic_options_markdown(magic: str) -> str:
    rows = [(code(flags), code(value) if value else "", code(key.split()[0]) + " " +
             md_escape(" ".join(key.split()[1:])) if key else "", repeat, md_escape(help_))
            for flags, value, key, repeat, help_ in magic_options(magic)]
    return _table(("option", "value", "profile `defaults` key", "repeatable", "what it does"), rows)


# --- profile keys -----------------------------------------------------------------------------


def profile_keys() -> dict[str, dict[str, object]]:
    """tier -> key -> the YAML type(s) allowed (config.TIER_KEYS)."""
    from jupyter_tiers.config.profiles import TIER_KEYS

    return {tier: dict(keys) for tier, keys in TIER_KEYS.items()}


def _project_column(key: str) -> str:
    """The *project file* column: what a project ./tiers.yaml may do with ``key``
    (project_trust.PROJECT_KEYS, the allowlist)."""
    from jupyter_tiers.config.project_trust import rule

    row = rule(key)
    if row.on_trusted and row.on_own:
        return "may set"
    if row.on_own:
        return f"only in its own profiles (decides {row.decides})"
    return f"never (decides {row.decides})"


def profile_keys_markdown() -> str:
    from jupyter_tiers.config.profiles import TIERS

    keys: dict[str, tuple[object, list[str]]] = {}
    for tier in TIERS:
        for key, yaml_type in profile_keys()[tier].items():
            keys.setdefault(key, (yaml_type, []))[1].append(tier)
    missing = sorted(k for k in keys if k not in PROFILE_KEY_DOCS)
    if missing:
        raise ValueError(f"profile keys without a description in docs/_ext/jt_reference.py "
                         f"PROFILE_KEY_DOCS: {', '.join(missing)}")
    rows = []
    for key, (yaml_type, tiers) in keys.items():
        trust = _project_column(key)
        shown = "every tier" if len(tiers) == len(TIERS) else ", ".join(TIER_TITLES[t] for t in tiers)
        rows.append((code(key), md_escape(_type_name(yaml_type)), shown, md_escape(trust),
                     PROFILE_KEY_DOCS[key].replace("|", "\\|")))
    return _table(("key", "type", "tiers", "project file", "meaning"), rows)


def default_keys_markdown() -> str:
    """Which ``defaults`` keys each tier takes, with the magic option each presets."""
    from jupyter_tiers.config.profiles import TIERS, default_keys
    from jupyter_tiers.spec.options import JOB_OPTIONS, SERVE_OPTIONS

    flags = {o.field: o.flag for o in (*JOB_OPTIONS, *SERVE_OPTIONS)}
    every = {k: t for tier in TIERS for k, t in default_keys(tier).items()}
    rows = []
    for key, yaml_type in every.items():
        tiers = [TIER_TITLES[t] for t in TIERS if key in default_keys(t)]
        rows.append((code(key), code(flags[key]), md_escape(_type_name(yaml_type)), ", ".join(tiers),
                     md_escape(_project_column(f"defaults.{key}"))))
    return _table(("key", "option", "type", "tiers", "project file"), rows)


def top_level_markdown() -> str:
    from jupyter_tiers.config.profiles import ENV_VAR, TRUST_ENV_VAR, TRUST_KEY

    rows = [
        (code("profiles"), "mapping", "Profile name → its keys (below)."),
        (code("default_profile"), "string", "The profile a magic uses without `--profile` "
         "(default: the built-in `local`)."),
        (code(TRUST_KEY), "true/false", f"Only in `/etc/jupyter/tiers.yaml` or "
         f"`~/.jupyter/tiers.yaml`: trust a project `./tiers.yaml` (as `{TRUST_ENV_VAR}=1` or "
         f"naming the file in `${ENV_VAR}` do)."),
    ]
    return _table(("key", "type", "meaning"), rows)


def project_trust_markdown() -> str:
    """docs/security.md's table: the allowlist (project_trust.PROJECT_KEYS), one row per key."""
    from jupyter_tiers.config.project_trust import PROJECT_KEYS

    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    rows = [(code(r.key), yes(r.on_trusted), yes(r.on_own), md_escape(r.decides))
            for r in sorted(PROJECT_KEYS.values(), key=lambda r: (not r.on_trusted, not r.on_own, r.key))]
    return _table(("key", "on a trusted profile", "on its own profile", "decides"), rows)


def project_env_markdown() -> str:
    """docs/security.md's table of the environment names a project file may set (PROJECT_ENV)."""
    from jupyter_tiers.config.project_trust import PROJECT_ENV

    by_tunes: dict[str, list[str]] = {}
    for r in PROJECT_ENV.values():
        by_tunes.setdefault(r.tunes, []).append(r.name)
    rows = [(", ".join(code(n) for n in names), md_escape(tunes)) for tunes, names in by_tunes.items()]
    return _table(("names", "tune"), rows)


def refused_env_markdown() -> str:
    """The reference's list of well-known names a project file never sets, by what they decide."""
    from jupyter_tiers.config.project_trust import REFUSED_ENV_NAMES, REFUSED_ENV_PREFIXES

    by_why: dict[str, list[str]] = {}
    for name, why in sorted(REFUSED_ENV_NAMES.items()):
        by_why.setdefault(why, []).append(code(name))
    for prefix, why in REFUSED_ENV_PREFIXES.items():
        by_why.setdefault(why, []).append(code(prefix + "*"))
    rows = [(md_escape(why), ", ".join(names)) for why, names in by_why.items()]
    return _table(("decides", "names"), rows)


# --- %tiers / jupyter tiers -------------------------------------------------------------------


def tiers_subcommands() -> list[tuple[str, str, str]]:
    """(subcommand, usage, help) per ``%tiers`` subcommand."""
    from jupyter_tiers.faces.tiers_command import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help or "" for c in sub._choices_actions}
    out = []
    for name, command in sub.choices.items():
        usage = " ".join(command.format_usage().split()).removeprefix("usage: ")
        out.append((name, usage, helps.get(name, "")))
    return out


def tiers_command_markdown() -> str:
    rows = [(code(name), code(usage), md_escape(help_)) for name, usage, help_ in tiers_subcommands()]
    return _table(("subcommand", "usage", "what it does"), rows)


def cli_usage_markdown() -> str:
    from jupyter_tiers.faces.cli import USAGE

    return "```text\n" + USAGE.rstrip() + "\n```\n"


# --- REST routes ------------------------------------------------------------------------------

_HTTP_METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Route:
    path: str  # relative to {base_url}jupyter-tiers/api/
    methods: tuple[str, ...]
    websocket: bool
    handler: str
    doc: str


def _route_path(pattern: str, names: list[str]) -> str:
    """A handler's URL regex with its groups named after the method's parameters."""
    out, pos = [], 0
    for i, match in enumerate(re.finditer(r"\(([^()]*)\)", pattern)):
        out.append(pattern[pos:match.start()])
        group = match.group(1)
        name = names[i] if i < len(names) else f"arg{i}"
        out.append(group if re.fullmatch(r"[a-z|]+", group) else "{" + name + "}")
        pos = match.end()
    out.append(pattern[pos:])
    return "".join(out).rstrip("$")


def routes() -> list[Route]:
    """Every route of the server extension, from its handler table."""
    from tornado.websocket import WebSocketHandler

    from jupyter_tiers.faces.server.handlers import API_PATH, handler_table

    base = "/" + API_PATH.strip("/") + "/"
    out = []
    for pattern, cls in handler_table("/"):
        websocket = issubclass(cls, WebSocketHandler)
        methods = tuple(m.upper() for m in _HTTP_METHODS
                        if any(m in vars(k) for k in cls.__mro__
                               if k.__module__.startswith("jupyter_tiers")))
        first = next((m for m in _HTTP_METHODS if hasattr(cls, m) and any(
            m in vars(k) for k in cls.__mro__ if k.__module__.startswith("jupyter_tiers"))), "get")
        params = [p for p in inspect.signature(getattr(cls, first)).parameters
                  if p not in ("self", "args", "kwargs")]
        path = _route_path(pattern.removeprefix(base), params)
        out.append(Route(path, methods or ("GET",), websocket, cls.__name__,
                         inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0]))
    return out


def routes_markdown() -> str:
    rows = []
    for r in routes():
        methods = "GET (WebSocket)" if r.websocket else ", ".join(r.methods)
        rows.append((methods, code(r.path), code(r.handler), md_escape(r.doc)))
    return _table(("method", "path under `{base_url}jupyter-tiers/api/`", "handler", "what it does"),
                  rows)


# --- doctor: every FAIL and WARN with its fix -------------------------------------------------

TIER_OF_MODULE = {"slurm_checks": "Slurm", "k8s_checks": "Kubernetes", "local": "Local",
                  "__init__": "any"}


@dataclass(frozen=True)
class DoctorLine:
    tier: str
    check: str
    status: str  # FAIL or WARN
    detail: str
    fix: str
    where: str  # module:line


def _placeholder(node: ast.expr) -> str:
    """A value only known when the doctor runs, named in angle brackets (``{reach.host}``:
    ⟨host⟩)."""
    name = _name_of(node)
    return "…" if name == "…" else "⟨" + name.replace("_", " ") + "⟩"


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
        return _name_of(node.elt)
    if isinstance(node, ast.Call):
        skip = isinstance(node.func, ast.Attribute) and node.func.attr in ("join", "format")
        for arg in [*node.args, *([] if skip else [node.func])]:
            found = _name_of(arg)
            if found != "…":
                return found
    if isinstance(node, ast.Subscript):
        return _name_of(node.slice) if isinstance(node.slice, ast.Constant) else _name_of(node.value)
    if isinstance(node, ast.BoolOp):
        return _name_of(node.values[0])
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return "…"


def _text(node: ast.expr | None) -> str:
    """An argument of ``fail()`` as the text it makes, run-time values as placeholders."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) if not isinstance(v, ast.FormattedValue) else _formatted(v)
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    if isinstance(node, ast.IfExp):  # an optional part: shown as written when present
        return _text(node.body)
    if isinstance(node, ast.BoolOp):  # ``x or "default"``
        return _text(node.values[0])
    return _placeholder(node)


def _formatted(node: ast.FormattedValue) -> str:
    if isinstance(node.value, (ast.IfExp, ast.JoinedStr, ast.BinOp)):
        return _text(node.value)
    return _placeholder(node.value)


def doctor_lines(directory: Path = DOCTOR_DIR) -> list[DoctorLine]:
    """Every ``fail(...)`` and ``warn(...)`` with a fix in the doctor's modules, in source order."""
    out = []
    for path in sorted(directory.glob("*.py")):
        tier = TIER_OF_MODULE.get(path.stem)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("fail", "warn")):
                continue
            args: list[ast.expr | None] = [*node.args[:3]]
            args += [None] * (3 - len(args))
            for kw in node.keywords:
                if kw.arg in ("name", "detail", "fix"):
                    args[("name", "detail", "fix").index(kw.arg)] = kw.value
            name, detail, fix = (_text(a) for a in args)
            if node.func.id == "warn" and not fix:
                continue
            out.append(DoctorLine(tier or path.stem, name, node.func.id.upper(), detail, fix,
                                  f"{path.stem}.py:{node.lineno}"))
    out.sort(key=lambda d: (list(TIER_OF_MODULE.values()).index(d.tier)
                            if d.tier in TIER_OF_MODULE.values() else 9, d.where.split(":")[0],
                            int(d.where.split(":")[1])))
    return out


def doctor_markdown(status: str = "FAIL") -> str:
    sections = []
    lines = [d for d in doctor_lines() if d.status == status]
    for tier in dict.fromkeys(d.tier for d in lines):
        title = "Any profile" if tier == "any" else f"{tier} profiles"
        rows = [(code(d.check), md_escape(d.detail),
                 md_escape(d.fix), code(d.where))
                for d in lines if d.tier == tier]
        sections.append(f"**{title}**\n\n" + _table(("check", "what it says", "the fix", "source"), rows))
    return "\n".join(sections)


GENERATORS = {
    "slurm_train": lambda: magic_options_markdown("slurm_train"),
    "k8s_serve": lambda: magic_options_markdown("k8s_serve"),
    "profile-keys": profile_keys_markdown,
    "defaults-keys": default_keys_markdown,
    "top-level-keys": top_level_markdown,
    "project-env": project_env_markdown,
    "refused-env": refused_env_markdown,
    "project-trust": project_trust_markdown,
    "tiers-command": tiers_command_markdown,
    "cli-usage": cli_usage_markdown,
    "routes": routes_markdown,
    "doctor-fail": lambda: doctor_markdown("FAIL"),
    "doctor-warn": lambda: doctor_markdown("WARN"),
}


def generate(name: str) -> str:
    """The Markdown of reference table ``name`` (one of :data:`GENERATORS`)."""
    try:
        return GENERATORS[name]()
    except KeyError:
        raise ValueError(f"unknown reference table {name!r}; known: {', '.join(GENERATORS)}") from None
