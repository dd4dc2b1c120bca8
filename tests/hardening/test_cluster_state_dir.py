"""Issue 9, finding 1: cluster.sh refuses a state directory another user controls (a symlink, not
root's, group/world-writable, or under such a parent), never follows a symlinked .lock, and its
sshd runs with StrictModes yes. Runs the real script (read-only commands) on crafted directories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CLUSTER_DIR, CLUSTER_SCRIPT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cluster.sh runs as root only (needs chown too)")


def _status(state_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JT_CLUSTER_DIR": str(state_dir)}
    return subprocess.run(["bash", str(CLUSTER_SCRIPT), "status"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)  # pytest's 0700 is fine; make the parents' modes explicit
    return tmp_path


def test_directory_of_another_user_is_refused(base: Path) -> None:
    d = base / "theirs"
    d.mkdir(mode=0o755)
    os.chown(d, 65534, 65534)
    result = _status(d)
    assert result.returncode == 3
    assert "owned by uid 65534, not root" in result.stderr


def test_symlinked_directory_is_refused(base: Path) -> None:
    real = base / "real"
    real.mkdir(mode=0o755)
    (base / "link").symlink_to(real)
    result = _status(base / "link")
    assert result.returncode == 3 and "is a symlink" in result.stderr


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o1777])
def test_group_or_world_writable_directory_is_refused(base: Path, mode: int) -> None:
    d = base / "open"
    d.mkdir()
    d.chmod(mode)
    result = _status(d)
    assert result.returncode == 3 and "writable by group or others" in result.stderr


def test_directory_under_a_world_writable_parent_is_refused(base: Path) -> None:
    parent = base / "shared"
    parent.mkdir()
    parent.chmod(0o777)  # no sticky bit: anyone could replace the state directory
    result = _status(parent / "cluster")
    assert result.returncode == 3 and "shared is writable by group or others" in result.stderr
    assert not (parent / "cluster").exists()


def test_symlinked_lock_is_refused(base: Path) -> None:
    d = base / "ok"
    d.mkdir(mode=0o755)
    victim = base / "victim"
    victim.write_text("precious\n")
    (d / ".lock").symlink_to(victim)
    result = _status(d)
    assert result.returncode == 3 and ".lock is a symlink" in result.stderr
    assert victim.read_text() == "precious\n"


def test_root_owned_private_directory_is_accepted(base: Path) -> None:
    d = base / "mine"
    d.mkdir(mode=0o755)
    result = _status(d)
    assert result.returncode == 1  # not set up yet, but not refused
    assert "not set up yet" in result.stdout


def test_default_state_dir_is_root_owned_and_sshd_is_strict() -> None:
    assert str(CLUSTER_DIR).startswith("/var/lib/") or "JT_CLUSTER_DIR" in os.environ
    text = CLUSTER_SCRIPT.read_text()
    assert "StrictModes yes" in text and "StrictModes no" not in text
    config = CLUSTER_DIR / "etc" / "sshd_config"
    if config.exists():  # the running test cluster
        assert "StrictModes yes" in config.read_text()
        info = CLUSTER_DIR.stat()
        assert info.st_uid == 0 and not info.st_mode & 0o022
