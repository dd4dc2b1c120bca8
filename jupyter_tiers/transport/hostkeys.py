"""Host key checks for a connection: which key types to ask for, and the verdict on the key the
server sent (nothing is ever added to a known_hosts file)."""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, Any

from . import sshconfig
from .errors import HostKeyError

if TYPE_CHECKING:
    import paramiko

    from .sshconfig import Hop


def prefer_key_types(t: paramiko.Transport, known_types: list[str]) -> None:
    """Ask the server for a host key of a type we already know for it (as ssh does)."""
    if not known_types:
        return
    opts = t.get_security_options()
    available = list(opts.key_types)
    wanted: list[str] = []
    for kt in known_types:
        names = ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if kt == "ssh-rsa" else [kt]
        wanted += [n for n in names if n in available and n not in wanted]
    if wanted:
        opts.key_types = wanted + [n for n in available if n not in wanted]


def verify_host_key(
    hop: Hop, blob: bytes, known: list[sshconfig.KnownHostEntry], via: Hop | None
) -> None:
    name = hop.host_key_name
    verdict = sshconfig.check_host_key(known, name, blob)
    if verdict.status == "ok":
        return
    key_type = sshconfig.blob_key_type(blob) or "unknown"
    fp = sshconfig.fingerprint(blob)
    # The file keys are added to, and whichever other files exist (missing defaults are noise).
    checked = tuple(
        p
        for i, p in enumerate((*hop.known_hosts_files, *hop.global_known_hosts_files))
        if i == 0 or os.path.exists(p)
    )
    add_to = hop.known_hosts_files[0] if hop.known_hosts_files else "~/.ssh/known_hosts"
    common: dict[str, Any] = {
        "host": hop.hostname,
        "port": hop.port,
        "key_type": key_type,
        "fingerprint": fp,
        "known_hosts": checked,
    }
    entry = verdict.entry
    if verdict.status == "revoked" and entry is not None:
        raise HostKeyError(
            f"The {key_type} host key {fp} of {name} is marked @revoked in {entry.path} line "
            f"{entry.lineno}; refusing to connect.",
            revoked=True,
            file=entry.path,
            line=entry.lineno,
            **common,
        )
    if verdict.status == "changed" and entry is not None:
        raise HostKeyError(
            f"WARNING: HOST KEY CHANGED for {name}. This could be a man-in-the-middle attack! "
            f"The server sent {key_type} {fp}, but {entry.path} line {entry.lineno} has "
            f"{entry.fingerprint}. Do not connect until the server's admin confirms the new "
            f"key; if the change is expected, remove the old entry with "
            f"`ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(entry.path)}` and add the new "
            "one.",
            changed=True,
            file=entry.path,
            line=entry.lineno,
            **common,
        )
    scan = "ssh-keyscan -t {} {}{}".format(
        sshconfig.keyscan_type(key_type),
        f"-p {hop.port} " if hop.port != sshconfig.DEFAULT_PORT else "",
        shlex.quote(hop.hostname),
    )
    if via is not None:  # only the jump host can reach it
        port = f"-p {via.port} " if via.port != sshconfig.DEFAULT_PORT else ""
        scan = f"ssh {port}{shlex.quote(f'{via.user}@{via.hostname}')} {shlex.quote(scan)}"
    note = ""
    if verdict.other:
        o = verdict.other[0]
        note = (
            f" ({o.path} line {o.lineno} has a {o.key_type} key for it, but the server only "
            f"offered {key_type}.)"
        )
    if hop.host_key_alias:
        how = f"add a line `{name} {key_type} <key>` to {add_to}"
    else:
        how = f"`{scan} >> {shlex.quote(add_to)}`"
    raise HostKeyError(
        f"Unknown host key for {name}: {key_type} {fp}, not found in {', '.join(checked) or add_to}."
        f"{note} Verify this fingerprint with the server's admin, then trust it with {how}.",
        **common,
    )
