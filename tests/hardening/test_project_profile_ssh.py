"""Issue 36, finding 6: a Slurm profile that an untrusted project ./tiers.yaml defines itself
(``host: work-cluster``) borrows nothing of the user's SSH setup. With HOME pointed at a hostile
~/.ssh (a config that sends work-cluster elsewhere, as another user, with a planted key, through a
jump host and a ProxyCommand; a default key; an ssh-agent), its route is exactly what the profile
names and its login offers no key of the user's. Checked on the resolved connection parameters
and on authenticate() with a recording paramiko transport: no sshd needed."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import paramiko
import pytest

from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.slurm.tier import ssh_transport_for
from jupyter_tiers.transport import auth, sshconfig
from jupyter_tiers.transport.errors import AuthenticationError

HOSTILE_SSH_CONFIG = """\
Host work-cluster
  HostName evil.example.org
  User mallory
  Port 2222
  IdentityFile ~/.ssh/planted
  IdentitiesOnly yes
  ProxyJump jump.example.org
  HostKeyAlias trusted.example.org
  UserKnownHostsFile ~/.ssh/evil_known_hosts
Host jump.example.org
  ProxyCommand nc %h %p
Host *
  IdentityFile ~/.ssh/everything
"""
PROJECT = """\
profiles:
  work:
    tier: slurm
    host: work-cluster
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME with the hostile ~/.ssh (and default and planted keys), a project directory with
    PROJECT as its tiers.yaml as the working directory, no trusted layers."""
    home = tmp_path / "home"
    ssh = home / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    (ssh / "config").write_text(HOSTILE_SSH_CONFIG)
    key = paramiko.RSAKey.generate(1024)
    for name in ("id_rsa", "planted", "everything"):
        key.write_private_key_file(str(ssh / name))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-etc" / "tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", home / ".jupyter" / "tiers.yaml")
    monkeypatch.delenv(config.ENV_VAR, raising=False)
    monkeypatch.delenv(config.TRUST_ENV_VAR, raising=False)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "tiers.yaml").write_text(PROJECT)
    monkeypatch.chdir(repo)
    return home


def _route(home: Path, system_config: Path | None = None) -> sshconfig.Route:
    profile = load_config().profiles["work"]
    target = ssh_transport_for(profile).target
    return sshconfig.resolve_route(target, home=str(home),
                                   system_config=str(system_config) if system_config else None)


def test_the_hostile_config_is_read_for_a_profile_of_the_user(home: Path) -> None:
    """The control: the same host in the user's own tiers.yaml goes where their ssh config says
    (so the fixture is hostile indeed, and the user's setup still works)."""
    (home / ".jupyter").mkdir()
    (home / ".jupyter" / "tiers.yaml").write_text(PROJECT)
    route = _route(home)
    assert route.target.hostname == "evil.example.org" and route.target.user == "mallory"
    assert route.target.user_keys and len(route.hops) == 2


def test_a_project_profile_borrows_nothing_of_the_ssh_config(home: Path, tmp_path: Path) -> None:
    system = tmp_path / "ssh_config"
    system.write_text(HOSTILE_SSH_CONFIG)  # nor the system's config
    profile = load_config().profiles["work"]
    assert profile.project_defined
    route = _route(home, system)
    assert len(route.hops) == 1, "a ProxyJump of the user's config was taken"
    hop = route.target
    assert (hop.name, hop.hostname, hop.port, hop.user) == ("work-cluster", "work-cluster", 22,
                                                           getpass.getuser())
    assert hop.identity_files == () and not hop.identities_only
    assert hop.proxy_command is None and hop.host_key_alias is None
    assert hop.known_hosts_files == tuple(str(home / p[2:]) for p in sshconfig.USER_KNOWN_HOSTS)
    assert not hop.user_keys and not hop.look_for_keys


def test_a_project_profiles_port_and_user_are_its_own(home: Path) -> None:
    (Path.cwd() / "tiers.yaml").write_text(PROJECT + "    port: 2200\n    user: alice\n")
    hop = _route(home).target
    assert (hop.hostname, hop.port, hop.user) == ("work-cluster", 2200, "alice")


class _Recorder:
    """A paramiko.Transport stand-in: records each key offered, rejects it."""

    def __init__(self) -> None:
        self.offered: list[str] = []

    def auth_publickey(self, user: str, key: Any) -> list[str]:
        self.offered.append(key.get_base64())
        raise paramiko.AuthenticationException("no")

    def is_active(self) -> bool:
        return True


def test_a_project_profile_offers_no_key_of_the_user(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agents: list[str] = []

    class Agent:  # an ssh-agent holding the user's key
        def __init__(self) -> None:
            agents.append("opened")

        def get_keys(self) -> list[Any]:
            return [paramiko.RSAKey.from_private_key_file(str(home / ".ssh" / "id_rsa"))]

        def close(self) -> None:
            pass

    monkeypatch.setattr(paramiko, "Agent", Agent)
    t = _Recorder()
    with pytest.raises(AuthenticationError, match=r"borrows none of your ssh config, ssh-agent or ~/\.ssh"):
        auth.authenticate(t, _route(home).target)  # type: ignore[arg-type]
    assert t.offered == [] and agents == []
