"""Issue 11, teaching labs: the pure parts of jupyter_tiers/tools/sandbox/lab.py (user names, public
keys, the authorized_keys line, /etc/shadow's lock mark, the shared profile) with seeded fuzz, and
the ``sandbox`` command line's answers to bad input. No cluster needed."""

from __future__ import annotations

import os
import pwd
import random
import re
import shlex
import stat
import string
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import merge_layers, validate_profile
from jupyter_tiers.tools.sandbox import lab
from jupyter_tiers.tools.sandbox import main as sandbox_main

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILlZS68OuL63qra1t4XGjxe/VYrOz5dt41pwBGgYO4ta"
ENV = {"JT_SSH_HOST": "127.0.0.1", "JT_SSH_PORT": "2299",
       "JT_KNOWN_HOSTS": "/var/lib/jupyter-tiers-cluster/ssh/known_hosts"}
ALPHABET = string.ascii_letters + string.digits + "_-.@$;' \"`\\/\n\t\x00é~*!:"


def _name_model(name: str) -> bool:
    """An independent statement of the rule: useradd's default NAME_REGEX, 32 at most, not root."""
    if not 1 <= len(name) <= 32 or name == "root":
        return False
    first_ok = name[0] == "_" or "a" <= name[0] <= "z"
    return first_ok and all(c == "_" or c == "-" or "a" <= c <= "z" or "0" <= c <= "9" for c in name)


@pytest.mark.parametrize("name", ["jt-student1", "_svc", "a", "alice_b-2", "a" * 32])
def test_user_names_accepted(name: str) -> None:
    assert lab.check_user_name(name) == name


@pytest.mark.parametrize("name", ["", "Alice", "1abc", "-rf", "a b", "a;id", "../etc", "a" * 33,
                                  "bob$", "é", "root", None, 7])
def test_user_names_refused_shortly(name: object) -> None:
    with pytest.raises(lab.LabError) as err:
        lab.check_user_name(name)
    assert len(str(err.value)) < 200 and "\n" not in str(err.value)
    assert "root" in str(err.value) if name == "root" else "lower-case letters" in str(err.value)


def test_user_name_fuzz() -> None:
    rng = random.Random(1101)
    for _ in range(5000):
        name = "".join(rng.choice(ALPHABET if rng.random() < 0.3 else "abz09_-")
                       for _ in range(rng.randint(0, 36)))
        try:
            accepted = lab.check_user_name(name) == name
        except lab.LabError as exc:
            accepted = False
            assert len(str(exc)) < 200 and "\n" not in str(exc)
        assert accepted == _name_model(name), repr(name)


def test_public_key_parsed_and_line_is_one_line() -> None:
    assert lab.parse_public_key(KEY + " someone@host\n") == ("ssh-ed25519", KEY.split()[1])
    line = lab.authorized_line("jt-student1", lab.parse_public_key(KEY))
    assert line == f"no-agent-forwarding,no-X11-forwarding {KEY} jupyter-tiers-lab:jt-student1\n"


@pytest.mark.parametrize("text", ["", "\n", "garbage", "ssh-dss AAAAB3NzaC1kc3MAAACBAP", KEY + "\n" + KEY,
                                  'command="sh" ' + KEY, "ssh-ed25519 short"])
def test_public_key_refused(text: str) -> None:
    with pytest.raises(lab.LabError, match="one public key"):
        lab.parse_public_key(text)


def test_public_key_fuzz_never_lets_a_second_line_or_option_through() -> None:
    rng = random.Random(1102)
    for _ in range(3000):
        chars = list(KEY + " comment")
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(chars) + 1)
            if rng.random() < 0.5 and chars:
                chars[min(pos, len(chars) - 1)] = rng.choice(ALPHABET)
            else:
                chars.insert(pos, rng.choice(ALPHABET))
        text = "".join(chars)
        try:
            kind, blob = lab.parse_public_key(text)
        except lab.LabError:
            continue
        line = lab.authorized_line("jt-student1", (kind, blob))
        assert line.count("\n") == 1 and line.endswith("\n")
        assert re.fullmatch(r"no-agent-forwarding,no-X11-forwarding [a-z0-9-]+ [A-Za-z0-9+/]+=* "
                            r"jupyter-tiers-lab:jt-student1\n", line), repr(text)
        assert text.strip().startswith(f"{kind} {blob}")


def test_shadow_lock_mark() -> None:
    shadow = "root:*:1::::::\njt-a:!:20790:0:99999:7:::\njt-b:*:20790::::::\njt-c:$y$j9T$x:1::::::\n"
    assert [lab.shadow_locked(shadow, n) for n in ("jt-a", "jt-b", "jt-c", "nobody")] == [
        True, False, False, False]
    assert lab.shadow_locked("jt-a:!$y$hash:1::::::", "jt-a")  # usermod -L keeps the hash after '!'


def test_shadow_fuzz_matches_a_model() -> None:
    rng = random.Random(1103)
    names = ["jt-a", "jt-b", "x"]
    for _ in range(2000):
        rows = []
        for _ in range(rng.randint(0, 5)):
            name = rng.choice([*names, "jt-a:", ""])
            field = rng.choice(["!", "*", "", "!!", "$y$h", "!$y$h", ":"])
            rows.append(f"{name}:{field}:1::::::" if rng.random() < 0.9 else name)
        text = "\n".join(rows)
        for name in names:
            first = next((r.split(":") for r in text.splitlines()
                          if len(r.split(":")) > 1 and r.split(":")[0] == name), None)
            assert lab.shadow_locked(text, name) == bool(first and first[1].startswith("!")), text


def test_lab_profile_is_a_valid_profile_without_user() -> None:
    profile = lab.lab_profile(ENV, "python3")
    checked = validate_profile("sandbox", profile, "/etc/jupyter/tiers.yaml")
    assert "user" not in checked and checked["identity_file"] == "~/.ssh/jupyter_tiers_lab"
    assert "setup" not in profile
    with_venv = lab.lab_profile(ENV, "/opt/lab/bin/python", ["source /opt/lab/bin/activate"])
    config = merge_layers([("/etc/jupyter/tiers.yaml", {"profiles": {"sandbox": validate_profile(
        "sandbox", with_venv, "/etc/jupyter/tiers.yaml")}})])
    assert config.profile("sandbox").get("port") == 2299


def test_lab_profile_keeps_what_an_admin_set_and_renews_what_the_sandbox_owns() -> None:
    """add-user writes the lab profile again for every student: an admin's ``status_interval`` and
    changed defaults stay; the way in (host, key, user) and the jobs' Python are the sandbox's."""
    admin = {**lab.lab_profile(ENV, "/opt/old/bin/python", ["source /opt/old/bin/activate"]),
             "status_interval": 30, "user": "root", "host": "elsewhere"}
    admin["defaults"] = {**admin["defaults"], "time": "01:00:00", "mem": "2G"}
    again = lab.lab_profile(ENV, "python3", old=admin)
    assert again["status_interval"] == 30
    assert again["defaults"] == {"partition": "debug", "time": "01:00:00", "mem": "2G", "python": "python3"}
    assert "user" not in again and "setup" not in again  # the old venv's setup went with its python
    assert again["host"] == lab.lab_profile(ENV, "python3")["host"]
    validate_profile("sandbox", again, "/etc/jupyter/tiers.yaml")
    for junk in (None, "text", [1], {"defaults": "not a mapping"}):
        assert lab.lab_profile(ENV, "python3", old=junk)["defaults"]["python"] == "python3"


@pytest.mark.parametrize(("argv", "message"), [
    (["add-user"], "add-user needs a user name"),
    (["remove-user"], "remove-user needs a user name"),
    (["status", "jt-student1"], "'status' takes no user name"),
    (["down", "--lab"], "--lab only goes with 'up'"),
    (["add-user", "jt-student1", "--nodes", "3"], "add-user takes only a user name"),
    (["add-user", "a", "b"], "unrecognized arguments"),
    (["remove-user", "a", "--allow-shared-group"], "--allow-shared-group only goes with 'add-user'"),
    (["up", "--allow-shared-group"], "--allow-shared-group only goes with 'add-user'"),
])
def test_sandbox_command_line_usage_errors(argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        sandbox_main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_user_name_answered_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert sandbox_main(["remove-user", "Bad;Name"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jupyter tiers sandbox remove-user: 'Bad;Name' is not a user name")
    assert err.count("\n") == 1 and "Traceback" not in err


# --- issue 20, item 12: what the shared profile may name, and shared primary groups ----------

def tree_lstat(top: Path) -> Callable[[str], os.stat_result]:
    """os.lstat, except that the directories above ``top`` (/tmp is 1777) look as /usr does:
    root's, 0755. ``top`` and everything below it are checked as they are."""
    above = set(top.parents)

    def lstat(path: str) -> os.stat_result:
        info = os.lstat(path)
        if Path(path) in above:
            fields = list(info)
            fields[0], fields[4], fields[5] = stat.S_IFDIR | 0o755, 0, 0
            return os.stat_result(fields)
        return info
    return lstat


def _file(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A tree of good and bad places for an interpreter (root's unless said otherwise)."""
    top = tmp_path / "top"
    for d in ("bin", "lib", "open", "grp", "private", "sticky", "theirdir"):
        (top / d).mkdir(parents=True)
    _file(top / "bin" / "python")
    _file(top / "open" / "python")
    _file(top / "grp" / "python")
    _file(top / "private" / "python")
    _file(top / "sticky" / "python")
    _file(top / "theirdir" / "python")
    _file(top / "notexec", 0o644)
    _file(top / "groupw", 0o775)
    _file(top / "theirs")
    (top / "bin" / "link").symlink_to("python")
    (top / "bin" / "rel").symlink_to("../bin/./python")
    (top / "bin" / "abs").symlink_to(top / "bin" / "python")
    (top / "tolink").symlink_to("open/python")
    (top / "theirlink").symlink_to("bin/python")
    (top / "loop1").symlink_to("loop2")
    (top / "loop2").symlink_to("loop1")
    (top / "dangling").symlink_to("nothing")
    for path, mode in ((top, 0o755), (top / "bin", 0o755), (top / "lib", 0o755), (top / "open", 0o757),
                       (top / "grp", 0o775), (top / "private", 0o750), (top / "sticky", 0o1777),
                       (top / "theirdir", 0o755)):
        path.chmod(mode)
    if os.geteuid() == 0:
        os.chown(top / "theirs", 65534, 65534)
        os.chown(top / "theirdir", 65534, 65534)
        os.lchown(top / "theirlink", 65534, 65534)
    return top


@pytest.mark.parametrize(("where", "want", "problem"), [
    ("bin/python", "exec", None),
    ("bin/link", "exec", None),
    ("bin/rel", "exec", None),
    ("bin/abs", "exec", None),
    ("bin/../bin/python", "exec", None),
    ("lib", "dir", None),
    ("notexec", "read", None),
    ("open/python", "exec", "{top}/open is writable by its group or others (mode 0757)"),
    ("grp/python", "exec", "{top}/grp is writable by its group or others (mode 0775)"),
    ("sticky/python", "exec", "{top}/sticky is writable by its group or others (mode 1777)"),
    ("groupw", "exec", "{top}/groupw is writable by its group or others (mode 0775)"),
    ("tolink", "exec", "{top}/open is writable by its group or others (mode 0757)"),
    ("private/python", "exec", "other users cannot enter {top}/private (mode 0750)"),
    ("notexec", "exec", "other users cannot run {top}/notexec (mode 0644)"),
    ("theirs", "exec", "{top}/theirs belongs to uid 65534, not root"),
    ("theirdir/python", "exec", "{top}/theirdir belongs to uid 65534, not root"),
    ("theirlink", "exec", "{top}/theirlink belongs to uid 65534, not root"),
    ("loop1", "exec", "{top}/loop1: more than 40 symbolic links (a loop?)"),
    ("dangling", "exec", "{top}/nothing: No such file or directory"),
    ("missing/python", "exec", "{top}/missing: No such file or directory"),
    ("bin/python/x", "exec", "{top}/bin/python is not a directory"),
    ("bin", "exec", "{top}/bin is not a regular file"),
    ("bin/python", "dir", "{top}/bin/python is not a directory"),
])
def test_trusted_path_problem(tree: Path, where: str, want: str, problem: str | None) -> None:
    if "uid 65534" in (problem or "") and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    found = lab.trusted_path_problem(f"{tree}/{where}", want, lstat=tree_lstat(tree))
    assert found == (problem.format(top=tree) if problem else None)


def test_trusted_path_problem_from_the_real_root(tree: Path) -> None:
    assert "is not an absolute path" in (lab.trusted_path_problem("bin/python") or "")
    # Without the stand-in, the temporary tree's real parents count: /tmp is 1777.
    assert "is writable by its group or others (mode 1777)" in (
        lab.trusted_path_problem(tree / "bin" / "python") or "")
    with pytest.raises(ValueError):
        lab.trusted_path_problem("/bin/sh", "write")


def _fake_python(top: Path, venv_name: str = "venv") -> tuple[Path, Path]:
    """A base Python and a venv over it, laid out as lab_python_paths expects."""
    base, venv = top / "base", top / venv_name
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    _file(base / "lib" / version / "os.py", 0o644)
    (venv / "lib" / version / "site-packages").mkdir(parents=True)
    _file(venv / "pyvenv.cfg", 0o644)
    _file(venv / "bin" / "activate", 0o644)
    _file(venv / "bin" / "python")
    for path in (top, base, base / "lib", venv, venv / "lib", venv / "lib" / version,
                 venv / "lib" / version / "site-packages", venv / "bin"):
        path.chmod(0o755)
    return base, venv


@pytest.mark.parametrize("venv_name", ["venv", "v+1.0_x-y"])
def test_lab_python_is_this_one_only_when_every_path_is_roots_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, venv_name: str) -> None:
    top = tmp_path / "top"
    base, venv = _fake_python(top, venv_name)
    exe = venv / "bin" / "python"
    monkeypatch.setattr(sys, "executable", str(exe))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", str(base))
    lstat = tree_lstat(top)

    def check(path: Path, want: str) -> str | None:
        return lab.trusted_path_problem(path, want, lstat=lstat)

    python, setup, note = lab.lab_python(check)
    assert (python, note) == (str(exe), None)
    assert setup == [f"source {shlex.quote(str(venv / 'bin' / 'activate'))}"]
    assert shlex.split(setup[0]) == ["source", str(venv / "bin" / "activate")]
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for weak, mode in ((base, 0o700), (venv / "bin" / "activate", 0o664),
                       (venv / "lib" / version / "site-packages", 0o777), (venv / "pyvenv.cfg", 0o666)):
        old = stat.S_IMODE(weak.stat().st_mode)
        weak.chmod(mode)
        python, setup, note = lab.lab_python(check)
        assert (python, setup) == ("python3", []), weak
        assert note and str(exe) in note and str(weak) in note
        weak.chmod(old)
    assert lab.lab_python(check)[0] == str(exe)


@pytest.mark.parametrize("venv_name", ["my venv", "v$(touch x);'", "v`id`"])
def test_lab_python_refuses_a_path_a_job_would_refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      venv_name: str) -> None:
    top = tmp_path / "top"
    base, venv = _fake_python(top, venv_name)
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", str(base))
    python, setup, note = lab.lab_python(lambda path, want: None)
    assert (python, setup) == ("python3", []) and note and "without spaces" in note


@pytest.mark.parametrize("prefix", ["/opt/venv", "/opt/my venv", "/opt/v$(touch x);'", "/opt/v`id`\nx"])
def test_the_venv_setup_line_is_one_quoted_word(prefix: str) -> None:
    (line,) = lab.venv_setup(prefix)
    assert shlex.split(line) == ["source", f"{prefix}/bin/activate"]
    assert line == f"source {shlex.quote(prefix + '/bin/activate')}"


def test_group_sharers() -> None:
    users = [("root", 0, 0), ("alice", 1001, 1001), ("bob", 1002, 100), ("carol", 1003, 100),
             ("dave", 1004, 1004), ("toor", 0, 100)]
    assert lab.group_sharers("alice", 1001, users, []) == []
    assert lab.group_sharers("bob", 100, users, []) == ["carol"]  # root (and uid 0) can read anyway
    assert lab.group_sharers("alice", 1001, users, ["dave", "alice", "root"]) == ["dave"]
    assert lab.group_sharers("bob", 100, users, ["carol", "erin"]) == ["carol", "erin"]
    assert lab.group_sharers("bob", 100, iter(users), iter(["erin"])) == ["carol", "erin"]  # read once


def test_add_user_refuses_a_shared_primary_group_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    pw = pwd.struct_passwd(("jt-shared", "x", 1501, 100, "", "/home/jt-shared", "/bin/bash"))
    monkeypatch.setattr(lab, "_require_root", lambda what: None)
    monkeypatch.setattr(lab, "lookup_user", lambda name: pw)
    monkeypatch.setattr(lab, "_check_unlocked", lambda name: None)
    monkeypatch.setattr(lab, "shared_group_problem",
                        lambda p: f"{p.pw_name}'s primary group users (gid 100) is shared with bob")

    def no_cluster() -> lab.Cluster:
        raise lab.LabError("past the group check")

    monkeypatch.setattr(lab, "load_cluster", no_cluster)
    said: list[str] = []
    with pytest.raises(lab.LabError) as err:
        lab.add_user("jt-shared", say=said.append)
    assert str(err.value).startswith("jt-shared's primary group users (gid 100) is shared with bob; give "
                                     "jt-shared a group of their own")
    assert "--allow-shared-group" in str(err.value) and said == []
    with pytest.raises(lab.LabError, match="past the group check"):
        lab.add_user("jt-shared", say=said.append, allow_shared_group=True)
    assert said == ["jt-shared: warning: jt-shared's primary group users (gid 100) is shared with bob "
                    "(--allow-shared-group)"]


def test_shared_group_problem_reads_this_machines_users() -> None:
    other = next((u for u in pwd.getpwall() if u.pw_uid != 0), None)
    if other is None:
        pytest.skip("no non-root user on this machine")
    fake = pwd.struct_passwd(("jt-not-a-user", "x", 1599, other.pw_gid, "", "/nonexistent", "/bin/false"))
    problem = lab.shared_group_problem(fake)
    assert problem is not None and f"(gid {other.pw_gid}) is shared with " in problem
    assert other.pw_name in problem or "more" in problem
    assert problem.endswith("who could read jt-not-a-user's checkpoints (they are group-readable by design)")
    alone = pwd.struct_passwd(("jt-not-a-user", "x", 1599, 4_000_000_001, "", "/nonexistent", "/bin/false"))
    assert lab.shared_group_problem(alone) is None  # an unknown gid nobody else has


def test_the_admins_own_sandbox_profile_quotes_its_source_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_tiers.tools.sandbox import sandbox_profile

    monkeypatch.setattr(sys, "prefix", "/opt/my venv")
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    env = {**ENV, "JT_SSH_USER": "root", "JT_SSH_KEY": "/var/lib/jupyter-tiers-cluster/ssh/id"}
    assert sandbox_profile(env)["setup"] == ["source '/opt/my venv/bin/activate'"]


def test_lab_serve_profile_maps_each_students_home_and_keeps_the_others() -> None:
    first = lab.lab_serve_profile(["/home/jt-a"])
    checked = validate_profile(lab.LAB_SERVE_PROFILE, first, "/etc/jupyter/tiers.yaml")
    assert checked["tier"] == "local" and checked["path_map"] == {"/home/jt-a": "/home/jt-a"}
    both = lab.lab_serve_profile(["/home/jt-b"], first)
    assert both["path_map"] == {"/home/jt-a": "/home/jt-a", "/home/jt-b": "/home/jt-b"}
    assert lab.lab_serve_profile(["/home/jt-b"], both) == both  # idempotent: add-user twice
    from jupyter_tiers.data.handoff import map_path, parse_path_map

    pairs = parse_path_map(both["path_map"])
    assert map_path("/home/jt-b/jupyter-tiers/7-fit/checkpoints/step-00010.json", pairs) == \
        "/home/jt-b/jupyter-tiers/7-fit/checkpoints/step-00010.json"
    assert map_path("/home/jt-c/jupyter-tiers/x", pairs) is None
