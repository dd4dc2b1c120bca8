"""``jupyter tiers init``'s I/O: read ~/.ssh/config, known_hosts and the kubeconfig, ask what
they do not say (terminal prompts; none in a notebook or with ``--yes``), offer partitions from
``sinfo`` over SSH when the host's key is already known, run the doctor on the new profile, show
its YAML and write it (never over an existing profile without asking, or ``--force``)."""

from __future__ import annotations

import argparse
import getpass
import os
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...config import profiles as config
from ...config.profiles import USER_PATH, ConfigError, Profile, load_file, merge_layers
from ...core.errors import TiersError
from ...core.plaintext import printable
from ...doctor import Report, check_profile, slurm_probe
from ...doctor.render import render_text
from ...slurm import tier as slurm_tier  # transport_for looked up at call time (tests patch it)
from ...slurm.commands import slurm_argv
from ...transport import sshconfig
from ...transport.errors import TransportError
from ...transport.prompt import refusing_prompter
from ...transport.target import SSHTarget
from . import discover
from .plan import Facts, PlanError, Question, answer, build_profile, next_question
from .yamlfile import MergeError, add_profile, render_profile

FLAGS = ("name", "tier", "host", "user", "port", "workdir", "partition", "context", "namespace")
SINFO_TIMEOUT = 30.0


class InitError(TiersError):
    """init cannot go on (a broken file, a refused overwrite, a missing answer); one line."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``init`` (shared by the command line and ``%tiers init``)."""
    parser.add_argument("--config", metavar="PATH",
                        help=f"the file to write (default {USER_PATH})")
    parser.add_argument("--name", help="the profile's name (default: from the host or context)")
    parser.add_argument("--tier", help="slurm, kubernetes or local")
    parser.add_argument("--host", help="Slurm: the login node (an ~/.ssh/config Host or a host name)")
    parser.add_argument("--user", help="Slurm: the user name there (when ~/.ssh/config names none)")
    parser.add_argument("--port", help="Slurm: the SSH port (when not 22 and not in ~/.ssh/config)")
    parser.add_argument("--workdir", help="where job directories go (default ~/jupyter-tiers)")
    parser.add_argument("--partition", help="Slurm: the default partition ('' for the cluster's)")
    parser.add_argument("--context", help="Kubernetes: a context of the kubeconfig")
    parser.add_argument("--namespace", help="Kubernetes: the namespace")
    parser.add_argument("--yes", "-y", action="store_true",
                        help="ask nothing: take what was found for the rest, and write")
    parser.add_argument("--force", action="store_true",
                        help="replace a profile of the same name without asking")
    parser.add_argument("--dry-run", action="store_true", help="show the profile; write nothing")
    parser.add_argument("--no-doctor", action="store_true", help="do not run the doctor on it")


# --- discovery (I/O) -----------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(discover.MAX_TEXT + 1)
    except OSError:
        return None


def _kubeconfig_path() -> Path:
    env = os.environ.get("KUBECONFIG", "")
    first = env.split(os.pathsep)[0] if env else ""
    return Path(first).expanduser() if first else Path("~/.kube/config").expanduser()


def gather(home: str, existing: tuple[str, ...], notes: list[str]) -> Facts:
    """What ~/.ssh/config, known_hosts and the kubeconfig say; problems go to ``notes``."""
    hosts: list[discover.SshHost] = []
    known: dict[str, bool] = {}
    ssh_path = Path(home) / ".ssh" / "config"
    text = _read(ssh_path)
    if text is not None:
        try:
            config = discover.parse_ssh_config(
                sshconfig.expand_includes(text, base_dir=str(ssh_path.parent), home=home,
                                          seen=(str(ssh_path),)))
            hosts = discover.ssh_hosts(config)
        except (discover.DiscoverError, sshconfig.SSHConfigError) as exc:
            notes.append(f"{ssh_path}: {exc}")
    for h in hosts:
        known[h.alias] = host_key_known(h.alias, home)
    contexts: list[discover.KubeContext] = []
    current = ""
    kube = _kubeconfig_path()
    text = _read(kube)
    if text is not None:
        try:
            contexts, current = discover.kube_contexts(text)
        except discover.DiscoverError as exc:
            notes.append(f"{kube}: {exc}")
    return Facts(ssh_hosts=tuple(hosts), known=known, contexts=tuple(contexts),
                 current_context=current, local_user=getpass.getuser(), existing=existing)


def unknown_hop(host: str, home: str, user: str | None = None, port: int | None = None) -> str | None:
    """None when the known_hosts files ssh would read for ``host`` hold a key for it and for
    every jump host on its route (what makes connecting safe without asking anything); else
    what to run to confirm the first unknown one out of band (``""`` when the route cannot be
    resolved or starts with a ProxyCommand, which init does not run)."""
    try:
        route = sshconfig.resolve_route(SSHTarget(host=host, user=user, port=port), home=home,
                                        system_config=None)
    except (sshconfig.SSHConfigError, OSError, ValueError):
        return ""
    for hop in route.hops:
        if hop.proxy_command:
            return ""
        files = [*hop.known_hosts_files, *hop.global_known_hosts_files]
        entries = sshconfig.load_known_hosts(files)
        if not any(e.marker is None and sshconfig.host_matches(e.hosts, hop.host_key_name) for e in entries):
            port_opt = f"-p {hop.port} " if hop.port != 22 else ""
            target = shlex.quote(hop.hostname)
            return (f"`ssh-keyscan {port_opt}{target} | ssh-keygen -lf -` shows its fingerprint; "
                    f"compare it with the one the cluster's admins publish, then `ssh {port_opt}"
                    f"{shlex.quote(hop.user + '@' + hop.hostname)}` offers to add it to "
                    f"{hop.known_hosts_files[0] if hop.known_hosts_files else '~/.ssh/known_hosts'}")
    return None


def host_key_known(host: str, home: str, user: str | None = None, port: int | None = None) -> bool:
    """Whether every host key on ``host``'s route is already known (:func:`unknown_hop`)."""
    return unknown_hop(host, home, user, port) is None


def sinfo_partitions(answers: dict[str, str]) -> tuple[tuple[str, ...], str, str]:
    """(partitions, default, note) from ``sinfo`` on the login node: a login without any
    prompt first (host keys checked, never added; no one-time code), then the command."""
    profile = _candidate(answers)
    _route_probe, route = slurm_probe.probe_route(profile)
    if route is None:
        return (), "", "sinfo not asked: the route could not be resolved"
    login = slurm_probe.probe_login(route)
    if not login.logged_in:
        why = login.host_key_message or login.auth_error or login.connect_error or "no login"
        return (), "", f"sinfo not asked: {why[:200]}"
    transport = slurm_tier.ssh_transport_for(profile)
    transport.retries = 0
    transport.prompter = refusing_prompter("init asks no one-time code")
    try:
        result = transport.run(slurm_argv("sinfo", "-h", "-o", "%P"), timeout=SINFO_TIMEOUT,
                               check=False)
    except TransportError as exc:
        return (), "", f"sinfo failed: {str(exc)[:200]}"
    finally:
        transport.close()
    names, default = discover.parse_sinfo(result.text())
    return tuple(names), default, "" if names else "sinfo listed no partitions"


def _candidate(answers: dict[str, str]) -> Any:
    settings: dict[str, Any] = {"host": answers["host"]}
    if answers.get("user"):
        settings["user"] = answers["user"]
    if answers.get("port"):
        settings["port"] = int(answers["port"])
    return Profile(name=answers.get("name") or "init", tier="slurm", settings=settings)


# --- the flow ------------------------------------------------------------------------------------


def _show_question(q: Question, say: Callable[[str], None]) -> str:
    if q.note:
        say(f"  ({q.note})")
    for i, choice in enumerate(q.labels or q.choices, 1):
        say(printable(f"  {i}. {choice}"))
    shown = f" [{q.default}]" if q.default else ""
    return f"{q.text}{shown}: "


def collect(args: argparse.Namespace, facts: Facts, *, interactive: bool, home: str,
            ask: Callable[[str], str], say: Callable[[str], None]) -> tuple[dict[str, str], Facts]:
    """Every answer: the flags first, then the questions (asked, or their defaults)."""
    answers: dict[str, str] = {}
    for key in FLAGS:
        value = getattr(args, key, None)
        if value is not None:
            try:
                answers = answer(key, value, answers)
            except PlanError as exc:
                raise InitError(f"--{exc}") from None
    sinfo_tried = False
    while (q := next_question(answers, facts)) is not None:
        if q.key == "partition" and not sinfo_tried and facts.partitions is None:
            sinfo_tried = True
            unknown = unknown_hop(answers["host"], home, answers.get("user") or None,
                                  int(answers["port"]) if answers.get("port") else None)
            if unknown is None:
                say(f"asking {answers['host']} for its partitions (sinfo)...")
                try:
                    names, default, note = sinfo_partitions(answers)
                except (TiersError, OSError, ValueError) as exc:  # the partition is then asked
                    names, default, note = (), "", f"sinfo not asked: {str(exc)[:200]}"
                if note:
                    say(printable(f"  {note}"))
                facts = replace(facts, partitions=names or None, default_partition=default)
            else:
                say(printable(f"{answers['host']}: its host key is not in known_hosts, so init does "
                              "not log in (never adding a key itself)" +
                              (f"; to confirm it out of band: {unknown}" if unknown else "")))
            continue
        if not interactive:
            if not q.default and q.key not in ("partition",):
                raise InitError(f"give --{q.key} ({q.text.lower()}): nothing was found to offer"
                                + (f"; found: {', '.join(q.choices)}" if q.choices else ""))
            try:
                answers = answer(q.key, q.default, answers, q)
            except PlanError as exc:
                raise InitError(f"{exc} (found {q.default!r}); give --{q.key}") from None
            continue
        while True:
            try:
                reply = ask(_show_question(q, say))
            except EOFError:
                raise InitError(f"no answer for {q.key} (input ended)") from None
            try:
                answers = answer(q.key, reply, answers, q)
                break
            except PlanError as exc:
                say(f"  {exc}")
    return answers, facts


def _confirm(question: str, ask: Callable[[str], str], default: bool) -> bool:
    try:
        reply = ask(f"{question} [{'Y/n' if default else 'y/N'}] ").strip().lower()
    except EOFError:
        return False
    return default if not reply else reply in ("y", "yes")


def _loads(path: Path, text: str, name: str) -> Any:
    """The profile as the config loader reads ``text`` (a ConfigError if it would not load)."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "tiers.yaml"
        probe.write_text(text, encoding="utf-8")
        layer = load_file(probe)
    return merge_layers([(str(path), layer)]).profile(name)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step, keeping an existing file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=".tiers.", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _offer_this_cluster(args: argparse.Namespace, *, interactive: bool, ask: Callable[[str], str],
                        say: Callable[[str], None]) -> bool:
    """Where sbatch is on PATH, the built-in ``cluster`` profile already runs jobs here (no SSH):
    say so, and interactively offer it instead of writing a profile. True when taken."""
    if not config.sbatch_here() or getattr(args, "host", None) or getattr(args, "tier", None):
        return False
    say(f"this machine has sbatch: the built-in profile {config.BUILTIN_CLUSTER!r} runs jobs on "
        f"this cluster with no SSH and no file (--profile {config.BUILTIN_CLUSTER})")
    if not interactive or not _confirm(f"use {config.BUILTIN_CLUSTER!r} (nothing to write)?", ask, True):
        return False
    if not args.no_doctor:
        say(f"checking it (jupyter tiers doctor {config.BUILTIN_CLUSTER}):")
        say(render_text(Report((check_profile(config.load_config().profile(config.BUILTIN_CLUSTER)),))))
    say(f"nothing written; use it with --profile {config.BUILTIN_CLUSTER} (give it defaults under "
        f"profiles: {config.BUILTIN_CLUSTER}: in ~/.jupyter/tiers.yaml if you like)")
    return True


def run_init(args: argparse.Namespace, *, notebook: bool = False,
             ask: Callable[[str], str] = input, say: Callable[[str], None] = print) -> int:
    """The whole of ``init``; returns the exit status. ``notebook``: never prompts, and writes
    only with ``--yes``. InitError for what stops it."""
    home = os.path.expanduser("~")
    path = Path(args.config).expanduser() if args.config else USER_PATH.expanduser()
    interactive = not notebook and not args.yes
    existing_text = ""
    names: tuple[str, ...] = ()
    try:
        if path.exists():
            names = tuple(load_file(path).get("profiles", {}))
            existing_text = path.read_text(encoding="utf-8")
    except ConfigError as exc:
        raise InitError(f"{exc}; fix the file first (init never rewrites a file it "
                        "cannot read)") from None
    except OSError as exc:
        raise InitError(printable(f"{str(path)[:200]}: {exc.strerror or exc}")) from None
    notes: list[str] = []
    facts = gather(home, names, notes)
    for note in notes:
        say(printable(f"note: {note}"))
    known = sum(facts.known.values())
    say(printable(f"found: {len(facts.ssh_hosts)} host(s) in ~/.ssh/config ({known} with a known host "
                  f"key), {len(facts.contexts)} Kubernetes context(s)"
                  + (f", {len(names)} profile(s) in {path}" if names else "")))
    if _offer_this_cluster(args, interactive=interactive, ask=ask, say=say):
        return 0
    answers, facts = collect(args, facts, interactive=interactive, home=home, ask=ask, say=say)
    name, profile = build_profile(answers, facts)
    replacing = name in names
    try:
        text = add_profile(existing_text, name, profile, replace=True)
    except MergeError as exc:
        raise InitError(f"{path}: {exc}; add this to it by hand:\n"
                        f"profiles:\n{render_profile(name, profile)}") from None
    try:
        loaded = _loads(path, text, name)
    except ConfigError as exc:  # a bug in the plan: the file is not touched
        raise InitError(f"the new profile would not load: {exc}") from None
    if not args.no_doctor:
        say(f"checking it (jupyter tiers doctor {name}):")
        say(render_text(Report((check_profile(loaded),))))
    say(f"profile {name} for {path}:")
    say(render_profile(name, profile).rstrip("\n"))
    if args.dry_run:
        say("(--dry-run: nothing written)")
        return 0
    asked = f"{path} already has a profile {name}; replace it?"
    if replacing and not args.force and (not interactive or not _confirm(asked, ask, False)):
        raise InitError(f"{path} already has a profile {name!r}; not replaced (choose another "
                            "--name, or --force to replace it)")
    if notebook and not args.yes:
        say(f"(add --yes to write it to {path})")
        return 0
    if interactive and not _confirm(f"write it to {path}?", ask, True):
        say("nothing written")
        return 0
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise InitError(printable(f"{str(path)[:200]}: cannot write it: {exc.strerror or exc}")) from None
    say(f"wrote profile {name} to {path}" + (" (replaced)" if replacing else "")
        + f"; use it with --profile {name} (jupyter tiers doctor {name} checks it again)")
    return 0
