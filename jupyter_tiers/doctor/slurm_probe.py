"""The doctor's I/O on a Slurm profile: resolve the SSH route, DNS, TCP, the host key and the
login (with the transport's own connection code), then ONE remote command that reports the
Slurm tools, configuration, partitions, nodes, associations, the workdir and the profile's
setup and Python. Each stage returns a small result dataclass; :mod:`.slurm_checks` judges them.

Read-only: the remote command only reads, except one empty test file in the workdir (``mktemp``,
removed at once). Nothing is added to any known_hosts file.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from ..config.profiles import Profile
from ..slurm import tier as slurm_tier  # transport_for looked up at call time (tests patch it)
from ..slurm.commands import BASH, NEUTRAL_ENV_SH
from ..transport import sshconfig
from ..transport.connection import connect_once, open_socket
from ..transport.errors import AuthenticationError, ConnectError, HostKeyError, TransportError
from ..transport.ssh import SSHTransport

# Looks up each tool (NAME PATH FIRST-LINE-OF---version), in the login shell's environment (where
# the tier runs sbatch) and again after the profile's setup lines (where the job script runs srun).
# Arguments: $1 workdir, $2 python, $3 the setup lines, $4 the Python probe.
DOCTOR_SH = NEUTRAL_ENV_SH + r"""lim=()
if t=$(command -v timeout 2>/dev/null); then lim=("$t" 20); fi  # a path: setup may change PATH
tools() {
  for t in sbatch squeue sacct scontrol sinfo srun; do
    p=$(command -v "$t" 2>/dev/null) || p=""
    v=""
    if [ -n "$p" ]; then IFS= read -r v < <("${lim[@]}" "$t" --version 2>&1 </dev/null); fi
    printf '%s%s\t%s\t%s\n' "$1" "$t" "$p" "$v"
  done
}
echo '@@jt-doctor tools'
tools ''
echo '@@jt-doctor config'
keys='AccountingStorageType|AccountingStorageEnforce|TopologyPlugin|ClusterName|SLURM_VERSION'
"${lim[@]}" scontrol show config 2>/dev/null </dev/null | grep -E "^($keys) "
echo '@@jt-doctor partitions'
"${lim[@]}" scontrol -o show partition 2>/dev/null </dev/null
echo '@@jt-doctor nodes'
"${lim[@]}" sinfo -h -N -o '%N|%c|%m|%G' 2>/dev/null </dev/null
echo '@@jt-doctor assoc'
"${lim[@]}" sacctmgr -n -P show assoc where user="$(id -un)" format=account,partition,qos \
  2>/dev/null </dev/null
echo '@@jt-doctor groups'
id -Gn 2>/dev/null
echo '@@jt-doctor workdir'
d="$1"
case "$d" in "~") d="$HOME";; "~/"*) d="$HOME/${d#"~/"}";; esac
printf 'path\t%s\n' "$d"
p="$d"
if [ -d "$d" ]; then
  printf 'exists\tyes\n'
  if f=$(mktemp "$d/.jt-doctor.XXXXXX" 2>&1); then rm -f -- "$f"; printf 'writable\tyes\n'
  else printf 'writable\tno\t%s\n' "$(printf '%s' "$f" | tail -n 1)"; fi
else
  printf 'exists\tno\n'
  while [ ! -d "$p" ]; do p=$(dirname -- "$p"); done
  if [ -w "$p" ]; then printf 'parent\t%s\twritable\n' "$p"; else printf 'parent\t%s\tnot-writable\n' "$p"; fi
fi
df -Pk -- "$p" 2>/dev/null | tail -n 1 | awk '{printf "df\t%s\t%s\n", $4, $6}'
echo '@@jt-doctor setup'
(
  eval "$3" >/dev/null 2>&1 </dev/null
  printf 'setup\t%s\n' "$?"
  tools 'tool	'
  "${lim[@]}" "$2" -c "$4" 2>&1 </dev/null  # no pipes here: setup may have emptied PATH
)
exit 0
"""

# --compute: the setup lines and the Python on one compute node, through srun (a one-minute job;
# --immediate gives up when no node is free within a minute). $1 partition, $2 account (either
# may be ""), $3 setup lines, $4 python, $5 the Python probe.
COMPUTE_SH = NEUTRAL_ENV_SH + r"""args=(-N1 -n1 --time=1 --immediate=60 -J jt-doctor)
if [ -n "$1" ]; then args+=(-p "$1"); fi
if [ -n "$2" ]; then args+=(-A "$2"); fi
inner='eval "$1" >/dev/null 2>&1 </dev/null; printf "setup\t%s\n" "$?"
printf "node\t%s\n" "${SLURMD_NODENAME:-$(hostname)}"
"$2" -c "$3" 2>&1 </dev/null'
srun "${args[@]}" bash --norc --noprofile -c "$inner" jt-doctor-compute "$3" "$4" "$5" 2>&1
printf 'srun\t%s\n' "$?"
"""

# The profile's Python on the login node: its version, and torch (with NCCL) if importable.
PY_PROBE = r"""import sys
print("python", sys.version.split()[0], sys.executable, sep="\t")
try:
    import torch
    import torch.distributed as dist
    print("torch", torch.__version__, "nccl" if dist.is_nccl_available() else "-", sep="\t")
except Exception as exc:
    print("torch", "-", type(exc).__name__, sep="\t")
"""


@dataclass(frozen=True)
class RouteProbe:
    """The SSH route as ~/.ssh/config and the profile make it: ``hops`` are (name, host, port,
    user, proxy_command, first known_hosts file); ``error`` when it cannot be resolved."""

    hops: tuple[tuple[str, str, int, str, str, str], ...] = ()
    error: str = ""


@dataclass(frozen=True)
class ReachProbe:
    """DNS and TCP of the first hop (the jump host with ProxyJump)."""

    host: str = ""
    port: int = 0
    addresses: tuple[str, ...] = ()
    dns_error: str = ""
    tcp_error: str = ""
    proxy_command: bool = False


@dataclass(frozen=True)
class LoginProbe:
    """The SSH handshake and login: ``methods`` the server offered per hop name; a host key
    problem (its attributes), an authentication or connection error, or success."""

    methods: dict[str, tuple[str, ...]] = field(default_factory=dict)
    agent_keys: int = 0
    host_key: dict[str, Any] = field(default_factory=dict)  # HostKeyError's attributes
    host_key_message: str = ""
    auth_error: str = ""
    connect_error: str = ""
    logged_in: bool = False
    reused: bool = False  # the remote checks ran over this process's connection (%tiers login)


@dataclass(frozen=True)
class RemoteProbe:
    """The doctor's one remote command: its output (parsed by :mod:`.slurm_parse`) or why not."""

    output: str = ""
    error: str = ""


@dataclass(frozen=True)
class SlurmProbe:
    route: RouteProbe
    reach: ReachProbe | None = None
    login: LoginProbe | None = None
    remote: RemoteProbe | None = None
    compute: RemoteProbe | None = None  # --compute only
    here: bool = False  # a profile without host: no SSH stages, Slurm's commands on this machine
    test_only: RemoteProbe | None = None  # here: `sbatch --test-only` of a one-minute job


def _target(profile: Profile) -> Any:
    return slurm_tier.transport_for(profile).target


def probe_route(profile: Profile) -> tuple[RouteProbe, Any]:
    try:
        route = sshconfig.resolve_route(_target(profile))
    except (sshconfig.SSHConfigError, OSError) as exc:
        return RouteProbe(error=str(exc)[:300]), None
    hops = tuple((h.name, h.hostname, h.port, h.user, h.proxy_command or "",
                  h.known_hosts_files[0] if h.known_hosts_files else "~/.ssh/known_hosts")
                 for h in route.hops)
    return RouteProbe(hops=hops), route


def probe_reach(route: Any) -> ReachProbe:
    hop = route.hops[0]
    if hop.proxy_command:
        return ReachProbe(host=hop.hostname, port=hop.port, proxy_command=True)
    try:
        infos = socket.getaddrinfo(hop.hostname, hop.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return ReachProbe(host=hop.hostname, port=hop.port, dns_error=str(exc.strerror))
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    try:
        sock = open_socket(hop, route)
    except ConnectError as exc:
        return ReachProbe(hop.hostname, hop.port, addresses, tcp_error=str(exc))
    sock.close()
    return ReachProbe(hop.hostname, hop.port, addresses)


def probe_login(route: Any) -> LoginProbe:
    """Connect as the tier would (host keys checked, never added; no one-time code asked),
    recording the authentication methods each hop offers before any key is tried."""
    import paramiko

    methods: dict[str, tuple[str, ...]] = {}

    def offered(t: paramiko.Transport, hop: Any) -> None:
        try:
            t.auth_none(hop.user)
            methods[hop.name] = ("none",)
        except paramiko.BadAuthenticationType as exc:
            methods[hop.name] = tuple(exc.allowed_types)
        except paramiko.SSHException:
            methods[hop.name] = ()

    agent_keys = 0
    try:
        agent = paramiko.Agent()
        agent_keys = len(agent.get_keys())
        agent.close()
    except Exception:  # no agent, or a broken one: the login check says what happens
        agent_keys = 0
    common: dict[str, Any] = {"methods": methods, "agent_keys": agent_keys}
    try:
        conn = connect_once(route, None, before_auth=offered)
    except HostKeyError as exc:
        attrs = {"host": exc.host, "port": exc.port, "key_type": exc.key_type,
                 "fingerprint": exc.fingerprint, "known_hosts": list(exc.known_hosts),
                 "changed": exc.changed, "revoked": exc.revoked, "file": exc.file, "line": exc.line}
        return LoginProbe(**common, host_key=attrs, host_key_message=str(exc))
    except AuthenticationError as exc:
        return LoginProbe(**common, auth_error=str(exc))
    except (ConnectError, TransportError, OSError) as exc:
        return LoginProbe(**common, connect_error=str(exc)[:300])
    conn.close()
    return LoginProbe(**common, logged_in=True)


def probe_compute(profile: Profile, connected: Any = None) -> RemoteProbe:
    """``--compute``: the setup lines and Python on one compute node (srun, a one-minute job)."""
    return _run_probe(profile, connected, 300, [
        *BASH, COMPUTE_SH, "jt-doctor", str(profile.defaults.get("partition") or ""),
        str(profile.defaults.get("account") or ""), "\n".join(profile.setup), _python(profile), PY_PROBE])


def probe_remote(profile: Profile, connected: Any = None) -> RemoteProbe:
    """The doctor's one remote command over a new transport of the profile's (no retries), or
    over ``connected``, a live transport of this process (left open)."""
    return _run_probe(profile, connected, 120, [
        *BASH, DOCTOR_SH, "jt-doctor", profile.workdir, _python(profile), "\n".join(profile.setup), PY_PROBE])


def _python(profile: Profile) -> str:
    return str(profile.defaults.get("python") or "python3")


def _run_probe(profile: Profile, connected: Any, timeout: float, argv: list[str]) -> RemoteProbe:
    """Run one probe program over ``connected`` (left open) or a new transport of the profile's
    (no retries: the doctor reports what it meets; closed afterwards)."""
    transport = connected or slurm_tier.transport_for(profile)
    if connected is None and isinstance(transport, SSHTransport):
        transport.retries = 0
    try:
        result = transport.run(argv, timeout=timeout, check=False)
    except TransportError as exc:
        return RemoteProbe(error=str(exc)[:300])
    finally:
        if connected is None:
            transport.close()
    return RemoteProbe(output=result.text())


def probe_test_only(profile: Profile, connected: Any = None) -> RemoteProbe:
    """``sbatch --test-only`` of a one-minute job in the profile's partition (nothing is
    submitted): whether this account may submit here, and when such a job would start."""
    args = ["sbatch", "--test-only", "--time=1", "-J", "jt-doctor"]
    if profile.defaults.get("partition"):
        args += ["-p", str(profile.defaults["partition"])]
    if profile.defaults.get("account"):
        args += ["-A", str(profile.defaults["account"])]
    transport = connected or slurm_tier.transport_for(profile)
    try:
        result = transport.run([*args, "--wrap", "true"], timeout=60, check=False)
    except TransportError as exc:
        return RemoteProbe(error=str(exc)[:300])
    text = (result.stdout + result.stderr).decode("utf-8", "replace").strip()
    return RemoteProbe(output=text) if result.exit_status == 0 else RemoteProbe(error=text[-300:] or
                                                                                "sbatch --test-only failed")


def probe_here(profile: Profile, connected: Any = None, *, compute: bool = False) -> SlurmProbe:
    """A profile without host: no route, DNS, TCP or login; the same remote command as over SSH,
    run here, and ``sbatch --test-only``."""
    remote = probe_remote(profile, connected)
    return SlurmProbe(RouteProbe(), remote=remote, here=True,
                      test_only=None if remote.error else probe_test_only(profile, connected),
                      compute=probe_compute(profile, connected) if compute and not remote.error else None)


def probe(profile: Profile, connected: Any = None, *, compute: bool = False) -> SlurmProbe:
    """Every stage in order; a stage that cannot go on leaves the later ones None. ``connected``:
    this process's live transport of the profile, used for the remote command when a fresh login
    would need a one-time code (the doctor asks none). ``compute``: also one compute node."""
    from dataclasses import replace

    if slurm_tier.runs_here(profile):
        return probe_here(profile, connected, compute=compute)
    route_probe, route = probe_route(profile)
    if route is None:
        return SlurmProbe(route_probe)
    reach = probe_reach(route)
    if reach.dns_error or reach.tcp_error:
        return SlurmProbe(route_probe, reach)
    login = probe_login(route)
    use = None
    if not login.logged_in:
        if connected is None or not connected.connected or "keyboard-interactive" not in login.auth_error:
            return SlurmProbe(route_probe, reach, login)
        login, use = replace(login, reused=True), connected
    remote = probe_remote(profile, use)
    return SlurmProbe(route_probe, reach, login, remote,
                      probe_compute(profile, use) if compute and not remote.error else None)
