"""A class's students for ``jupyter tiers sandbox add-user``: a students file, initial passwords.

``sandbox add-user --students FILE`` reads one student a line (:func:`parse_students`): a login
name, optionally ``:`` and an initial password (``chpasswd``'s format), ``#`` comments and blank
lines ignored. A student without a Unix user gets one (``useradd -m -U``, a group of their own,
so nobody shares their primary group); a student the file gives a password, or any student with
``--initial-password`` whose file line gives none, gets that password (a generated one is
printed once, for the admin to hand out). The hub's PAM login checks these passwords.

Every student's home is made 0700 (:func:`close_home`): classmates cannot read each other's
notebooks, keys or job directories.

Whose account may become a student (:func:`plan_students`, pure over a view of the passwd and
group databases, :class:`Accounts`): the whole roster is judged before anything changes, and one
refusal stops it all. With ``--create`` a missing user is made; an existing account is taken only
when it already is this lab's student (in :data:`STUDENTS_GROUP`) or the admin names it with
``--existing NAME`` (without ``--create``, every listed name is taken to be an existing account the
admin means). Never an account that is not a person's: uid 0, a uid below ``UID_MIN``
(/etc/login.defs), a member of an administrators' group (:data:`ADMIN_GROUPS`), or a shell that
refuses logins (``nologin``, ``false``): otherwise a roster line ``postgres`` would reset the
database's password and run a JupyterLab as it.
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import shutil
import stat
import subprocess
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from . import lab  # its functions looked up at call time (tests patch lab.*)
from .lab import LabError, check_user_name, group_sharers

STUDENTS_GROUP = "jtlab"  # the hub lets in members of this Unix group only (hub.py)
MAX_STUDENTS = 1000
MAX_PASSWORD = 128
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"
#: Groups whose members administer the machine (Debian's sudo and adm, Red Hat's wheel, Ubuntu's
#: old admin): never a student's account.
ADMIN_GROUPS = ("sudo", "adm", "wheel", "admin")
#: Login shells that refuse a login: a service account's, never a student's.
NO_LOGIN_SHELLS = ("nologin", "false")
LOGIN_DEFS = Path("/etc/login.defs")
DEFAULT_UID_MIN = 1000  # useradd's, when login.defs does not say


@dataclass(frozen=True)
class Student:
    """One line of a students file: a login name and, if given, an initial password."""

    name: str
    password: str | None = None


def check_password(password: str, where: str = "the password") -> str:
    """``password`` if PAM and ``chpasswd`` can take it: 8 to 128 printable characters, no
    spaces at either end, no ``:``; else a LabError naming ``where`` (never the password)."""
    if not 8 <= len(password) <= MAX_PASSWORD:
        raise LabError(f"{where} must have 8 to {MAX_PASSWORD} characters (it has {len(password)})")
    if not password.isprintable() or ":" in password or password != password.strip():
        raise LabError(f"{where} may hold printable characters only, no ':' and no spaces at "
                       "either end")
    return password


def parse_students(text: str) -> list[Student]:
    """The students of a students file (see the module docstring), in file order; a LabError
    naming the line for a bad name or password, a repeated name or more than MAX_STUDENTS."""
    students: list[Student] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, password = line.partition(":")
        try:
            check_user_name(name.strip())
        except LabError as exc:
            raise LabError(f"students file line {number}: {exc}") from None
        name = name.strip()
        if name in seen:
            raise LabError(f"students file line {number}: {name} is listed twice")
        if sep:
            check_password(password, f"students file line {number}: {name}'s password")
        seen.add(name)
        students.append(Student(name, password if sep else None))
        if len(students) > MAX_STUDENTS:
            raise LabError(f"students file: more than {MAX_STUDENTS} students")
    if not students:
        raise LabError("the students file names no student (one login name a line, "
                       "optionally NAME:PASSWORD; '#' starts a comment)")
    return students


def new_password() -> str:
    """A fresh initial password: 12 characters from a set without look-alikes (no 0/O, 1/l/I)."""
    alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    return "".join(secrets.choice(alphabet) for _ in range(12))


def read_students(path: Path) -> list[Student]:
    """:func:`parse_students` of the file at ``path`` (root's: passwords are in it)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"cannot read the students file {path}: {exc}") from None
    return parse_students(text)


# --- whose account may become a student (pure) ------------------------------------------------

@dataclass(frozen=True)
class Account:
    """One passwd entry, as far as the roster's checks need it."""

    name: str
    uid: int
    gid: int
    shell: str = "/bin/bash"


@dataclass(frozen=True)
class Accounts:
    """A view of the passwd and group databases: the users, the groups (name -> gid and listed
    members) and ``UID_MIN``, the first uid of a person's account."""

    users: Mapping[str, Account]
    groups: Mapping[str, tuple[int, tuple[str, ...]]]
    uid_min: int = DEFAULT_UID_MIN

    def members(self, group: str) -> set[str]:
        """Who is in ``group``: its listed members and the users whose primary group it is."""
        if group not in self.groups:
            return set()
        gid, listed = self.groups[group]
        return set(listed) | {u.name for u in self.users.values() if u.gid == gid}


@dataclass(frozen=True)
class Step:
    """What add-user does for one student: ``create`` their Unix user, or take the existing one."""

    student: Student
    create: bool


def parse_uid_min(text: str) -> int:
    """``UID_MIN`` of an /etc/login.defs text (decimal), else :data:`DEFAULT_UID_MIN`."""
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "UID_MIN" and words[1].isdigit():
            return max(1, int(words[1]))
    return DEFAULT_UID_MIN


def not_a_person(account: Account, accounts: Accounts) -> str | None:
    """Why ``account`` is not one a student may have (root, a system or service account, an
    administrator), or None."""
    if account.uid == 0:
        return "has uid 0 (root)"
    if account.uid < accounts.uid_min:
        return f"is a system account (uid {account.uid}, below UID_MIN {accounts.uid_min} of {LOGIN_DEFS})"
    for group in ADMIN_GROUPS:
        if account.name in accounts.members(group):
            return f"is in the administrators' group {group}"
    if os.path.basename(account.shell.strip()) in NO_LOGIN_SHELLS:
        return f"has the login shell {account.shell} (a service account)"
    return None


def plan_students(students: Iterable[Student], accounts: Accounts, *, create: bool,
                  existing: Collection[str] = (), allow_shared_group: bool = False) -> list[Step]:
    """What ``sandbox add-user`` does for each student of the roster, in order, or a LabError
    naming every refusal (one line each: the account, why, what to do) when any is refused: the
    whole roster is judged before anything changes.

    A missing user is made with ``create`` (else refused). An existing account is taken when it is
    already this lab's student (in :data:`STUDENTS_GROUP`), or named in ``existing``, or, without
    ``create``, by being listed at all (the admin said these accounts exist); never one
    :func:`not_a_person` refuses, and not one whose primary group others share unless
    ``allow_shared_group``."""
    roster = list(students)
    names = {s.name for s in roster}
    refusals = [f"--existing {name}: {name} is not among the students to add; list them too"
                for name in sorted(set(existing) - names)]
    taken = set(existing) if create else names
    in_lab = accounts.members(STUDENTS_GROUP)
    everyone = [(u.name, u.uid, u.gid) for u in accounts.users.values()]
    steps: list[Step] = []
    for student in roster:
        name = student.name
        account = accounts.users.get(name)
        if account is None:
            if name in existing:
                refusals.append(f"{name}: no Unix user {name} exists, yet --existing names it: drop "
                                f"--existing {name} to create it with --create")
            elif create:
                steps.append(Step(student, create=True))
            else:
                refusals.append(f"{name}: no Unix user {name} on this machine: add --create to make "
                                f"it, or create it yourself (useradd -m -U {name})")
            continue
        why = not_a_person(account, accounts)
        if why is not None:
            refusals.append(f"{name}: an existing account that {why}, never a student's: give the "
                            "student another login name")
            continue
        if name not in in_lab and name not in taken:
            refusals.append(f"{name}: an existing account, not yet this lab's student (not in group "
                            f"{STUDENTS_GROUP}); --create makes new accounts only: if it is the "
                            f"student's own, add --existing {name}, else give the student another "
                            "login name")
            continue
        primary = [g for g, (gid, _) in accounts.groups.items() if gid == account.gid]
        sharers = group_sharers(name, account.gid, everyone,
                                accounts.groups[primary[0]][1] if primary else ())
        if sharers and not allow_shared_group:
            refusals.append(f"{name}: their primary group (gid {account.gid}) is shared with "
                            f"{', '.join(sharers[:5])}, who could read their checkpoints: give {name} "
                            f"a group of their own (groupadd {name}-lab && usermod -g {name}-lab "
                            f"{name}), or add --allow-shared-group if they may")
            continue
        steps.append(Step(student, create=False))
    if len(refusals) == 1:
        raise LabError(f"{refusals[0]} (nothing was changed)")
    if refusals:
        raise LabError(f"{len(refusals)} students refused, nothing was changed:\n  "
                       + "\n  ".join(refusals))
    return steps


# --- this machine (root) -----------------------------------------------------------------------

def _tool(name: str) -> str:
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:{_SBIN}")
    if found is None:
        raise LabError(f"{name} is not installed (Debian: apt-get install passwd)")
    return found


def _call(argv: list[str], stdin: str | None = None) -> None:
    done = subprocess.run(argv, input=stdin, text=True, capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise LabError(f"{' '.join(argv[:2])} failed: {said[-1][:300] if said else 'no output'}")


def read_accounts(names: Iterable[str], login_defs: Path = LOGIN_DEFS) -> Accounts:
    """This machine's :class:`Accounts`: every user and group it lists, and each of ``names``
    looked up by name too (a directory service may list not all of them)."""
    users = {p.pw_name: Account(p.pw_name, p.pw_uid, p.pw_gid, p.pw_shell) for p in pwd.getpwall()}
    for name in names:
        try:
            p = pwd.getpwnam(name)
        except KeyError:
            continue
        users[p.pw_name] = Account(p.pw_name, p.pw_uid, p.pw_gid, p.pw_shell)
    groups = {g.gr_name: (g.gr_gid, tuple(g.gr_mem)) for g in grp.getgrall()}
    for name in (*ADMIN_GROUPS, STUDENTS_GROUP):
        try:
            g = grp.getgrnam(name)
        except KeyError:
            continue
        groups[g.gr_name] = (g.gr_gid, tuple(g.gr_mem))
    try:
        text = login_defs.read_text(errors="replace")
    except OSError:
        text = ""
    return Accounts(users, groups, parse_uid_min(text))


def create_unix_user(name: str, say: Callable[[str], None] = print) -> None:
    """Create the Unix user ``name`` with a home and a group of their own; useradd refuses a user
    that exists (one made since the roster was judged is never taken over)."""
    check_user_name(name)
    _call([_tool("useradd"), "-m", "-U", "-s", "/bin/bash", name])
    say(f"{name}: Unix user created (home {pwd.getpwnam(name).pw_dir}, group {name})")


def set_password(name: str, password: str) -> None:
    """Set ``name``'s Unix password (chpasswd reads it on stdin: it is never in argv)."""
    check_user_name(name)
    check_password(password)
    _call([_tool("chpasswd")], stdin=f"{name}:{password}\n")


def join_students_group(name: str) -> str:
    """Add ``name`` to :data:`STUDENTS_GROUP` (made if missing): 'added' or 'already a member'."""
    try:
        group = grp.getgrnam(STUDENTS_GROUP)
    except KeyError:
        _call([_tool("groupadd"), "--system", STUDENTS_GROUP])
        group = grp.getgrnam(STUDENTS_GROUP)
    if name in group.gr_mem:
        return "already a member"
    _call([_tool("usermod"), "-a", "-G", STUDENTS_GROUP, name])
    return "added"


def leave_students_group(name: str) -> bool:
    """Take ``name`` out of :data:`STUDENTS_GROUP`; whether they were in it."""
    try:
        members = grp.getgrnam(STUDENTS_GROUP).gr_mem
    except KeyError:
        return False
    if name not in members:
        return False
    _call([_tool("gpasswd"), "-d", name, STUDENTS_GROUP])
    return True


def students_group_members() -> list[str]:
    """The lab's students as the Unix group lists them (sorted)."""
    try:
        return sorted(grp.getgrnam(STUDENTS_GROUP).gr_mem)
    except KeyError:
        return []


def close_home(pw: pwd.struct_passwd) -> str:
    """Make the student's home 0700 (theirs alone): 'closed' or 'already 0700'. A home that is
    a symlink or not theirs is a LabError (never chmod what another user owns)."""
    home = pw.pw_dir
    info = os.lstat(home)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or info.st_uid != pw.pw_uid:
        raise LabError(f"{pw.pw_name}'s home {home} is not a directory of theirs: fix it by hand "
                       f"(chown {pw.pw_name} {home}), then add the user again")
    if info.st_mode & 0o777 == 0o700:
        return "already 0700"
    os.chmod(home, 0o700)
    return "closed"


def add_students(students: list[Student], *, initial_password: bool = False,
                 allow_shared_group: bool = False, create: bool = False,
                 existing: Collection[str] = (), say: Callable[[str], None] = print,
                 accounts: Accounts | None = None) -> None:
    """``sandbox add-user``: first the whole roster judged (:func:`plan_students` over
    ``accounts``, this machine's by default): a refusal changes nothing. Then for each student, in
    order: the Unix user (made if the plan says so), an initial password (the file's, or a
    generated one with ``initial_password`` or for a user just created), then the lab
    (:func:`lab.add_user`), the hub's group and a 0700 home. Stops at the first failure."""
    lab._require_root("add-user")
    if accounts is None:
        accounts = read_accounts([s.name for s in students])
    plan = plan_students(students, accounts, create=create, existing=existing,
                         allow_shared_group=allow_shared_group)
    for step in plan:
        name = check_user_name(step.student.name)
        if step.create:
            create_unix_user(name, say)
        password = step.student.password
        if password is None and (initial_password or step.create):
            password = new_password()
            lab.lookup_user(name)  # a missing user is named before the password is made
            set_password(name, password)
            say(f"{name}: initial password: {password} (give it to {name}; they change it with passwd)")
        elif password is not None:
            lab.lookup_user(name)
            set_password(name, password)
            say(f"{name}: password set from the students file")
        lab.add_user(name, say, allow_shared_group=allow_shared_group)
        say(f"{name}: group {STUDENTS_GROUP} (may log in to the class's hub): {join_students_group(name)}")
        say(f"{name}: home {lab.lookup_user(name).pw_dir} mode 0700: {close_home(lab.lookup_user(name))}")
