"""The test cluster's second sshd (jupyter_tiers/tools/sandbox/twofactor.sh): a key, then a TOTP code.

Helpers shared by the two-factor tests: start it (idempotent), read its settings, compute the
current code from its secret (RFC 6238, the same as pam_google_authenticator), the next code
the server still accepts (``DISALLOW_REUSE`` spends each code), a code that is certainly wrong,
and a profile that reaches the cluster through it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import loud_skip

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "jupyter_tiers" / "tools" / "sandbox" / "twofactor.sh"
VENV_BIN = Path(sys.executable).parent
PROFILE = "box2fa"


def start_twofactor_sshd() -> dict[str, str]:
    """Start (or verify) the second sshd and return its settings (twofactor.env)."""
    if os.geteuid() != 0:
        loud_skip("two-factor login tests", "the second sshd needs root (PAM service, port)")
    proc = subprocess.run(
        ["bash", str(SCRIPT), "up"], capture_output=True, text=True, timeout=600, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(f"twofactor.sh up failed ({proc.returncode}): {proc.stderr[-2000:]}")
    env = subprocess.run(
        ["bash", str(SCRIPT), "env"], capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in env.splitlines() if "=" in line)


def totp(secret_file: str, at: float | None = None) -> str:
    """The 6-digit TOTP code of the secret (first line of the file) at time ``at`` (now)."""
    with open(secret_file, encoding="ascii") as f:
        secret = f.readline().strip()
    step = int(time.time() if at is None else at) // 30
    mac = hmac.new(base64.b32decode(secret), struct.pack(">Q", step), hashlib.sha1).digest()
    offset = mac[-1] & 15
    value = (struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF) % 1_000_000
    return f"{value:06d}"


def used_steps(secret_file: str) -> set[int]:
    """The time steps whose codes the server has seen (its ``DISALLOW_REUSE`` line): each code
    is accepted once, so a second login within 30 s needs the next step's."""
    with open(secret_file, encoding="ascii") as f:
        for line in f.read().splitlines()[1:]:
            if line.startswith('" DISALLOW_REUSE'):
                return {int(w) for w in line.split()[2:] if w.isdigit()}
    return set()


NEAR_STEPS = (0, 1, 2, 3, 4, 5, 6, 7, -1, -2, -3, -4, -5, -6, -7)


def next_code(secret_file: str, guard: float = 120.0) -> str:
    """A code the server accepts now: the first step not yet used of now, 1..7 after, 1..7 before
    (the test secret's WINDOW_SIZE 17 accepts 8 either side; one to spare for a slow login); when
    all were used, wait (at most ``guard`` s) for a step that was not."""
    deadline = time.monotonic() + guard
    while True:
        used, now = used_steps(secret_file), int(time.time()) // 30
        step = next((now + k for k in NEAR_STEPS if now + k not in used), None)
        if step is not None:
            return totp(secret_file, step * 30)
        if time.monotonic() > deadline:
            raise AssertionError(f"every code near now was used: {sorted(used)}")
        time.sleep(30 - time.time() % 30 + 0.5)


def wrong_code(secret_file: str) -> str:
    """A 6-digit code that no step the server accepts now (±8 steps, one to spare) gives."""
    near = {totp(secret_file, time.time() + 30 * k) for k in range(-9, 10)}
    far = time.time() + 30 * 100_000
    k = 0
    while (code := totp(secret_file, far + 30 * k)) in near:
        k += 1
    return code


def profile_yaml(cluster: dict[str, str], twofactor: dict[str, str], name: str = PROFILE) -> str:
    """A slurm profile for the test cluster through the two-factor sshd."""
    return (
        "profiles:\n"
        f"  {name}:\n"
        "    tier: slurm\n"
        f"    host: {twofactor['JT_SSH_2FA_HOST']}\n"
        f"    port: {twofactor['JT_SSH_2FA_PORT']}\n"
        f"    user: {cluster['JT_SSH_USER']}\n"
        f"    identity_file: {cluster['JT_SSH_KEY']}\n"
        f"    known_hosts: {twofactor['JT_SSH_2FA_KNOWN_HOSTS']}\n"
        "    workdir: /var/lib/jupyter-tiers-jobs/box\n"
        f"    setup: [\"source {VENV_BIN}/activate\"]\n"
        "    status_interval: 3\n"
        f"    defaults: {{partition: debug, time: \"00:10:00\", python: {VENV_BIN}/python}}\n"
    )


def contains_code(text: str, code: str) -> bool:
    """Whether ``code`` appears in ``text`` as a number of its own (not inside a longer one)."""
    return re.search(rf"(?<!\d){re.escape(code)}(?!\d)", text) is not None
