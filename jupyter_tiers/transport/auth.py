"""Public-key authentication of one hop: identity files, ssh-agent keys, then default keys."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import sshconfig
from .errors import AuthenticationError, ConnectError, reason
from .kbdint import Ask, keyboard_interactive

if TYPE_CHECKING:
    import paramiko

    from .sshconfig import Hop


def authenticate(t: paramiko.Transport, hop: Hop, ask: Ask | None = None) -> None:
    """Public-key authentication: identity files, then ssh-agent keys, then default keys (the
    last two only where ``hop.user_keys``: not on an isolated target's route).

    A key the server accepts only partially (it wants keyboard-interactive next: a one-time
    code) is followed by the prompts, answered through ``ask``; without ``ask`` that is an error.
    """
    import paramiko

    who = hop.label
    notes: list[str] = []
    rejected = 0

    def attempt(key: paramiko.PKey, label: str) -> bool:
        nonlocal rejected
        try:
            remaining = t.auth_publickey(hop.user, key)
        except paramiko.BadAuthenticationType as e:
            allowed = ", ".join(e.allowed_types) or "nothing"
            raise AuthenticationError(
                f"{who} does not accept public-key authentication (it allows: {allowed})"
            ) from None
        except paramiko.AuthenticationException:
            rejected += 1
            notes.append(f"{label} rejected")
            return False
        except (paramiko.SSHException, EOFError, OSError) as e:
            if t.is_active():
                notes.append(f"{label}: {reason(e)}")
                return False
            if rejected:
                raise AuthenticationError(
                    f"{who} closed the connection after rejecting {rejected} key(s) "
                    f"({'; '.join(notes[-4:])}); too many keys offered? Set identity_file or "
                    "IdentitiesOnly"
                ) from None
            raise ConnectError(f"connection to {who} lost during authentication") from None
        if remaining and ask is not None and "keyboard-interactive" in remaining:
            keyboard_interactive(t, hop, ask)
            return True
        if remaining:
            raise AuthenticationError(
                f"{who} wants more than a key ({', '.join(remaining)}), which cannot be done "
                "non-interactively"
            )
        return True

    def load(path: str, required: bool) -> paramiko.PKey | None:
        if not os.path.exists(path):
            if required:
                raise AuthenticationError(f"identity file {path} does not exist")
            return None
        try:
            return paramiko.PKey.from_path(path)
        except (TypeError, paramiko.PasswordRequiredException):
            # cryptography raises TypeError for an encrypted key without a passphrase.
            notes.append(f"{path} is passphrase-protected (load it into ssh-agent: ssh-add {path})")
        except Exception as e:
            notes.append(f"{path} unusable ({type(e).__name__})")
        return None

    for path in hop.identity_files:
        key = load(path, path in hop.identity_required)
        if key is not None and attempt(key, path):
            return

    agent_keys: list[paramiko.PKey] = []
    agent: paramiko.Agent | None = None
    try:
        if hop.user_keys:  # an isolated target (a project file's own profile) borrows no agent
            agent = paramiko.Agent()
            agent_keys = list(agent.get_keys())
    except Exception as e:  # a broken agent must not prevent file keys from working
        notes.append(f"ssh-agent unusable ({reason(e)})")
    try:
        if hop.identities_only:
            wanted = {b for b in (_public_blob(p) for p in hop.identity_files) if b}
            agent_keys = [k for k in agent_keys if k.asbytes() in wanted]
        for akey in agent_keys:
            comment = getattr(akey, "comment", "") or akey.fingerprint
            if attempt(akey, f"agent key {comment}"):
                return
    finally:
        if agent is not None:
            agent.close()

    if hop.look_for_keys:
        for default in sshconfig.DEFAULT_IDENTITIES:
            path = os.path.expanduser(default)
            key = load(path, False)
            if key is not None and attempt(key, path):
                return

    if not hop.user_keys:
        tried = "; ".join(notes[-5:]) or "no identity_file"
        raise AuthenticationError(
            f"authentication to {who} failed ({tried}): this profile is defined by a project "
            "tiers.yaml, which borrows none of your ssh config, ssh-agent or ~/.ssh keys; to log in "
            "with yours, define the profile in ~/.jupyter/tiers.yaml, or trust the project file")
    tried = "; ".join(notes[-5:]) if notes else (
        "no keys to offer (no identity_file, no ssh-agent keys, no ~/.ssh/id_* keys)"
    )
    raise AuthenticationError(f"authentication to {who} failed: {tried}")


def _public_blob(private_path: str) -> bytes | None:
    """The key blob of ``<path>.pub``, to match an identity file with an agent key."""
    import base64

    try:
        with open(private_path + ".pub", encoding="utf-8") as f:
            parts = f.read().split()
        return base64.b64decode(parts[1]) if len(parts) >= 2 else None
    except (OSError, ValueError):
        return None
