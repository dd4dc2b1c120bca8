"""ssh config resolution and known_hosts matching for the SSH transport (no server needed)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.transport import sshconfig as sc
from jupyter_tiers.transport.hostkeys import verify_host_key
from jupyter_tiers.transport.ssh import HostKeyError, SSHTarget, TransportError
from jupyter_tiers.transport.sshconfig import Hop, JumpSpec, SSHConfigError

ED_A = "AAAAC3NzaC1lZDI1NTE5AAAAIGVbqUZ0n3OJOWs6k2ZuY0Y8Tu8p0cJ6f2rXJ2b4qH2m"
ED_B = "AAAAC3NzaC1lZDI1NTE5AAAAIB9uL8B2y0S3rA+3yQfJ3oJ8h6bU2hEo3eI9yZkqV1xN"


def blob(b64: str) -> bytes:
    return base64.b64decode(b64)


@pytest.fixture(autouse=True)
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """paramiko expands ``~`` in IdentityFile with the real HOME: point it at a temp dir."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def resolve(tmp_path: Path, config: str, **target: Any) -> sc.Route:
    home = tmp_path / "home"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(config)
    target.setdefault("ssh_config", str(cfg))
    return sc.resolve_route(
        SSHTarget(**target), home=str(home), local_user="me", system_config=None
    )


# --- ProxyJump specs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("host", [JumpSpec("host")]),
        ("u@host:2222", [JumpSpec("host", "u", 2222)]),
        ("a, b@c:23 ,d", [JumpSpec("a"), JumpSpec("c", "b", 23), JumpSpec("d")]),
        ("ssh://u@h:99", [JumpSpec("h", "u", 99)]),
        ("u@[::1]:2200", [JumpSpec("::1", "u", 2200)]),
        ("fe80::1", [JumpSpec("fe80::1")]),
        ("first.last@corp@gw", [JumpSpec("gw", "first.last@corp")]),
        ("none", []),
        ("NONE", []),
        ("", []),
    ],
)
def test_parse_proxy_jump(spec: str, expected: list[JumpSpec]):
    assert sc.parse_proxy_jump(spec) == expected


@pytest.mark.parametrize("spec", ["h:notaport", "h:0", "h:70000", "a,,b", "@h", "[::1", "[::1]x"])
def test_parse_proxy_jump_rejects(spec: str):
    with pytest.raises(SSHConfigError):
        sc.parse_proxy_jump(spec)


# --- resolution --------------------------------------------------------------------------------

BOX = """\
Host box
  HostName 10.1.2.3
  Port 2201
  User alice
  IdentityFile ~/.ssh/box_key
  IdentityFile /keys/second
  UserKnownHostsFile ~/.ssh/kh_one "/etc/kh two"
  ServerAliveInterval 7
  ConnectTimeout 9

Host *
  User fallback
"""


def test_alias_resolution(tmp_path: Path):
    route = resolve(tmp_path, BOX, host="box")
    home = str(tmp_path / "home")
    hop = route.target
    assert route.jumps == ()
    assert (hop.hostname, hop.port, hop.user) == ("10.1.2.3", 2201, "alice")
    assert hop.identity_files == (f"{home}/.ssh/box_key", "/keys/second")
    assert hop.identity_required == ()
    assert not hop.look_for_keys
    assert hop.known_hosts_files == (f"{home}/.ssh/kh_one", "/etc/kh two")
    assert hop.host_key_name == "[10.1.2.3]:2201"
    assert route.keepalive == 7
    assert route.connect_timeout == 9.0


def test_explicit_fields_win_over_config(tmp_path: Path):
    route = resolve(
        tmp_path,
        BOX,
        host="box",
        port=22,
        user="bob",
        identity_file="~/mine",
        known_hosts="~/kh",
        connect_timeout=3.0,
        keepalive=0,
    )
    home = str(tmp_path / "home")
    hop = route.target
    assert (hop.hostname, hop.port, hop.user) == ("10.1.2.3", 22, "bob")
    # The explicit key comes first and must exist; the config's keys are still offered.
    assert hop.identity_files == (f"{home}/mine", f"{home}/.ssh/box_key", "/keys/second")
    assert hop.identity_required == (f"{home}/mine",)
    assert hop.known_hosts_files == (f"{home}/kh",)
    assert hop.host_key_name == "10.1.2.3"
    assert route.keepalive == 0 and route.connect_timeout == 3.0


def test_defaults_without_config(tmp_path: Path):
    route = resolve(tmp_path, "", host="Plain.Example")
    home = str(tmp_path / "home")
    hop = route.target
    assert (hop.hostname, hop.port, hop.user) == ("Plain.Example", 22, "me")
    assert hop.look_for_keys and hop.identity_files == ()
    assert hop.known_hosts_files == (f"{home}/.ssh/known_hosts", f"{home}/.ssh/known_hosts2")
    assert hop.global_known_hosts_files == sc.GLOBAL_KNOWN_HOSTS
    assert hop.host_key_name == "plain.example"
    assert route.keepalive == 15 and route.connect_timeout == 15.0


def test_user_known_hosts_none_and_tokens(tmp_path: Path):
    cfg = "Host a\n  UserKnownHostsFile none\nHost b\n  UserKnownHostsFile %d/kh_%h_%p_%r\n  User u\n"
    assert resolve(tmp_path, cfg, host="a").target.known_hosts_files == ()
    home = str(tmp_path / "home")
    assert resolve(tmp_path, cfg, host="b").target.known_hosts_files == (f"{home}/kh_b_22_u",)


def test_proxy_jump_from_config_and_recursive_first_hop(tmp_path: Path):
    cfg = """\
Host target
  HostName 10.0.0.9
  ProxyJump gw2
Host gw2
  HostName gw2.internal
  User g2
  ProxyJump gw1
  IdentityFile ~/.ssh/gw2
Host gw1
  HostName gw1.example.org
  Port 2022
"""
    route = resolve(tmp_path, cfg, host="target", identity_file="/k/target")
    names = [(h.hostname, h.port, h.user) for h in route.hops]
    assert names == [("gw1.example.org", 2022, "me"), ("gw2.internal", 22, "g2"), ("10.0.0.9", 22, "me")]
    gw1, gw2, target = route.hops
    # A jump host with its own IdentityFile uses it; one without falls back to the explicit key.
    assert gw2.identity_files == (str(tmp_path / "home" / ".ssh" / "gw2"),)
    assert gw1.identity_files == ("/k/target",)
    assert target.identity_files == ("/k/target",)


def test_explicit_proxy_jump_overrides_and_none_disables(tmp_path: Path):
    cfg = "Host t\n  ProxyJump cfgjump\n  ProxyCommand nc %h %p\n"
    route = resolve(tmp_path, cfg, host="t", proxy_jump="x@j1:2,j2")
    assert [(h.hostname, h.user, h.port) for h in route.jumps] == [("j1", "x", 2), ("j2", "me", 22)]
    assert all(h.proxy_command is None for h in route.hops)
    direct = resolve(tmp_path, cfg, host="t", proxy_jump="none")
    assert direct.jumps == () and direct.target.proxy_command is None


def test_proxy_command_applies_to_first_hop_only(tmp_path: Path):
    cfg = "Host t\n  HostName 10.9.9.9\n  ProxyCommand ssh -W %h:%p bastion\n"
    route = resolve(tmp_path, cfg, host="t")
    assert route.target.proxy_command == "ssh -W 10.9.9.9:22 bastion"
    cfg2 = cfg + "Host j\n  ProxyCommand nc -X 5 %h %p\n"
    route2 = resolve(tmp_path, cfg2, host="t", proxy_jump="j")
    assert route2.jumps[0].proxy_command == "nc -X 5 j 22"
    assert route2.target.proxy_command is None


def test_jump_loop_is_an_error(tmp_path: Path):
    cfg = "Host a\n  ProxyJump b\nHost b\n  ProxyJump c\nHost c\n  ProxyJump b\n"
    with pytest.raises(SSHConfigError, match="loop"):
        resolve(tmp_path, cfg, host="a")


def test_self_referencing_proxy_jump_is_direct(tmp_path: Path):
    cfg = "Host *.site\n  ProxyJump login.site\n"
    assert resolve(tmp_path, cfg, host="login.site").jumps == ()
    route = resolve(tmp_path, cfg, host="node1.site")
    assert [h.name for h in route.hops] == ["login.site", "node1.site"]


def test_include_and_block_context(tmp_path: Path):
    home = tmp_path / "home"
    (home / ".ssh" / "conf.d").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "conf.d" / "10-box.conf").write_text("Host box\n  HostName 10.7.7.7\n")
    (home / ".ssh" / "conf.d" / "20-other.conf").write_text("Host other\n  Port 2\n")
    cfg = "Host box\n  Include conf.d/*.conf\n  User inbox\nHost *\n  Port 2200\n"
    route = resolve(tmp_path, cfg, host="box")
    # The lines after the Include still belong to "Host box".
    assert (route.target.hostname, route.target.user, route.target.port) == ("10.7.7.7", "inbox", 2200)
    assert resolve(tmp_path, cfg, host="zzz").target.user == "me"


def test_include_at_top_level_with_home(tmp_path: Path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / "extra.conf").write_text("Host hpc\n  User researcher\n")
    route = resolve(tmp_path, "Include ~/extra.conf\nHost *\n  Port 2022\n", host="hpc")
    assert (route.target.user, route.target.port) == ("researcher", 2022)


def test_identities_only_and_host_key_alias(tmp_path: Path):
    cfg = "Host h\n  IdentitiesOnly yes\n  HostKeyAlias MyAlias\n  Port 2222\n"
    hop = resolve(tmp_path, cfg, host="h").target
    assert hop.identities_only
    assert hop.host_key_name == "myalias"


def test_default_user_config_and_system_config(tmp_path: Path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "config").write_text("Host h\n  User fromuser\n")
    system = tmp_path / "system_config"
    system.write_text("Host *\n  User fromsystem\n  Port 2020\n")
    route = sc.resolve_route(
        SSHTarget(host="h"), home=str(home), local_user="me", system_config=str(system)
    )
    assert (route.target.user, route.target.port) == ("fromuser", 2020)


def test_config_errors(tmp_path: Path):
    with pytest.raises(SSHConfigError, match="does not exist"):
        sc.resolve_route(SSHTarget(host="h", ssh_config=str(tmp_path / "nope")), system_config=None)
    with pytest.raises(SSHConfigError, match="not a number"):
        resolve(tmp_path, "Host h\n  Port twenty\n", host="h")
    with pytest.raises(SSHConfigError):
        resolve(tmp_path, "", host="  ")


# --- known_hosts -------------------------------------------------------------------------------


def hashed(name: str, salt: bytes = b"s" * 20) -> str:
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def entries(tmp_path: Path, text: str) -> list[sc.KnownHostEntry]:
    path = tmp_path / "known_hosts"
    path.write_text(text)
    return sc.load_known_hosts([str(path), str(tmp_path / "missing")])


def test_plain_and_bracketed_entries(tmp_path: Path):
    kh = entries(tmp_path, f"# c\n\nhost.a,10.0.0.1 ssh-ed25519 {ED_A}\n[10.0.0.1]:2222 ssh-ed25519 {ED_B}\n")
    assert sc.check_host_key(kh, "host.a", blob(ED_A)).status == "ok"
    assert sc.check_host_key(kh, "HOST.A", blob(ED_A)).status == "ok"
    assert sc.check_host_key(kh, "10.0.0.1", blob(ED_A)).status == "ok"
    assert sc.check_host_key(kh, "[10.0.0.1]:2222", blob(ED_B)).status == "ok"
    changed = sc.check_host_key(kh, "[10.0.0.1]:2222", blob(ED_A))
    assert changed.status == "changed" and changed.entry is not None and changed.entry.lineno == 4
    assert sc.check_host_key(kh, "[10.0.0.1]:2223", blob(ED_B)).status == "unknown"


def test_hashed_entries(tmp_path: Path):
    kh = entries(tmp_path, f"{hashed('[127.0.0.1]:2200')} ssh-ed25519 {ED_A}\n")
    assert sc.check_host_key(kh, "[127.0.0.1]:2200", blob(ED_A)).status == "ok"
    assert sc.check_host_key(kh, "[127.0.0.1]:2201", blob(ED_A)).status == "unknown"
    assert sc.check_host_key(kh, "[127.0.0.1]:2200", blob(ED_B)).status == "changed"


def test_hashing_matches_ssh_keygen(tmp_path: Path):
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        pytest.skip("ssh-keygen not installed")
    path = tmp_path / "known_hosts"
    path.write_text(f"[box.example]:2200 ssh-ed25519 {ED_A}\n")
    subprocess.run([keygen, "-H", "-f", str(path)], check=True, capture_output=True)
    assert "box.example" not in path.read_text()
    kh = sc.load_known_hosts([str(path)])
    assert sc.check_host_key(kh, "[box.example]:2200", blob(ED_A)).status == "ok"


def test_patterns_negation_and_markers(tmp_path: Path):
    kh = entries(
        tmp_path,
        f"*.corp,!bad.corp ssh-ed25519 {ED_A}\n"
        f"node?? ssh-ed25519 {ED_A}\n"
        f"@revoked * ssh-ed25519 {ED_B}\n"
        f"@cert-authority *.corp ssh-ed25519 {ED_B}\n"
        "garbage line\n"
        "h ssh-ed25519 !!!notbase64!!!\n",
    )
    assert len(kh) == 4
    assert sc.check_host_key(kh, "x.corp", blob(ED_A)).status == "ok"
    assert sc.check_host_key(kh, "bad.corp", blob(ED_A)).status == "unknown"
    assert sc.check_host_key(kh, "node12", blob(ED_A)).status == "ok"
    assert sc.check_host_key(kh, "node123", blob(ED_A)).status == "unknown"
    revoked = sc.check_host_key(kh, "x.corp", blob(ED_B))
    assert revoked.status == "revoked" and revoked.entry is not None and revoked.entry.lineno == 3
    # '[' is literal in patterns (not a character class).
    kh2 = entries(tmp_path, f"[h]:22* ssh-ed25519 {ED_A}\n")
    assert sc.check_host_key(kh2, "[h]:2200", blob(ED_A)).status == "ok"


def test_other_key_types_and_preference(tmp_path: Path):
    rsa = base64.b64encode(b"\x00\x00\x00\x07ssh-rsa" + b"\x00" * 8).decode()
    kh = entries(tmp_path, f"h ssh-rsa {rsa}\nh ssh-ed25519 {ED_B}\nother ssh-ed25519 {ED_A}\n")
    assert sc.known_key_types(kh, "h") == ["ssh-rsa", "ssh-ed25519"]
    v = sc.check_host_key([e for e in kh if e.key_type == "ssh-rsa"], "h", blob(ED_A))
    assert v.status == "unknown" and [e.key_type for e in v.other] == ["ssh-rsa"]


def test_fingerprint_matches_ssh_keygen(tmp_path: Path):
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        pytest.skip("ssh-keygen not installed")
    pub = tmp_path / "k.pub"
    pub.write_text(f"ssh-ed25519 {ED_A} c\n")
    out = subprocess.run([keygen, "-l", "-E", "sha256", "-f", str(pub)], capture_output=True, text=True)
    assert out.stdout.split()[1] == sc.fingerprint(blob(ED_A))


def test_keyscan_type():
    assert sc.keyscan_type("ssh-ed25519") == "ed25519"
    assert sc.keyscan_type("ecdsa-sha2-nistp256") == "ecdsa"
    assert sc.keyscan_type("ssh-rsa") == "rsa"


# --- host key error messages -------------------------------------------------------------------


def hop(tmp_path: Path, **kw: Any) -> Hop:
    fields: dict[str, Any] = {
        "name": "box",
        "hostname": "10.0.0.5",
        "port": 2200,
        "user": "u",
        "known_hosts_files": (str(tmp_path / "known_hosts"),),
        "global_known_hosts_files": (),
    }
    fields.update(kw)
    return Hop(**fields)


def test_unknown_key_message(tmp_path: Path):
    h = hop(tmp_path)
    with pytest.raises(HostKeyError) as info:
        verify_host_key(h, blob(ED_A), [], None)
    msg = str(info.value)
    assert isinstance(info.value, TransportError)
    assert sc.fingerprint(blob(ED_A)) in msg and "ssh-ed25519" in msg
    assert f"ssh-keyscan -t ed25519 -p 2200 10.0.0.5 >> {tmp_path / 'known_hosts'}" in msg
    assert not info.value.changed and info.value.port == 2200


def test_unknown_key_behind_jump_hint(tmp_path: Path):
    jump = hop(tmp_path, name="gw", hostname="gw.example", port=22, user="me")
    with pytest.raises(HostKeyError) as info:
        verify_host_key(hop(tmp_path), blob(ED_A), [], jump)
    assert "ssh me@gw.example 'ssh-keyscan -t ed25519 -p 2200 10.0.0.5' >> " in str(info.value)


def test_changed_key_message(tmp_path: Path):
    kh = entries(tmp_path, f"# first\n[10.0.0.5]:2200 ssh-ed25519 {ED_B}\n")
    with pytest.raises(HostKeyError) as info:
        verify_host_key(hop(tmp_path), blob(ED_A), kh, None)
    err = info.value
    msg = str(err)
    assert err.changed and err.line == 2 and err.file == str(tmp_path / "known_hosts")
    assert "HOST KEY CHANGED" in msg and "man-in-the-middle" in msg
    assert f"{tmp_path / 'known_hosts'} line 2" in msg
    assert sc.fingerprint(blob(ED_A)) in msg and sc.fingerprint(blob(ED_B)) in msg
    assert "ssh-keygen -R '[10.0.0.5]:2200'" in msg


def test_revoked_key_message(tmp_path: Path):
    kh = entries(tmp_path, f"@revoked * ssh-ed25519 {ED_A}\n[10.0.0.5]:2200 ssh-ed25519 {ED_A}\n")
    with pytest.raises(HostKeyError, match="revoked") as info:
        verify_host_key(hop(tmp_path), blob(ED_A), kh, None)
    assert info.value.revoked


# --- module hygiene ----------------------------------------------------------------------------


def test_importing_transport_does_not_import_paramiko():
    code = (
        "import sys, jupyter_tiers.transport.ssh, jupyter_tiers.transport.sshconfig;"
        "sys.exit(1 if 'paramiko' in sys.modules else 0)"
    )
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr or "paramiko was imported at module load"


def test_target_defaults_and_str():
    t = SSHTarget(host="h")
    assert (t.port, t.user, t.connect_timeout, t.keepalive) == (None, None, 15.0, 15)
    assert str(SSHTarget(host="h", user="u", port=2)) == "u@h:2"


def test_sshconfig_does_not_import_the_transport():
    """No import circle: the config resolver needs only the target's plain data."""
    code = (
        "import sys, jupyter_tiers.transport.sshconfig;"
        "sys.exit(1 if 'jupyter_tiers.transport.ssh' in sys.modules else 0)"
    )
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr or "sshconfig imported transport.ssh"
