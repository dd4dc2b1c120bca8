"""What this machine already knows about its clusters (pure readers of file text): the hosts of
an ssh config (paramiko's parser), whether known_hosts holds a key for a host, the contexts of a
kubeconfig, the partitions ``sinfo`` lists. Bad input gives nothing or a :class:`DiscoverError`,
never a traceback."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.sshnames import valid_host, valid_user
from ...transport.sshconfig import KnownHostEntry, host_matches, known_hosts_name

MAX_TEXT = 4 * 1024 * 1024  # larger files are not read (a config is a few KB)


class DiscoverError(ValueError):
    """A file that could not be read as what it should be; one line."""


@dataclass(frozen=True)
class SshHost:
    """One ``Host`` entry of an ssh config (a name without wildcards), as ``ssh NAME`` sees it."""

    alias: str
    hostname: str
    port: int = 22
    user: str = ""
    proxy_jump: str = ""
    identity_file: str = ""
    proxy_command: bool = False

    @property
    def known_hosts_name(self) -> str:
        return known_hosts_name(self.hostname, self.port)


@dataclass(frozen=True)
class KubeContext:
    """One context of a kubeconfig: its name, cluster, namespace (``""``: not set) and whether it
    is the current one; ``exec_command``: the user's exec credential plugin (named, not run)."""

    name: str
    cluster: str = ""
    namespace: str = ""
    current: bool = False
    exec_command: str = ""


def parse_ssh_config(text: str) -> Any:
    """A ``paramiko.SSHConfig`` of ``text``; DiscoverError when paramiko cannot read it."""
    import paramiko

    if len(text) > MAX_TEXT:
        raise DiscoverError(f"larger than {MAX_TEXT // (1024 * 1024)} MB")
    try:
        return paramiko.SSHConfig.from_text(text)
    except Exception as exc:  # paramiko raises several types on odd lines
        raise DiscoverError(f"cannot parse it: {str(exc)[:200]}") from None


def _port(value: Any) -> int | None:
    text = str(value or "22").strip()
    if not text.isascii() or not text.isdigit() or len(text) > 5 or not 1 <= int(text) <= 65535:
        return None
    return int(text)


def ssh_hosts(config: Any) -> list[SshHost]:
    """The ``Host`` names of ``config`` (a paramiko.SSHConfig) a profile can name, in file order:
    no wildcard or negated patterns, only names and values OpenSSH accepts (a name a profile
    could not hold is left out rather than shown)."""
    out: list[SshHost] = []
    seen: set[str] = set()
    for entry in getattr(config, "_config", []):
        for alias in entry.get("host", []):
            if alias in seen or any(c in alias for c in "*?!") or not valid_host(alias):
                continue
            seen.add(alias)
            try:
                opts = config.lookup(alias)
            except Exception:  # a Match line paramiko cannot evaluate: the entry is left out
                continue
            hostname = str(opts.get("hostname") or alias)
            port = _port(opts.get("port"))
            user = str(opts.get("user") or "")
            if port is None or not valid_host(hostname) or (user and not valid_user(user)):
                continue
            ids = opts.get("identityfile") or []
            out.append(SshHost(alias=alias, hostname=hostname, port=port, user=user,
                               proxy_jump=str(opts.get("proxyjump") or "")[:300],
                               identity_file=str(ids[0]) if ids else "",
                               proxy_command=bool(opts.get("proxycommand"))))
    return out


def key_known(entries: Sequence[KnownHostEntry], hostname: str, port: int) -> bool:
    """Whether known_hosts ``entries`` hold a (not revoked) key for ``hostname:port``."""
    name = known_hosts_name(hostname, port)
    return any(e.marker is None and host_matches(e.hosts, name) for e in entries)


def kube_contexts(text: str) -> tuple[list[KubeContext], str]:
    """(contexts, current context name) of a kubeconfig's YAML; DiscoverError when it is not a
    kubeconfig. Names are taken as written; :mod:`.plan` validates what goes into a profile."""
    import yaml

    if len(text) > MAX_TEXT:
        raise DiscoverError(f"larger than {MAX_TEXT // (1024 * 1024)} MB")
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        raise DiscoverError("not valid YAML") from None
    if data is None:
        return [], ""
    if not isinstance(data, dict):
        raise DiscoverError("not a kubeconfig (the top level is not a mapping)")
    current = data.get("current-context")
    current = current if isinstance(current, str) else ""
    users: dict[str, str] = {}
    raw_users = data.get("users")
    for u in raw_users if isinstance(raw_users, list) else []:
        if isinstance(u, dict) and isinstance(u.get("name"), str) and isinstance(u.get("user"), dict):
            run = u["user"].get("exec")
            users[u["name"]] = str(run.get("command") or "")[:200] if isinstance(run, dict) else ""
    out: list[KubeContext] = []
    raw = data.get("contexts")
    for c in raw if isinstance(raw, list) else []:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            continue
        ctx: dict[str, Any] = c["context"] if isinstance(c.get("context"), dict) else {}
        namespace, cluster, user = (_string(ctx.get(k)) for k in ("namespace", "cluster", "user"))
        out.append(KubeContext(c["name"], cluster, namespace, c["name"] == current, users.get(user, "")))
    return out, current


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_sinfo(text: str) -> tuple[list[str], str]:
    """(partitions, the default one or "") from ``sinfo -h -o '%P'`` (the default marked ``*``)."""
    names: list[str] = []
    default = ""
    for line in text.splitlines():
        word = line.strip()
        if not word or len(word) > 64:
            continue
        is_default = word.endswith("*")
        word = word.rstrip("*")
        if not word or not all(c.isalnum() or c in "_.-" for c in word) or word in names:
            continue
        names.append(word)
        if is_default and not default:
            default = word
    return names, default
