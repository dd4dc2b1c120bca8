"""The questions ``jupyter tiers init`` asks and the profile it builds (pure).

:func:`next_question` looks at the answers so far (flags count as answers) and what the machine
knows (:class:`Facts`) and returns the next thing to ask, or None when the profile is complete:
only what could not be found is asked, with what was found offered as the default.
:func:`answer` checks one answer with the config's own validation (:mod:`jupyter_tiers.config.profiles`),
and :func:`build_profile` turns the answers into the profile's mapping.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...config.profiles import TIER_ALIASES, TIERS, ConfigError, validate_profile
from .discover import KubeContext, SshHost

KEYS = ("tier", "host", "user", "port", "context", "namespace", "workdir", "partition", "name")
DEFAULT_WORKDIR = "~/jupyter-tiers"
_PARTITION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class PlanError(ValueError):
    """An answer that cannot go into a profile: what was wrong and what is allowed (one line)."""


@dataclass(frozen=True)
class Facts:
    """What the machine knows. ``known``: alias -> whether known_hosts holds its key;
    ``partitions``: what ``sinfo`` listed (None: not asked, or the host was not reachable)."""

    ssh_hosts: tuple[SshHost, ...] = ()
    known: Mapping[str, bool] = field(default_factory=dict)
    contexts: tuple[KubeContext, ...] = ()
    current_context: str = ""
    local_user: str = ""
    existing: tuple[str, ...] = ()  # profile names already in the file
    partitions: tuple[str, ...] | None = None
    default_partition: str = ""

    def host(self, alias: str) -> SshHost | None:
        return next((h for h in self.ssh_hosts if h.alias == alias), None)

    def context(self, name: str) -> KubeContext | None:
        return next((c for c in self.contexts if c.name == name), None)


@dataclass(frozen=True)
class Question:
    """One thing to ask: ``choices`` (may be empty: free text) and a ``default`` ("" for none);
    ``note`` says where the default came from."""

    key: str
    text: str
    default: str = ""
    choices: tuple[str, ...] = ()
    note: str = ""
    labels: tuple[str, ...] = ()  # how each choice is shown (what was found about it)


def default_tier(facts: Facts) -> str:
    return "slurm" if facts.ssh_hosts else "kubernetes" if facts.contexts else "local"


def suggested_name(answers: Mapping[str, str], existing: Sequence[str] = ()) -> str:
    """A profile name from the host or context (letters, digits, '.', '_', '-'), not one in use."""
    base = answers.get("host") or answers.get("context") or answers.get("tier") or "cluster"
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-._")[:48] or "cluster"
    if not base[0].isalnum():
        base = "p" + base
    name, n = base, 2
    while name in existing or name == "local":
        name, n = f"{base}-{n}", n + 1
    return name


def _host_label(h: SshHost, known: bool) -> str:
    where = f"{h.user + '@' if h.user else ''}{h.hostname}{':' + str(h.port) if h.port != 22 else ''}"
    via = f" via {h.proxy_jump}" if h.proxy_jump else ""
    return f"{h.alias} ({where}{via}; host key {'known' if known else 'not in known_hosts'})"


def _context_label(c: KubeContext) -> str:
    parts = [f"cluster {c.cluster}" if c.cluster else "", f"namespace {c.namespace}" if c.namespace else "",
             f"exec plugin {c.exec_command}" if c.exec_command else "", "current" if c.current else ""]
    shown = ", ".join(p for p in parts if p)
    return f"{c.name} ({shown})" if shown else c.name


def next_question(answers: Mapping[str, str], facts: Facts) -> Question | None:
    """The next question, or None when every needed key has an answer."""
    tier = answers.get("tier")
    if not tier:
        return Question("tier", "Tier", default_tier(facts), TIERS,
                        note=f"{len(facts.ssh_hosts)} ssh host(s), {len(facts.contexts)} kube "
                        "context(s) found")
    if tier == "slurm":
        if not answers.get("host"):
            aliases = tuple(h.alias for h in facts.ssh_hosts)
            return Question("host", "Login node (an ~/.ssh/config Host, or a host name)",
                            aliases[0] if aliases else "", aliases,
                            note="from ~/.ssh/config" if aliases else "no Host entries in ~/.ssh/config",
                            labels=tuple(_host_label(h, facts.known.get(h.alias, False))
                                         for h in facts.ssh_hosts))
        entry = facts.host(answers["host"])
        if "user" not in answers and not (entry and entry.user):
            return Question("user", "User name on the login node", facts.local_user,
                            note="~/.ssh/config names no User for this host")
        if "workdir" not in answers:
            return Question("workdir", "Working directory on the cluster (job directories go there)",
                            DEFAULT_WORKDIR)
        if "partition" not in answers:
            found = facts.partitions or ()
            return Question("partition", "Default partition (empty: the cluster's default)",
                            facts.default_partition, tuple(found),
                            note="from sinfo on the login node" if found else
                            "sinfo was not asked (host key unknown or host unreachable)")
    elif tier == "kubernetes":
        if not answers.get("context"):
            names = tuple(c.name for c in facts.contexts)
            return Question("context", "Kubernetes context", facts.current_context or
                            (names[0] if names else ""), names,
                            note="from the kubeconfig" if names else "the kubeconfig lists no contexts",
                            labels=tuple(_context_label(c) for c in facts.contexts))
        ctx = facts.context(answers["context"])
        if not answers.get("namespace"):
            if ctx and ctx.namespace:
                return Question("namespace", "Namespace", ctx.namespace, note="the context's namespace")
            return Question("namespace", "Namespace", "default", note="the context sets none")
    elif "workdir" not in answers:
        return Question("workdir", "Working directory for job directories", DEFAULT_WORKDIR)
    if not answers.get("name"):
        return Question("name", "Profile name", suggested_name(answers, facts.existing))
    return None


def _check(key: str, raw: Mapping[str, Any], tier: str | None) -> None:
    """One value through the config's validation (the same as when the file is loaded)."""
    try:
        validate_profile("x", {"tier": tier, **raw} if tier else dict(raw), f"--{key}")
    except ConfigError as exc:
        raise PlanError(f"{key}: {exc.problem}") from None


def answer(key: str, value: str, answers: Mapping[str, str],
           question: Question | None = None) -> dict[str, str]:
    """``answers`` with ``key`` set to ``value`` (stripped; "" takes the question's default);
    PlanError when it cannot go into a profile."""
    if key not in KEYS:
        raise PlanError(f"{key}: not something init asks; one of {', '.join(KEYS)}")
    value = str(value).strip()
    if not value and question is not None:
        value = question.default
    if any(not c.isprintable() for c in value):
        raise PlanError(f"{key}: printable characters only")
    if question is not None and question.choices and value.isdigit() and value not in question.choices:
        n = int(value)  # a number picks from the listed choices
        if not 1 <= n <= len(question.choices):
            raise PlanError(f"{key}: a number from 1 to {len(question.choices)}, or a name")
        value = question.choices[n - 1]
    tier = answers.get("tier")
    if key == "tier":
        value = TIER_ALIASES.get(value, value)
        if value not in TIERS:
            raise PlanError(f"tier: one of {', '.join(TIERS)}, got {value[:40]!r}")
    elif key == "name":
        if not value:
            raise PlanError("name: give a profile name")
        try:
            validate_profile(value, {}, "--name")
        except ConfigError:
            raise PlanError("name: letters, digits, '.', '_' and '-' (at most 64), starting with a "
                            "letter or digit") from None
    elif key == "port":
        if not (value.isascii() and value.isdigit() and len(value) <= 5 and 1 <= int(value) <= 65535):
            raise PlanError(f"port: a number from 1 to 65535, got {value[:20]!r}")
    elif key == "partition":
        if value and not _PARTITION_RE.fullmatch(value):
            raise PlanError("partition: a partition name (letters, digits, '.', '_', '-')")
    elif key in ("host", "context") and not value:
        raise PlanError(f"{key}: give one" + (f" of {', '.join(question.choices)}" if question and
                                               question.choices else ""))
    elif value and key in ("host", "user", "workdir", "namespace", "context"):
        _check(key, {key: value}, tier if key != "workdir" else None)
    elif not value and key in ("user", "workdir", "namespace"):
        raise PlanError(f"{key}: give one")
    return {**answers, key: value}


def build_profile(answers: Mapping[str, str], facts: Facts) -> tuple[str, dict[str, Any]]:
    """(name, the profile's mapping) from complete answers. What ~/.ssh/config already says for
    an alias (HostName, User, Port, ProxyJump, IdentityFile) is not repeated: the tier reads it
    there, so a later change to the ssh config applies."""
    tier = answers["tier"]
    profile: dict[str, Any] = {"tier": tier}
    if tier == "slurm":
        entry = facts.host(answers["host"])
        profile["host"] = answers["host"]
        user = answers.get("user", "")
        if user and not (entry and entry.user == user):
            profile["user"] = user
        port = answers.get("port", "")
        if port and not (entry and str(entry.port) == port) and port != "22":
            profile["port"] = int(port)
        profile["workdir"] = answers.get("workdir") or DEFAULT_WORKDIR
        if answers.get("partition"):
            profile["defaults"] = {"partition": answers["partition"]}
    elif tier == "kubernetes":
        profile["context"] = answers["context"]
        profile["namespace"] = answers["namespace"]
    else:
        profile["workdir"] = answers.get("workdir") or DEFAULT_WORKDIR
    validate_profile(answers["name"], profile, "the new profile")  # ConfigError: a bug above
    return answers["name"], profile
