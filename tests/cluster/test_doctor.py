"""Issue 21 section 1: ``jupyter tiers doctor`` against the real Slurm test cluster over its real
sshd: all OK; an unknown host key (an empty known_hosts file); Slurm missing after the profile's
setup (a PATH override); a full workdir (a 64 KiB tmpfs, filled) and a read-only one (a tmpfs
mounted read-only); the command line's exit status and --json."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.doctor import run_doctor
from jupyter_tiers.doctor.model import Report, Status
from jupyter_tiers.doctor.render import render_text
from tests.cluster.conftest import profile_yaml
from tests.helpers import loud_skip

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, env: dict[str, str], **changes: object) -> Path:
    data = yaml.safe_load(profile_yaml(env))
    data["profiles"]["box"].update(changes)
    path.write_text(yaml.safe_dump(data))
    return path


def _doctor(path: Path, monkeypatch: pytest.MonkeyPatch) -> Report:
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return run_doctor(load_config(), ["box"])


def _by_name(report: Report) -> dict[str, tuple[Status, str, str]]:
    return {c.name: (c.status, c.detail, c.fix) for c in report.profiles[0].checks}


def test_a_working_profile_is_all_ok(cluster_env: dict[str, str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    report = _doctor(_write(tmp_path / "tiers.yaml", cluster_env), monkeypatch)
    checks = _by_name(report)
    assert [s for s, _, _ in checks.values()] == [Status.OK] * len(checks), render_text(report)
    assert list(checks) == ["dns", "tcp", "host key", "auth methods", "login", "slurm tools",
                            "accounting", "partitions", "gpus", "topology", "workdir",
                            "setup and python"]
    assert "Slurm 22." in checks["slurm tools"][1] or "Slurm 2" in checks["slurm tools"][1]
    assert "debug*" in checks["partitions"][1] and "preemptible" in checks["partitions"][1]
    assert checks["topology"][1].startswith("topology/tree")
    assert checks["accounting"][1].startswith("on (")
    assert "4× 8 CPUs" in checks["gpus"][1] or "× " in checks["gpus"][1]
    assert report.exit_status == 0
    # Read-only: the one test file was removed at once.
    assert not list(Path("/var/lib/jupyter-tiers-jobs/box").glob(".jt-doctor.*"))


def test_an_unknown_host_key_names_the_file_fingerprint_and_commands(
        cluster_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    report = _doctor(_write(tmp_path / "tiers.yaml", cluster_env, known_hosts=str(empty)), monkeypatch)
    checks = _by_name(report)
    status, detail, fix = checks["host key"]
    expected = subprocess.run(["ssh-keygen", "-lf", cluster_env["JT_KNOWN_HOSTS"]], capture_output=True,
                              text=True, check=True).stdout.split()[1]  # SHA256:...
    assert status is Status.FAIL and expected in detail, detail
    port, host, user = cluster_env["JT_SSH_PORT"], cluster_env["JT_SSH_HOST"], cluster_env["JT_SSH_USER"]
    assert f"ssh-keyscan -p {port} {host}" in fix and f"ssh -p {port} {user}@{host}" in fix
    assert str(empty) in fix and "never adds it" in fix
    assert empty.read_text() == ""  # never auto-added
    assert checks["login"][0] is Status.SKIP and checks["workdir"][0] is Status.SKIP
    assert report.exit_status == 1


def test_slurm_missing_after_the_setup_lines_is_a_fail(cluster_env: dict[str, str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    venv = Path(sys.executable).parent
    path = _write(tmp_path / "tiers.yaml", cluster_env, setup=[f"export PATH={venv}"])
    checks = _by_name(_doctor(path, monkeypatch))
    status, detail, fix = checks["slurm tools"]
    assert status is Status.FAIL, detail
    assert detail.startswith("srun, scontrol not found after the profile's setup lines"), detail
    assert "extend PATH" in fix
    assert checks["setup and python"][0] is Status.OK  # the interpreter is a path: it still runs


@pytest.fixture
def tiny_mount(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (mount needs root; the cluster in a box shares this machine's disks)."""
    where = tmp_path / "tiny"
    where.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        loud_skip("doctor full-workdir test", f"cannot mount a tmpfs: {made.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_workdir_is_a_fail(cluster_env: dict[str, str], tmp_path: Path, tiny_mount: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(["dd", "if=/dev/zero", f"of={tiny_mount / 'fill'}", "bs=4k", "count=64"],
                   capture_output=True, check=False)  # until ENOSPC
    path = _write(tmp_path / "tiers.yaml", cluster_env, workdir=str(tiny_mount))
    status, detail, fix = _by_name(_doctor(path, monkeypatch))["workdir"]
    assert status is Status.FAIL and f"{tiny_mount} is full: 0.0 GiB free" in detail, detail
    assert "free space there" in fix
    assert sorted(p.name for p in tiny_mount.iterdir()) == ["fill"]


def test_a_read_only_workdir_is_a_fail(cluster_env: dict[str, str], tmp_path: Path, tiny_mount: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_mount)], check=True)
    path = _write(tmp_path / "tiers.yaml", cluster_env, workdir=str(tiny_mount))
    status, detail, fix = _by_name(_doctor(path, monkeypatch))["workdir"]
    assert status is Status.FAIL and f"{tiny_mount} is not writable" in detail, detail
    assert "Read-only file system" in detail and "set workdir" in fix


def test_the_command_line_exit_status_and_json(cluster_env: dict[str, str], tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    data = yaml.safe_load(profile_yaml(cluster_env))
    data["profiles"]["stranger"] = {**data["profiles"]["box"], "known_hosts": str(empty)}
    path = tmp_path / "tiers.yaml"
    path.write_text(yaml.safe_dump(data))
    env = {**os.environ, "JUPYTER_TIERS_CONFIG": str(path), "PYTHONPATH": str(ROOT)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "jupyter_tiers.faces.cli", "doctor", *args], env=env,
                              capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)

    good = cli("box")
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.splitlines()[0] == "box (slurm)" and good.stdout.rstrip().endswith("12 OK")
    bad = cli("box", "stranger", "--json")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    report = json.loads(bad.stdout)
    assert report["ok"] is False and [p["ok"] for p in report["profiles"]] == [True, False]
    host_key = next(c for c in report["profiles"][1]["checks"] if c["name"] == "host key")
    assert host_key["status"] == "FAIL" and host_key["data"]["fingerprint"].startswith("SHA256:")
    unknown = cli("nope")
    assert unknown.returncode == 1 and "no such profile" in unknown.stderr


def test_through_a_proxy_jump(cluster_env: dict[str, str], tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The box's sshd as its own jump host: each hop's host key is checked, the route is shown."""
    jump = f"{cluster_env['JT_SSH_USER']}@{cluster_env['JT_SSH_HOST']}:{cluster_env['JT_SSH_PORT']}"
    report = _doctor(_write(tmp_path / "tiers.yaml", cluster_env, proxy_jump=jump), monkeypatch)
    checks = _by_name(report)
    assert report.exit_status == 0, render_text(report)
    host, port = cluster_env["JT_SSH_HOST"], cluster_env["JT_SSH_PORT"]
    assert checks["ssh route"][1] == f"root@{host}:{port} → root@{host}:{port}"
    assert checks["tcp"][1].endswith(f"(then {host} through it)")
    assert checks["host key"][1] == f"known ({host}:{port}, {host}:{port})"


def test_a_two_factor_host_is_a_warning_pointing_to_login(cluster_env: dict[str, str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared cluster's second sshd (key, then a TOTP code), only read here: the doctor never
    needs the code, it stops where the code would be asked."""
    import socket

    from tests.cluster.twofactor import PROFILE, SCRIPT
    from tests.cluster.twofactor import profile_yaml as twofactor_yaml

    said = subprocess.run(["bash", str(SCRIPT), "env"], capture_output=True, text=True, check=False)
    twofactor = dict(line.split("=", 1) for line in said.stdout.splitlines() if "=" in line)
    try:
        socket.create_connection((twofactor["JT_SSH_2FA_HOST"], int(twofactor["JT_SSH_2FA_PORT"])), 5).close()
    except (KeyError, ValueError, OSError) as exc:
        loud_skip("doctor two-factor test", f"the two-factor sshd is not running ({exc})")
    path = tmp_path / "tiers.yaml"
    path.write_text(twofactor_yaml(cluster_env, twofactor))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    report = run_doctor(load_config(), [PROFILE])
    checks = _by_name(report)
    assert checks["auth methods"][0] is Status.OK and "key" in checks["auth methods"][1]
    status, detail, fix = checks["login"]
    assert status is Status.WARN and "one-time code" in detail, detail
    assert f"%tiers login -p {PROFILE}" in fix
    assert checks["workdir"][0] is Status.SKIP
    assert report.exit_status == 0  # nothing failed; the checks after login could not run


def test_compute_runs_the_setup_and_python_on_a_node(cluster_env: dict[str, str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(_write(tmp_path / "tiers.yaml", cluster_env)))
    report = run_doctor(load_config(), ["box"], compute=True)
    status, detail, _ = _by_name(report)["compute node"]
    assert status is Status.OK and re.match(r"node\d: Python 3\.\d+\.\d+; ", detail), detail
    missing = _write(tmp_path / "bad.yaml", cluster_env,
                     defaults={"partition": "nosuch", "python": "python3", "time": "00:10:00"})
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(missing))
    status, detail, fix = _by_name(run_doctor(load_config(), ["box"], compute=True))["compute node"]
    assert status is Status.FAIL and "srun did not start on a node" in detail, detail
    assert "invalid partition" in detail.lower(), detail
    assert "partition/account" in fix
