"""Issue 36, finding 5: ``sandbox add-user --students FILE --create`` takes over no account that is
not a student's. The roster is judged whole (students.plan_students, pure over a view of the passwd
and group databases) before any password is set; the add-user run itself is checked with every
system call injected (no useradd, chpasswd or cluster)."""

from __future__ import annotations

import grp
import pwd
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.tools.sandbox import lab, students
from jupyter_tiers.tools.sandbox import main as sandbox_main
from jupyter_tiers.tools.sandbox.students import Student

# (name, uid, gid, shell); every user has a group of their own named after them, but where noted.
USERS = [
    ("root", 0, 0, "/bin/bash"),
    ("daemon", 1, 1, "/usr/sbin/nologin"),
    ("postgres", 108, 118, "/bin/bash"),
    ("toor", 0, 0, "/bin/bash"),
    ("alice", 1001, 1001, "/bin/bash"),   # in the lab already
    ("bob", 1002, 1002, "/bin/bash"),     # a person's account, not a student yet
    ("carol", 1003, 1003, "/bin/bash"),   # in sudo
    ("dave", 1004, 10, "/bin/bash"),      # primary group wheel
    ("svc", 1005, 1005, "/usr/sbin/nologin"),
    ("nope", 1006, 1006, "/bin/false"),
    ("erin", 1007, 100, "/bin/bash"),     # primary group users, shared with frank
    ("frank", 1008, 100, "/bin/bash"),
]
GROUPS = {"root": (0, ()), "sudo": (27, ("carol",)), "adm": (4, ()), "wheel": (10, ()),
          "users": (100, ()), students.STUDENTS_GROUP: (990, ("alice", "erin")),
          **{name: (uid, ()) for name, uid, gid, _ in USERS if uid == gid and uid >= 1000},
          "postgres": (118, ())}


def accounts(uid_min: int = 1000) -> students.Accounts:
    users = {n: students.Account(n, uid, gid, shell) for n, uid, gid, shell in USERS}
    return students.Accounts(users, GROUPS, uid_min)


def plan(names: list[str], **kw: Any) -> list[tuple[str, bool]]:
    steps = students.plan_students([Student(n) for n in names], accounts(), **kw)
    return [(s.student.name, s.create) for s in steps]


def refused(names: list[str], **kw: Any) -> str:
    with pytest.raises(lab.LabError) as exc:
        students.plan_students([Student(n) for n in names], accounts(), **kw)
    return str(exc.value)


def test_create_makes_new_accounts_and_keeps_the_labs_own_students() -> None:
    assert plan(["newbie", "alice"], create=True) == [("newbie", True), ("alice", False)]


@pytest.mark.parametrize(("name", "why"), [
    ("postgres", "is a system account (uid 108, below UID_MIN 1000"),
    ("daemon", "is a system account (uid 1,"),
    ("toor", "has uid 0 (root)"),
    ("carol", "is in the administrators' group sudo"),
    ("dave", "is in the administrators' group wheel"),
    ("svc", "has the login shell /usr/sbin/nologin"),
    ("nope", "has the login shell /bin/false"),
])
def test_never_an_account_that_is_not_a_persons(name: str, why: str) -> None:
    """Not with --existing, not without --create: these are refused whatever the flags."""
    for kw in ({"create": True, "existing": [name]}, {"create": False}):
        message = refused([name], **kw)
        assert message.startswith(f"{name}: an existing account that {why}"), message
        assert "give the student another login name" in message and "nothing was changed" in message


def test_an_existing_person_needs_existing_with_create() -> None:
    message = refused(["bob"], create=True)
    assert message.startswith("bob: an existing account, not yet this lab's student (not in group jtlab)")
    assert "add --existing bob" in message and "\n" not in message
    assert plan(["bob"], create=True, existing=["bob"]) == [("bob", False)]
    assert plan(["bob"], create=False) == [("bob", False)]  # add-user bob: the admin named it


def test_every_refusal_is_named_at_once() -> None:
    message = refused(["newbie", "postgres", "bob", "svc", "alice"], create=True)
    lines = message.splitlines()
    assert lines[0] == "3 students refused, nothing was changed:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == ["postgres", "bob", "svc"]


def test_existing_must_name_a_listed_existing_account() -> None:
    assert refused(["newbie"], create=True, existing=["bob"]).startswith(
        "--existing bob: bob is not among the students to add")
    assert "drop --existing ghost" in refused(["ghost"], create=True, existing=["ghost"])
    assert "add --create" in refused(["ghost"], create=False)


def test_uid_min_comes_from_login_defs() -> None:
    assert students.parse_uid_min("# UID_MIN 5\nUID_MIN\t\t 2000\n") == 2000
    assert students.parse_uid_min("UID_MIN lots\n") == students.DEFAULT_UID_MIN
    assert students.parse_uid_min("") == 1000
    bob = students.Account("bob", 1002, 1002)
    assert "below UID_MIN 2000" in (students.not_a_person(bob, accounts(uid_min=2000)) or "")


def test_a_shared_primary_group_is_refused_before_anything() -> None:
    assert "shared with frank" in refused(["erin"], create=True)
    assert plan(["erin"], create=True, allow_shared_group=True) == [("erin", False)]


# --- the add-user run, its system calls injected ----------------------------------------------

@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """This machine as USERS/GROUPS say (homes in tmp_path), every command recorded, not run."""
    calls: list[Any] = []

    def entry(name: str, uid: int, gid: int, shell: str) -> pwd.struct_passwd:
        home = tmp_path / name
        home.mkdir(exist_ok=True)
        return pwd.struct_passwd((name, "x", uid, gid, "", str(home), shell))

    entries = {n: entry(n, uid, gid, shell) for n, uid, gid, shell in USERS}

    def getpwnam(name: str) -> pwd.struct_passwd:
        return entries[name]

    def getgrnam(name: str) -> grp.struct_group:
        gid, members = GROUPS[name]
        return grp.struct_group((name, "x", gid, list(members)))

    monkeypatch.setattr(pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(pwd, "getpwall", lambda: list(entries.values()))
    monkeypatch.setattr(grp, "getgrnam", getgrnam)
    monkeypatch.setattr(grp, "getgrall", lambda: [getgrnam(n) for n in GROUPS])
    defs = tmp_path / "login.defs"
    defs.write_text("UID_MIN 1000\n")
    monkeypatch.setattr(students, "LOGIN_DEFS", defs, raising=False)
    monkeypatch.setattr(students, "_tool", lambda name: name)
    monkeypatch.setattr(students, "_call", lambda argv, stdin=None: calls.append((argv, stdin)))
    monkeypatch.setattr(lab, "_require_root", lambda what: None)
    monkeypatch.setattr(lab, "add_user", lambda name, say, **kw: calls.append(("lab", name)))
    monkeypatch.setattr(students, "close_home", lambda pw: "closed")
    return calls


def test_a_roster_naming_postgres_changes_nothing(machine: list[Any]) -> None:
    """The finding: postgres's password was reset and it was made a student (its JupyterLab
    would run as postgres); now the roster is refused and no command runs."""
    roster = [Student("alice", "Alice-pass-1"), Student("postgres", "Secret-pass-1")]
    with pytest.raises(lab.LabError, match=r"^postgres: an existing account that is a system account"):
        students.add_students(roster, create=True, say=lambda line: None)
    assert machine == []  # no chpasswd (not even alice's, listed first), no useradd, no lab


def test_a_good_roster_still_goes_through(machine: list[Any]) -> None:
    said: list[str] = []
    students.add_students([Student("alice", "Alice-pass-1"), Student("bob", "Bob-pass-12")],
                          create=True, existing=["bob"], say=said.append)
    commands = [c[0][0] if isinstance(c[0], list) else c[0] for c in machine]
    assert commands == ["chpasswd", "lab", "chpasswd", "lab", "usermod"]  # alice is in jtlab already
    assert machine[0][1] == "alice:Alice-pass-1\n"


def test_command_line_existing_goes_with_create(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        sandbox_main(["add-user", "bob", "--existing", "bob"])
    assert exit_.value.code == 2 and "--existing goes with --create" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sandbox_main(["remove-user", "bob", "--existing", "bob"])
    assert "only go with 'add-user'" in capsys.readouterr().err
