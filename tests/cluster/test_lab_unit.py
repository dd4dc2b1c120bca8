"""Issue 11, teaching labs: the pure parts of jupyter_tiers/sandbox/lab.py (user names, public
keys, the authorized_keys line, /etc/shadow's lock mark, the shared profile) with seeded fuzz, and
the ``sandbox`` command line's answers to bad input. No cluster needed."""

from __future__ import annotations

import random
import re
import string
from pathlib import Path

import pytest

from jupyter_tiers.config import merge_layers, validate_profile
from jupyter_tiers.sandbox import lab
from jupyter_tiers.sandbox import main as sandbox_main

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


def test_others_can_run(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert lab.others_can_run(tool) is all(p.stat().st_mode & 0o001 for p in tool.resolve().parents)
    tool.chmod(0o750)
    assert not lab.others_can_run(tool)
    assert not lab.others_can_run(tmp_path / "missing")


@pytest.mark.parametrize(("argv", "message"), [
    (["add-user"], "add-user needs a user name"),
    (["remove-user"], "remove-user needs a user name"),
    (["status", "jt-student1"], "'status' takes no user name"),
    (["down", "--lab"], "--lab only goes with 'up'"),
    (["add-user", "jt-student1", "--nodes", "3"], "add-user takes only a user name"),
    (["add-user", "a", "b"], "unrecognized arguments"),
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


def test_lab_python_is_this_one_only_when_every_user_may_run_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import sys
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="jt-lab-python-", dir="/tmp"))
    try:
        top.chmod(0o755)
        base, venv = top / "base", top / "venv"
        lib = base / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        lib.mkdir(parents=True)
        (lib / "os.py").write_text("")
        (venv / "bin").mkdir(parents=True)
        exe = venv / "bin" / "python"
        exe.write_text("#!/bin/sh\n")
        for path in (top, base, base / "lib", lib, venv, venv / "bin", exe):
            path.chmod(0o755)
        monkeypatch.setattr(sys, "executable", str(exe))
        monkeypatch.setattr(sys, "prefix", str(venv))
        monkeypatch.setattr(sys, "base_prefix", str(base))
        assert lab.lab_python() == (str(exe), [f"source {venv}/bin/activate"], None)
        base.chmod(0o700)  # the interpreter's own library is private (a pyenv under /root)
        python, setup, note = lab.lab_python()
        assert (python, setup) == ("python3", []) and note and str(exe) in note
    finally:
        shutil.rmtree(top)
