"""cluster.sh is shellcheck-clean with no repository-wide exceptions (issue 9: SC2174 was silenced
in a .shellcheckrc for `mkdir -p -m`; the line now sets its umask instead). tests/run.sh runs
shellcheck too; this test also makes sure no rc file hides a finding."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CLUSTER_SCRIPT

ROOT = Path(__file__).resolve().parents[2]


def test_cluster_script_is_clean_without_an_rc_file() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (tests/run.sh installs it with apt-get as root)")
    result = subprocess.run([shellcheck, "--norc", str(CLUSTER_SCRIPT)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_repository_wide_shellcheck_exceptions() -> None:
    rc = ROOT / ".shellcheckrc"
    assert not rc.exists() or "disable" not in rc.read_text()
