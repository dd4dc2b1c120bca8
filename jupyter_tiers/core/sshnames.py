"""Pure: the names that reach ssh's command line and ssh_config tokens (a host, a login name),
as OpenSSH accepts them and nothing a shell or an option could be made of. Profiles, ~/.ssh/config
resolution and `jupyter tiers init` check names with these."""

from __future__ import annotations

import re

# Host names as OpenSSH accepts them on its command line (no leading '-', no whitespace, control
# or shell characters): names, IPv4, [IPv6] and IPv6%scope. User names: POSIX-like login names.
_HOST_RE = re.compile(r"[A-Za-z0-9_.:%\[\]][A-Za-z0-9_.:%\[\]-]{0,252}")
_USER_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}")


def valid_host(name: str) -> bool:
    """A host name or address as OpenSSH takes it (also what ssh config's %h may carry)."""
    return isinstance(name, str) and _HOST_RE.fullmatch(name) is not None


def valid_user(name: str) -> bool:
    """A login name without shell or ssh-option characters (OpenSSH's valid_ruser, stricter)."""
    return isinstance(name, str) and _USER_RE.fullmatch(name) is not None
