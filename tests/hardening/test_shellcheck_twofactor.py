"""The two-factor sshd script (jupyter_tiers/tools/sandbox/twofactor.sh) is shellcheck-clean, like
cluster.sh, with no rc file."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "jupyter_tiers" / "tools" / "sandbox" / "twofactor.sh"


def test_twofactor_script_is_clean_without_an_rc_file() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (tests/run.sh installs it with apt-get as root)")
    result = subprocess.run([shellcheck, "--norc", str(SCRIPT)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _script_functions(*names: str) -> str:
    """The bash text of the script's functions ``names`` (to run one without the rest)."""
    text = SCRIPT.read_text(encoding="utf-8")
    out = []
    for name in names:
        match = re.search(rf"^{name}\(\) {{\n.*?^}}\n", text, re.S | re.M)
        assert match, f"twofactor.sh has no {name}()"
        out.append(match.group(0))
    return "".join(out)


def test_a_new_secret_disallows_reuse_and_limits_the_rate(tmp_path: Path) -> None:
    """The options pam_google_authenticator reads at each login (issue 20 item 14): each code
    once, at most 30 attempts per 30 s, 8 steps either side, time-based."""
    out = subprocess.run(["bash", "-c", _script_functions("gen_secret_options") + "gen_secret_options"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    assert out.splitlines() == ['" RATE_LIMIT 30 30', '" WINDOW_SIZE 17', '" DISALLOW_REUSE', '" TOTP_AUTH']


def test_the_health_checks_code_and_the_test_helper_skip_a_used_step(tmp_path: Path) -> None:
    """With DISALLOW_REUSE a second login within 30 s needs the next step's code: the script's
    askpass and tests/cluster/twofactor.py's next_code both give it (the server's own list of
    used steps is the secret file's DISALLOW_REUSE line)."""
    from tests.cluster.twofactor import next_code, totp

    secret = tmp_path / "totp-secret"
    askpass = tmp_path / "askpass-code"
    script = _script_functions("gen_askpass") + f'TF={shlex.quote(str(tmp_path))}; gen_askpass'
    askpass.write_text(subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                                      timeout=30).stdout)

    def ask() -> str:
        return subprocess.run([sys.executable, str(askpass)], capture_output=True, text=True, check=True,
                              timeout=90).stdout.strip()

    # used steps -> the step given, from now: now, later ones, then earlier ones
    cases = (([], 0), ([-1], 0), ([0], 1), ([-2, 0], 1), ([0, 1, 2], 3), ([0, 1, 2, 3], 4),
             ([*range(8)], -1), ([-2, -1, *range(8)], -3))
    for used, given in cases:
        while True:  # redone when a 30 s step ends in between (no timed assertion)
            now = int(time.time()) // 30
            secret.write_text("JBSWY3DPEHPK3PXP\n" + '" RATE_LIMIT 10 30 1700000000\n" DISALLOW_REUSE'
                              + "".join(f" {now + u}" for u in used) + '\n" TOTP_AUTH\n')
            answers = (ask(), next_code(str(secret)))
            if int(time.time()) // 30 == now:
                break
        expected = totp(str(secret), (now + given) * 30)
        assert answers == (expected, expected), used
