"""Issue 30, the class's hub: the pure parts of jupyter_tiers/tools/sandbox/students.py (the students
file, with a seeded fuzz; passwords) and hub.py (the config file's text, the status lines, the
culler's timeout), and the ``sandbox`` command line's answers to bad hub and students input. No
cluster, hub or root needed."""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.tools.sandbox import hub, lab, students
from jupyter_tiers.tools.sandbox import main as sandbox_main

ALPHABET = string.ascii_letters + string.digits + "_-:#. \t\n\x00é';$`"


def test_students_file_names_passwords_comments() -> None:
    text = "# class of 2026\n\nalice\n  bob:s3cret-pass  \n_c3 :pw with spaces\n"
    assert students.parse_students(text) == [
        students.Student("alice"), students.Student("bob", "s3cret-pass"),
        students.Student("_c3", "pw with spaces")]


def test_students_file_refuses_with_the_line() -> None:
    with pytest.raises(lab.LabError, match=r"line 2: .*not a user name"):
        students.parse_students("alice\nBob\n")
    with pytest.raises(lab.LabError, match=r"line 3: alice is listed twice"):
        students.parse_students("alice\n#x\nalice\n")
    with pytest.raises(lab.LabError, match="line 1: alice's password must have 8 to 128"):
        students.parse_students("alice:short\n")
    with pytest.raises(lab.LabError, match="names no student"):
        students.parse_students("# nobody\n\n")
    with pytest.raises(lab.LabError, match=r"line 1: root is the lab's administrator"):
        students.parse_students("root\n")


def test_a_password_is_never_in_the_error() -> None:
    for bad in ("tiny", "has:colon-in-it", "tab\there-long", "y" * 200):
        try:
            students.parse_students(f"alice:{bad}\n")
        except lab.LabError as exc:
            assert bad not in str(exc)
        else:
            pytest.fail(f"{bad!r} was accepted")


def _model(text: str) -> list[tuple[str, str | None]] | None:
    """An independent statement of the students file: what it must give, or None for an error."""
    out: list[tuple[str, str | None]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, password = line.partition(":")
        name = name.strip()
        ok_name = (1 <= len(name) <= 32 and name != "root" and (name[0] == "_" or "a" <= name[0] <= "z")
                   and all(c in "_-" or "a" <= c <= "z" or "0" <= c <= "9" for c in name))
        if not ok_name or name in [n for n, _ in out]:
            return None
        if sep and not (8 <= len(password) <= 128 and password.isprintable() and ":" not in password
                        and password == password.strip()):
            return None
        out.append((name, password if sep else None))
    return out or None


def test_students_file_fuzz_matches_a_model() -> None:
    rng = random.Random(30)
    words = ["alice", "bob", "_c", "Dan", "e-1", "#", ":", "pass-word-1", " ", "root", "9x"]
    for _ in range(4000):
        lines = []
        for _ in range(rng.randint(0, 5)):
            parts = [rng.choice(words) if rng.random() < 0.7 else
                     "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12)))
                     for _ in range(rng.randint(1, 3))]
            lines.append(rng.choice(["", ":", " "]).join(parts))
        text = "\n".join(lines)
        want = _model(text)
        try:
            got = [(s.name, s.password) for s in students.parse_students(text)]
        except lab.LabError as exc:
            assert want is None, (text, want, str(exc))
            assert "\n" not in str(exc)
            continue
        assert got == want, text


def test_new_passwords_pass_the_check_and_differ() -> None:
    made = {students.new_password() for _ in range(50)}
    assert len(made) == 50
    for password in made:
        assert students.check_password(password) == password


def _settings(**kw: Any) -> hub.HubSettings:
    base: dict[str, Any] = {"venv": "/opt/class venv", "proxy": "/var/lib/p/chp", "port": 8123,
                            "hub_api_port": 40001, "proxy_api_port": 40002, "cull_timeout": 600,
                            "cull_every": 60, "state": "/var/lib/jt-hub"}
    return hub.HubSettings(**{**base, **kw})


def _load(text: str, tmp_path: Path) -> Any:
    """Run the config file as JupyterHub does (a traitlets Config), with the token file in place."""
    from traitlets.config import Config

    token = Path("/var/lib/jt-hub/status.token")
    c = Config()
    code = text.replace(repr(str(token)), repr(str(tmp_path / "status.token")))
    (tmp_path / "status.token").write_text("tok3n\n")
    exec(compile(code, "jupyterhub_config.py", "exec"), {"get_config": lambda: c})
    return c


def test_hub_config_is_what_the_class_needs(tmp_path: Path) -> None:
    c = _load(hub.hub_config(_settings()), tmp_path)
    assert c.JupyterHub.bind_url == "http://127.0.0.1:8123/"
    assert c.JupyterHub.hub_bind_url == "http://127.0.0.1:40001"
    assert c.ConfigurableHTTPProxy.api_url == "http://127.0.0.1:40002"
    assert c.ConfigurableHTTPProxy.command == ["/var/lib/p/chp"]
    assert c.JupyterHub.authenticator_class == "pam"
    assert c.PAMAuthenticator.allowed_groups == {"jtlab"}
    assert c.JupyterHub.spawner_class == "localprocess"
    assert c.Spawner.cmd == ["/opt/class venv/bin/jupyterhub-singleuser"]
    assert c.Spawner.environment["PATH"].startswith("/opt/class venv/bin:")
    culler, status = c.JupyterHub.services
    assert culler["command"] == ["/opt/class venv/bin/python", "-m", "jupyterhub_idle_culler",
                                 "--timeout=600", "--cull-every=60"]
    assert status == {"name": hub.STATUS_SERVICE, "api_token": "tok3n"}
    scopes = {r["name"]: set(r["scopes"]) for r in c.JupyterHub.load_roles}
    assert "delete:servers" in scopes["idle-culler"] and "delete:servers" not in scopes["jt-status"]
    assert "tok3n" not in hub.hub_config(_settings())


@pytest.mark.parametrize("venv", ["/opt/v'); import os; os.system('id') #", "/opt/v\nx = 1", "/opt/\\'"])
def test_hub_config_values_are_never_code(venv: str, tmp_path: Path) -> None:
    c = _load(hub.hub_config(_settings(venv=venv)), tmp_path)
    assert c.Spawner.cmd == [f"{venv}/bin/jupyterhub-singleuser"]
    assert c.JupyterHub.services[0]["command"][0] == f"{venv}/bin/python"


def test_culler_timeout_and_interval() -> None:
    assert hub.check_cull_timeout("600") == 600
    for bad in ("59", "abc", "", "604801", "1e3"):
        with pytest.raises(lab.LabError, match="--cull-timeout"):
            hub.check_cull_timeout(bad)
    assert hub.cull_every_for(600) == 60
    assert hub.cull_every_for(60) == 30
    assert hub.cull_every_for(7 * 86400) == 60


def test_status_lines() -> None:
    assert "not running" in hub.render_status(None, False, ["alice"], None)
    users = [
        {"name": "alice", "last_activity": "2026-12-06T05:00:00Z",
         "servers": {"": {"ready": True, "started": "2026-12-06T04:50:00Z",
                          "last_activity": "2026-12-06T05:01:00Z"}}},
        {"name": "bob", "last_activity": "2026-12-06T03:00:00Z", "servers": {}},
    ]
    text = hub.render_status("http://127.0.0.1:8000", True, ["alice", "bob", "carol"], users)
    lines = text.splitlines()
    assert lines[0] == "hub: running at http://127.0.0.1:8000/ (your students open this URL)"
    assert lines[1].split()[:2] == ["alice", "logged"] and "server ready" in lines[1]
    assert "2026-12-06T05:01:00Z" in lines[1]
    assert lines[2].split()[0] == "bob" and "no server" in lines[2]
    assert lines[3].split() == ["carol", "never", "logged", "in"]
    broken = hub.render_status("http://h:1", True, [], None, "refused")
    assert "cannot read the hub's users: refused" in broken and "no students yet" in broken


def test_installed_proxy_needs_the_pinned_version(tmp_path: Path) -> None:
    package = tmp_path / "node_modules" / hub.PROXY_PACKAGE
    package.mkdir(parents=True)
    (tmp_path / "node_modules" / ".bin").mkdir()
    (tmp_path / "node_modules" / ".bin" / hub.PROXY_PACKAGE).write_text("")
    for name in hub.PROXY_FILES:  # installed from this package's lockfile (test_hub_proxy_lock.py)
        (tmp_path / name).write_bytes((hub.PROXY_PROJECT / name).read_bytes())
    assert hub.installed_proxy(tmp_path) is None
    (package / "package.json").write_text('{"version": "0.0.1"}')
    assert hub.installed_proxy(tmp_path) is None
    (package / "package.json").write_text(f'{{"version": "{hub.PROXY_VERSION}"}}')
    assert hub.installed_proxy(tmp_path) == tmp_path / "node_modules" / ".bin" / hub.PROXY_PACKAGE


@pytest.mark.parametrize(("argv", "message"), [
    (["up", "--hub"], "--hub goes with --lab"),
    (["up", "--lab", "--hub", "--cull-timeout", "5"], "--cull-timeout must be 60 to 604800"),
    (["up", "--lab", "--hub", "--hub-port", "0"], "--hub-port must be 1 to 65535"),
    (["up", "--cull-timeout", "900"], "only go with 'up --lab --hub'"),
    (["status", "--hub"], "'status' shows the hub without --hub"),
    (["add-user", "a", "--hub"], "--hub, --hub-ip, --hub-port and --cull-timeout go with 'up'"),
    (["add-user", "a", "--students", "/x"], "or --students FILE, not both"),
    (["add-user"], "add-user needs a user name"),
    (["remove-user", "a", "--create"], "only go with 'add-user'"),
    (["up", "--students", "/x"], "only go with 'add-user'"),
    (["down", "--hub", "--nodes", "2"], "--nodes and --cpus only go with 'up'"),
])
def test_hub_command_line_usage_errors(argv: list[str], message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        sandbox_main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_students_file_answered_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "students.txt"
    path.write_text("alice\nBad;Name\n")
    assert sandbox_main(["add-user", "--students", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jupyter tiers sandbox add-user: students file line 2: "
                          "'Bad;Name' is not a user name")
    assert err.count("\n") == 1 and "Traceback" not in err
