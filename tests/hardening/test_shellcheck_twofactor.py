"""The two-factor sshd script (jupyter_tiers/sandbox/twofactor.sh) is shellcheck-clean, like
cluster.sh, with no rc file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "jupyter_tiers" / "sandbox" / "twofactor.sh"


def test_twofactor_script_is_clean_without_an_rc_file() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (tests/run.sh installs it with apt-get as root)")
    result = subprocess.run([shellcheck, "--norc", str(SCRIPT)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
