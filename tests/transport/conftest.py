"""A real, throwaway OpenSSH server for the SSH transport tests.

``sshd`` runs as ``/usr/sbin/sshd -D -f <tmp config>`` on 127.0.0.1 with a random free port, its
own ed25519 host key, key authentication only (``UsePAM no``, ``StrictModes no``,
``AuthorizedKeysFile <tmp>/authorized_keys``) and TCP forwarding on (for ProxyJump tests).
If sshd is missing and we are root it is installed with apt; if it is missing and we are not
root, the tests are skipped with a loud reason.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import free_port, loud_skip

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "/usr/bin/ssh-keygen"


def _ensure_openssh() -> None:
    if os.path.exists(SSHD) and os.path.exists(SSH_KEYGEN):
        return
    if os.geteuid() != 0:
        loud_skip("SSH transport tests", f"{SSHD} is not installed and we are not root to apt-get install it",
                  fail_in_ci=False)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "openssh-server", "openssh-client"],
    ):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed: {proc.stderr[-2000:]}")
    if not os.path.exists(SSHD):
        pytest.fail(f"apt installed openssh-server but {SSHD} is still missing")


def keygen(path: Path, comment: str = "jupyter-tiers-test") -> Path:
    """A fresh passphrase-less ed25519 key pair at ``path`` / ``path.pub``."""
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    path.chmod(0o600)
    return path


@dataclass
class SSHServer:
    """A running sshd and the client-side material to reach it."""

    dir: Path
    port: int
    user: str
    client_key: Path
    host_pub: str  # "ssh-ed25519 AAAA..." (no host field)
    known_hosts: Path  # a known_hosts with exactly the right entry
    log: Path
    proc: subprocess.Popen[bytes]
    host: str = "127.0.0.1"

    @property
    def known_hosts_name(self) -> str:
        return f"[{self.host}]:{self.port}"

    def known_hosts_line(self) -> str:
        return f"{self.known_hosts_name} {self.host_pub}\n"

    def target(self, **overrides: Any) -> Any:
        from jupyter_tiers.transport.ssh import SSHTarget

        fields: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "identity_file": str(self.client_key),
            "known_hosts": str(self.known_hosts),
            "connect_timeout": 10.0,
        }
        fields.update(overrides)
        return SSHTarget(**fields)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_sshd(base: Path) -> SSHServer:
    """Start a fresh sshd under ``base`` (keys, config, log) and wait until it listens."""
    _ensure_openssh()
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    base.mkdir(parents=True, exist_ok=True)
    host_key = keygen(base / "ssh_host_ed25519_key", "test-host")
    client_key = keygen(base / "id_ed25519", "test-client")
    auth = base / "authorized_keys"
    auth.write_text((base / "id_ed25519.pub").read_text())
    auth.chmod(0o600)
    host_pub = " ".join((base / "ssh_host_ed25519_key.pub").read_text().split()[:2])
    user = getpass.getuser()
    log = base / "sshd.log"
    last_error = ""
    for _ in range(5):  # a random port may be taken between probing and binding
        port = free_port()
        config = base / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key}",
                    f"PidFile {base / 'sshd.pid'}",
                    f"AuthorizedKeysFile {auth}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "UsePAM no",
                    "StrictModes no",
                    "AllowTcpForwarding yes",
                    "UseDNS no",
                    "PrintMotd no",
                    "MaxSessions 30",
                    "MaxStartups 50:30:100",
                    "LogLevel DEBUG1",
                    "",
                ]
            )
        )
        check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            pytest.fail(f"sshd rejected the test config: {check.stderr}")
        log.write_text("")
        proc = subprocess.Popen(
            [SSHD, "-D", "-f", str(config), "-E", str(log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60  # a loaded machine starts sshd slowly; a bound, not a timing
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.settimeout(2)
                    if s.recv(64).startswith(b"SSH-"):
                        break
            except OSError:
                time.sleep(0.05)
        else:
            last_error = log.read_text(errors="replace")[-2000:]
            if proc.poll() is None:
                proc.kill()
            proc.wait(5)
            continue
        known = base / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_pub}\n")
        return SSHServer(
            dir=base,
            port=port,
            user=user,
            client_key=client_key,
            host_pub=host_pub,
            known_hosts=known,
            log=log,
            proc=proc,
        )
    pytest.fail(f"sshd did not start: {last_error}")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    """One sshd for the whole session (tests must not stop it)."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def private_sshd(tmp_path: Path) -> Iterator[SSHServer]:
    """An sshd of this test's own, which the test may stop."""
    server = start_sshd(tmp_path / "sshd")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake, empty HOME and no ssh-agent: the developer's ~/.ssh must not leak in."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


@pytest.fixture
def transports() -> Iterator[list[Any]]:
    """Collects transports a test creates and closes them afterwards."""
    made: list[Any] = []
    yield made
    for t in made:
        t.close()
