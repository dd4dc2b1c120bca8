"""Where an SSH connection goes: :class:`SSHTarget` (plain data, no imports of paramiko)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SSHTarget:
    """Where to connect. ``None`` fields come from ``~/.ssh/config`` (or ssh's defaults).

    ``proxy_jump`` is ``[user@]host[:port]`` hops separated by commas (``"none"`` disables a
    configured ProxyJump). ``connect_timeout`` and ``keepalive`` give way to the config's
    ``ConnectTimeout``/``ServerAliveInterval`` only when left at their defaults.

    ``isolated``: only what these fields name is used: no ssh config (neither ``~/.ssh/config``
    nor the system's: no HostName, User, IdentityFile, ProxyJump or ProxyCommand from it), no
    ssh-agent keys and no default ``~/.ssh/id_*`` keys. A profile that an untrusted project
    ``tiers.yaml`` defines itself connects so: it borrows nothing of the user's (known_hosts
    still decides whether the host is trusted).
    """

    host: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None
    ssh_config: str | None = None
    connect_timeout: float = 15.0
    keepalive: int = 15
    isolated: bool = False

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"

