"""Pure helpers for the SSH transport: ``~/.ssh/config`` resolution and ``known_hosts`` matching.

Nothing here opens a connection. :func:`resolve_route` turns an ``SSHTarget`` into the list of
servers to go through (jump hosts first, the target last) the way ``ssh`` itself would read its
config; :func:`load_known_hosts` and :func:`check_host_key` decide whether a server's host key is
trusted, changed or unknown. paramiko is imported lazily (only to parse the ssh config).
"""

from __future__ import annotations

import base64
import getpass
import glob
import hashlib
import hmac
import os
import re
import shlex
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ..core.errors import TiersError
from ..core.sshnames import valid_host, valid_user
from .target import SSHTarget  # plain data: no import circle with ssh.py

DEFAULT_PORT = 22
SYSTEM_SSH_CONFIG = "/etc/ssh/ssh_config"
USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
# OpenSSH's default identities, in its order (the *_sk and xmss ones paramiko cannot use).
DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519")
_MAX_INCLUDE_DEPTH = 16
_MAX_JUMP_DEPTH = 10


class SSHConfigError(TiersError, ValueError):
    """The ssh config, a ProxyJump spec or a target field cannot be used (message says why)."""


# --------------------------------------------------------------------------------------------
# Route resolution
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JumpSpec:
    """One element of a ProxyJump list: ``[user@]host[:port]`` (or ``ssh://`` URI)."""

    host: str
    user: str | None = None
    port: int | None = None


@dataclass(frozen=True)
class Hop:
    """One SSH server on the route (jump hosts first, the target last), fully resolved."""

    name: str  # as written by the user (alias or host)
    hostname: str  # what to connect to (config HostName applied)
    port: int
    user: str
    identity_files: tuple[str, ...] = ()
    identity_required: tuple[str, ...] = ()  # given explicitly: missing -> error, not skip
    identities_only: bool = False
    known_hosts_files: tuple[str, ...] = ()  # user files (first one is where to add keys)
    global_known_hosts_files: tuple[str, ...] = ()
    host_key_alias: str | None = None
    proxy_command: str | None = None  # only ever set on the first hop
    user_keys: bool = True  # ssh-agent and default keys may be offered (not when isolated)

    @property
    def look_for_keys(self) -> bool:
        """Whether OpenSSH's default ``~/.ssh/id_*`` keys are tried (only without IdentityFile,
        and never on an isolated target's route)."""
        return self.user_keys and not self.identity_files

    @property
    def host_key_name(self) -> str:
        """The name looked up in known_hosts: ``host`` on port 22, else ``[host]:port``."""
        if self.host_key_alias:
            return self.host_key_alias.lower()
        return known_hosts_name(self.hostname, self.port)

    @property
    def label(self) -> str:
        """``user@host:port`` for messages."""
        return f"{self.user}@{self.hostname}:{self.port}"


@dataclass(frozen=True)
class Route:
    """Everything needed to connect: the hops and the connection-wide timers."""

    hops: tuple[Hop, ...]
    connect_timeout: float
    keepalive: int

    @property
    def target(self) -> Hop:
        """The last hop: where commands run."""
        return self.hops[-1]

    @property
    def jumps(self) -> tuple[Hop, ...]:
        """The jump hosts, in connection order."""
        return self.hops[:-1]


def known_hosts_name(hostname: str, port: int) -> str:
    """The known_hosts spelling of a host: bare on port 22, ``[host]:port`` otherwise."""
    host = hostname.lower()
    return host if port == DEFAULT_PORT else f"[{host}]:{port}"


def parse_port(value: Any, what: str) -> int:
    """An int in 1..65535 or :class:`SSHConfigError`."""
    try:
        port = int(str(value).strip())
    except ValueError:
        raise SSHConfigError(f"{what}: port {value!r} is not a number") from None
    if not 0 < port < 65536:
        raise SSHConfigError(f"{what}: port {port} is out of range")
    return port


def parse_proxy_jump(spec: str) -> list[JumpSpec]:
    """Parse a ProxyJump value: comma-separated ``[user@]host[:port]`` or ``ssh://`` URIs.

    ``"none"`` (any case) or an empty string means no jump host.
    """
    spec = spec.strip()
    if not spec or spec.lower() == "none":
        return []
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            raise SSHConfigError(f"ProxyJump {spec!r}: empty host in the list")
        if part.lower().startswith("ssh://"):
            part = part[6:].rstrip("/")
        user: str | None = None
        if "@" in part:
            user, _, part = part.rpartition("@")
            if not user:
                raise SSHConfigError(f"ProxyJump {spec!r}: empty user name")
        port: int | None = None
        if part.startswith("["):  # [v6addr]:port or [host]
            end = part.find("]")
            if end < 0:
                raise SSHConfigError(f"ProxyJump {spec!r}: unbalanced '['")
            host, rest = part[1:end], part[end + 1 :]
            if rest:
                if not rest.startswith(":"):
                    raise SSHConfigError(f"ProxyJump {spec!r}: junk after ']'")
                port = parse_port(rest[1:], f"ProxyJump {spec!r}")
        elif part.count(":") == 1:
            host, _, port_s = part.partition(":")
            port = parse_port(port_s, f"ProxyJump {spec!r}")
        else:  # a bare host, or a bare IPv6 address
            host = part
        if not host or any(c.isspace() for c in host):
            raise SSHConfigError(f"ProxyJump {spec!r}: bad host {host!r}")
        out.append(JumpSpec(host=host, user=user, port=port))
    return out


def _split_directive(line: str) -> tuple[str, str] | None:
    m = re.match(r"\s*(\w+)(?:\s*=\s*|\s+)(.*?)\s*$", line)
    if not m:
        return None
    return m.group(1).lower(), m.group(2)


def expand_includes(
    text: str, *, base_dir: str, home: str, depth: int = 0, seen: tuple[str, ...] = ()
) -> str:
    """Inline ``Include`` directives (paramiko's parser ignores them).

    Relative paths are taken from ``base_dir`` (``~/.ssh`` for the user config, ``/etc/ssh`` for
    the system one), globs are expanded in sorted order, missing files are skipped like ssh
    does. After an included file the enclosing ``Host``/``Match`` line is repeated so that
    the lines after the ``Include`` stay in their block.
    """
    if depth > _MAX_INCLUDE_DEPTH:
        raise SSHConfigError("ssh config: Include nested too deeply (a loop?)")
    out: list[str] = []
    header = "Host *"
    for line in text.splitlines():
        parsed = _split_directive(line) if not line.lstrip().startswith("#") else None
        if parsed is None:
            out.append(line)
            continue
        key, value = parsed
        if key in ("host", "match"):
            header = line.strip()
            out.append(line)
            continue
        if key != "include":
            out.append(line)
            continue
        try:
            patterns = shlex.split(value)
        except ValueError:
            raise SSHConfigError(f"ssh config: cannot parse {line.strip()!r}") from None
        for pattern in patterns:
            pattern = _expand_home(pattern, home)
            if not os.path.isabs(pattern):
                pattern = os.path.join(base_dir, pattern)
            for path in sorted(glob.glob(pattern)):
                if not os.path.isfile(path) or path in seen:
                    continue
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        sub = f.read()
                except OSError:
                    continue
                out.append(
                    expand_includes(
                        sub, base_dir=base_dir, home=home, depth=depth + 1, seen=(*seen, path)
                    )
                )
                out.append(header)
    return "\n".join(out) + "\n"


def _expand_home(path: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    return os.path.expanduser(path)


def load_ssh_config(
    path: str | None,
    *,
    home: str | None = None,
    system_config: str | None = SYSTEM_SSH_CONFIG,
) -> Any:
    """A ``paramiko.SSHConfig`` for ``path`` (with its Includes inlined).

    ``path=None`` reads ``~/.ssh/config`` (if it exists) followed by the system config, like
    ``ssh``; an explicit path is read alone, like ``ssh -F path``, and must exist.
    """
    import paramiko

    home = home or os.path.expanduser("~")
    parts: list[str] = []
    if path is not None:
        full = _expand_home(path, home)
        if not os.path.isfile(full):
            raise SSHConfigError(f"ssh config file {full} does not exist")
        sources = [(full, os.path.join(home, ".ssh"))]
    else:
        sources = []
        user_cfg = os.path.join(home, ".ssh", "config")
        if os.path.isfile(user_cfg):
            sources.append((user_cfg, os.path.join(home, ".ssh")))
        if system_config and os.path.isfile(system_config):
            sources.append((system_config, os.path.dirname(system_config)))
    for src, base in sources:
        try:
            with open(src, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            raise SSHConfigError(f"cannot read ssh config {src}: {e.strerror}") from None
        parts.append(expand_includes(text, base_dir=base, home=home, seen=(src,)))
    # Each file starts in the implicit "Host *" block, not in the previous file's last block.
    text = "\nHost *\n".join(parts)
    try:
        return paramiko.SSHConfig.from_text(text)
    except paramiko.SSHException as e:
        raise SSHConfigError(f"cannot parse ssh config: {e}") from None


def _lookup(config: Any, host: str) -> dict[str, Any]:
    import paramiko

    try:
        return dict(config.lookup(host))
    except ImportError:
        raise SSHConfigError(
            "ssh config uses 'Match exec', which needs the 'invoke' package"
        ) from None
    except paramiko.SSHException as e:
        raise SSHConfigError(f"ssh config lookup for {host!r} failed: {e}") from None


def _expand_tokens(value: str, *, home: str, local_user: str, host: str, port: int, user: str) -> str:
    """Expand the ssh_config tokens allowed in file names (%d %u %h %p %r %% and ~)."""
    value = _expand_home(value, home)
    repl = {"%%": "%", "%d": home, "%u": local_user, "%h": host, "%p": str(port), "%r": user}
    return re.sub(r"%[%duhpr]", lambda m: repl[m.group(0)], value)


def _file_list(raw: str | None, **tokens: Any) -> tuple[str, ...] | None:
    """A whitespace-separated file list (UserKnownHostsFile ...); ``none`` -> empty."""
    if raw is None:
        return None
    try:
        items = shlex.split(raw)
    except ValueError:
        items = raw.split()
    if [i.lower() for i in items] == ["none"]:
        return ()
    return tuple(_expand_tokens(i, **tokens) for i in items)


def _yes(value: Any) -> bool:
    return str(value).strip().lower() in ("yes", "true", "on")


def _default(name: str) -> Any:
    for f in fields(SSHTarget):
        if f.name == name:
            return f.default
    raise KeyError(name)  # pragma: no cover


def resolve_route(
    target: SSHTarget,
    *,
    home: str | None = None,
    local_user: str | None = None,
    system_config: str | None = SYSTEM_SSH_CONFIG,
    config: Any = None,
) -> Route:
    """Resolve ``target`` against the ssh config into a :class:`Route`.

    Explicit ``SSHTarget`` fields win over the config (like ``ssh`` command-line options). For
    ``connect_timeout`` and ``keepalive``, which always have a value, the config's
    ``ConnectTimeout``/``ServerAliveInterval`` is used when the field is left at its default.
    An ``isolated`` target reads no config at all (an empty one, whatever ``config`` says) and its
    hops offer no agent or default keys (``Hop.user_keys``).
    ``home``/``local_user``/``system_config``/``config`` exist for tests.
    """
    home = home or os.path.expanduser("~")
    local_user = local_user or getpass.getuser()
    if not isinstance(target.host, str) or not target.host.strip():
        raise SSHConfigError("SSH target: host is empty")
    if target.isolated:
        if target.ssh_config is not None:
            raise SSHConfigError("SSH target: an isolated target reads no ssh config")
        import paramiko

        config = paramiko.SSHConfig.from_text("")
    elif config is None:
        config = load_ssh_config(target.ssh_config, home=home, system_config=system_config)

    explicit_ids: tuple[str, ...] = ()
    if target.identity_file:
        explicit_ids = (_expand_home(str(target.identity_file), home),)
    explicit_kh: tuple[str, ...] | None = None
    if target.known_hosts:
        explicit_kh = (_expand_home(str(target.known_hosts), home),)

    def make_hop(name: str, user: str | None, port: int | None, *, is_target: bool) -> Hop:
        # Before the lookup: a crafted name would reach "Match exec" / ProxyCommand as %h.
        if not valid_host(name) or (user is not None and not valid_user(user)):
            shown = name if valid_host(name) else repr(name[:60])
            raise SSHConfigError(f"SSH target {shown}: not a host name or user name OpenSSH "
                                 "accepts (no leading '-', spaces, quotes or shell characters)")
        opts = _lookup(config, name)
        hostname = str(opts.get("hostname") or name)
        if port is None:
            port = parse_port(opts["port"], f"ssh config Port for {name}") if "port" in opts else 22
        user = user or opts.get("user") or local_user
        tokens = {"home": home, "local_user": local_user, "host": hostname, "port": port,
                  "user": user}
        cfg_ids = tuple(_expand_home(p, home) for p in opts.get("identityfile") or ())
        if is_target or not cfg_ids:
            ids = explicit_ids + tuple(p for p in cfg_ids if p not in explicit_ids)
            required = explicit_ids
        else:
            ids, required = cfg_ids, ()
        if explicit_kh is not None:
            user_kh: tuple[str, ...] = explicit_kh
        else:
            from_cfg = _file_list(opts.get("userknownhostsfile"), **tokens)
            user_kh = from_cfg if from_cfg is not None else tuple(
                _expand_home(p, home) for p in USER_KNOWN_HOSTS
            )
        global_cfg = _file_list(opts.get("globalknownhostsfile"), **tokens)
        global_kh = global_cfg if global_cfg is not None else GLOBAL_KNOWN_HOSTS
        proxy_command = opts.get("proxycommand")
        return Hop(
            name=name,
            hostname=hostname,
            port=port,
            user=str(user),
            identity_files=ids,
            identity_required=required,
            identities_only=_yes(opts.get("identitiesonly", "no")),
            known_hosts_files=user_kh,
            global_known_hosts_files=tuple(global_kh),
            host_key_alias=opts.get("hostkeyalias") or None,
            proxy_command=str(proxy_command) if proxy_command else None,
            user_keys=not target.isolated,
        )

    target_port = target.port
    if target_port is not None:
        target_port = parse_port(target_port, "SSH target")
    target_hop = make_hop(target.host.strip(), target.user or None, target_port, is_target=True)
    target_opts = _lookup(config, target.host.strip())

    # The jump chain: the explicit spec, else the config's ProxyJump; then, like ssh, the first
    # jump host's own ProxyJump from the config, recursively. A host whose ProxyJump names
    # itself (a broad "Host *.site" block matching the jump host too) is reached directly.
    name = target.host.strip()
    if target.proxy_jump is not None and target.proxy_jump.strip():
        chain = parse_proxy_jump(target.proxy_jump)
    else:
        chain = parse_proxy_jump(str(target_opts.get("proxyjump") or ""))
        if [j.host.lower() for j in chain] == [name.lower()]:
            chain = []
    seen = {name.lower(), *(j.host.lower() for j in chain)}
    while chain:
        first = chain[0]
        more = parse_proxy_jump(str(_lookup(config, first.host).get("proxyjump") or ""))
        if not more or [j.host.lower() for j in more] == [first.host.lower()]:
            break
        loop = [j.host for j in more if j.host.lower() in seen]
        if loop or len(chain) + len(more) > _MAX_JUMP_DEPTH:
            raise SSHConfigError(
                f"ProxyJump loop in the ssh config (via {first.host} -> {', '.join(loop or ['...'])})"
            )
        seen.update(j.host.lower() for j in more)
        chain = more + chain

    jump_hops = [make_hop(j.host, j.user, j.port, is_target=False) for j in chain]
    hops = [*jump_hops, target_hop]
    # A ProxyCommand only applies to how the first hop is reached; with jumps it is ignored.
    # An explicit proxy_jump (even "none") replaces the target's ProxyCommand, as with ssh -J.
    hops = [h if i == 0 else _replace(h, proxy_command=None) for i, h in enumerate(hops)]
    if not jump_hops and target.proxy_jump is not None and target.proxy_jump.strip():
        hops[0] = _replace(hops[0], proxy_command=None)

    connect_timeout = float(target.connect_timeout)
    if connect_timeout == _default("connect_timeout") and target_opts.get("connecttimeout"):
        try:
            connect_timeout = float(target_opts["connecttimeout"])
        except ValueError:
            raise SSHConfigError(
                f"ssh config ConnectTimeout {target_opts['connecttimeout']!r} is not a number"
            ) from None
    if connect_timeout <= 0:
        raise SSHConfigError("connect_timeout must be positive")
    keepalive = int(target.keepalive)
    if keepalive == _default("keepalive") and target_opts.get("serveraliveinterval"):
        try:
            keepalive = int(target_opts["serveraliveinterval"])
        except ValueError:
            raise SSHConfigError(
                "ssh config ServerAliveInterval "
                f"{target_opts['serveraliveinterval']!r} is not a number"
            ) from None
    if keepalive < 0:
        raise SSHConfigError("keepalive must be >= 0")
    return Route(hops=tuple(hops), connect_timeout=connect_timeout, keepalive=keepalive)


def _replace(hop: Hop, **changes: Any) -> Hop:
    from dataclasses import replace

    return replace(hop, **changes)


# --------------------------------------------------------------------------------------------
# known_hosts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KnownHostEntry:
    """One parsed known_hosts line."""

    path: str
    lineno: int
    hosts: str  # the host pattern field as written (may be hashed: ``|1|salt|hash``)
    key_type: str  # the key's own type (from the key blob)
    blob: bytes
    marker: str | None = None  # "@revoked" / "@cert-authority"

    @property
    def fingerprint(self) -> str:
        """``SHA256:...`` like ``ssh-keygen -l``."""
        return fingerprint(self.blob)


@dataclass(frozen=True)
class HostKeyVerdict:
    """Outcome of :func:`check_host_key`."""

    status: Literal["ok", "unknown", "changed", "revoked"]
    entry: KnownHostEntry | None = None  # the matching, conflicting or revoking line
    other: tuple[KnownHostEntry, ...] = field(default=())  # known keys of other types


def fingerprint(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a public key blob."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def blob_key_type(blob: bytes) -> str | None:
    """The key type string embedded at the start of an SSH public key blob."""
    if len(blob) < 4:
        return None
    (n,) = struct.unpack(">I", blob[:4])
    if n > 64 or len(blob) < 4 + n:
        return None
    try:
        return blob[4 : 4 + n].decode("ascii")
    except UnicodeDecodeError:
        return None


def parse_known_hosts_line(line: str, *, path: str = "", lineno: int = 0) -> KnownHostEntry | None:
    """Parse one line; comments, blanks and malformed lines give ``None``."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    fields_ = line.split()
    marker = None
    if fields_[0].startswith("@"):
        marker = fields_[0].lower()
        fields_ = fields_[1:]
    if len(fields_) < 3:
        return None
    hosts, _type_field, b64 = fields_[:3]
    try:
        blob = base64.b64decode(b64.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    embedded = blob_key_type(blob)
    if embedded is None:
        return None
    return KnownHostEntry(
        path=path, lineno=lineno, hosts=hosts, key_type=embedded, blob=blob, marker=marker
    )


def load_known_hosts(paths: Iterable[str]) -> list[KnownHostEntry]:
    """Every usable entry of the files that exist (unreadable or missing files are skipped)."""
    entries: list[KnownHostEntry] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except OSError:
            continue
        for i, line in enumerate(lines, 1):
            entry = parse_known_hosts_line(line, path=path, lineno=i)
            if entry is not None:
                entries.append(entry)
    return entries


def _glob_match(pattern: str, name: str) -> bool:
    # Only '*' and '?' are special (fnmatch would treat '[host]:port' as a character class).
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, name, flags=re.IGNORECASE | re.DOTALL) is not None


def _hashed_match(field_: str, name: str) -> bool:
    parts = field_.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt = base64.b64decode(parts[2])
        want = base64.b64decode(parts[3])
    except ValueError:
        return False
    got = hmac.new(salt, name.encode("utf-8"), hashlib.sha1).digest()
    return hmac.compare_digest(got, want)


def host_matches(hosts_field: str, name: str) -> bool:
    """Whether a known_hosts host field (patterns, negations or a hash) covers ``name``."""
    name = name.lower()
    if hosts_field.startswith("|"):
        return _hashed_match(hosts_field, name)
    matched = False
    for pattern in hosts_field.split(","):
        negated = pattern.startswith("!")
        if negated:
            pattern = pattern[1:]
        if pattern and _glob_match(pattern, name):
            if negated:
                return False
            matched = True
    return matched


def check_host_key(entries: Sequence[KnownHostEntry], name: str, blob: bytes) -> HostKeyVerdict:
    """Trust decision for a server presenting key ``blob`` under known_hosts name ``name``.

    ``revoked`` if a matching ``@revoked`` line has this key; ``ok`` if any matching line has it;
    ``changed`` if a matching line has a different key of the same type; else ``unknown`` (with
    ``other`` listing keys of other types known for the host).
    """
    key_type = blob_key_type(blob)
    relevant = [e for e in entries if e.marker != "@cert-authority" and host_matches(e.hosts, name)]
    for e in relevant:
        if e.marker == "@revoked" and e.blob == blob:
            return HostKeyVerdict("revoked", e)
    plain = [e for e in relevant if e.marker is None]
    for e in plain:
        if e.blob == blob:
            return HostKeyVerdict("ok", e)
    for e in plain:
        if e.key_type == key_type:
            return HostKeyVerdict("changed", e)
    return HostKeyVerdict("unknown", None, tuple(plain))


def known_key_types(entries: Sequence[KnownHostEntry], name: str) -> list[str]:
    """Key types known for ``name``, in file order (to ask the server for one of those)."""
    out: list[str] = []
    for e in entries:
        if e.marker is None and e.key_type not in out and host_matches(e.hosts, name):
            out.append(e.key_type)
    return out


def keyscan_type(key_type: str) -> str:
    """The ``ssh-keyscan -t`` spelling of a key type."""
    if key_type == "ssh-ed25519":
        return "ed25519"
    if key_type.startswith("ecdsa-"):
        return "ecdsa"
    if key_type == "ssh-rsa":
        return "rsa"
    return key_type
