"""Issue 9, finding 2: host and user names are checked like OpenSSH does before the ssh config is
consulted (a crafted name would reach ``Match exec`` or ``ProxyCommand`` as %h)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.transport import sshconfig as sc
from jupyter_tiers.transport.target import SSHTarget


@pytest.fixture
def ssh_config(tmp_path: Path) -> str:
    marker = tmp_path / "ran"
    path = tmp_path / "ssh_config"
    path.write_text(f"Host *\n  ProxyCommand touch {marker}-%h\n")
    return str(path)


@pytest.mark.parametrize("target", [
    SSHTarget(host="-oProxyCommand=touch /tmp/x"), SSHTarget(host="h;id"),
    SSHTarget(host="h $(id)"),
    SSHTarget(host="h\tx"), SSHTarget(host="ok.example", user="-oX=y"),
    SSHTarget(host="ok.example", user="a;b"),
    SSHTarget(host="ok.example", proxy_jump="j;id"),
    SSHTarget(host="ok.example", proxy_jump="x@-oProxy=y"),
])
def test_crafted_names_are_refused(target: SSHTarget, ssh_config: str, tmp_path: Path) -> None:
    target = SSHTarget(**{**target.__dict__, "ssh_config": ssh_config})
    with pytest.raises(sc.SSHConfigError):
        sc.resolve_route(target, home=str(tmp_path), local_user="me", system_config=None)


def test_ordinary_names_resolve(ssh_config: str, tmp_path: Path) -> None:
    target = SSHTarget(host="login.example", user="alice", proxy_jump="bob@jump:2222", ssh_config=ssh_config)
    route = sc.resolve_route(target, home=str(tmp_path), local_user="me", system_config=None)
    assert route.target.hostname == "login.example" and route.target.user == "alice"
    assert not list(tmp_path.glob("ran*"))  # resolving runs nothing
