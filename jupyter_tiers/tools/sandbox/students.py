"""A class's students for ``jupyter tiers sandbox add-user``: a students file, initial passwords.

``sandbox add-user --students FILE`` reads one student a line (:func:`parse_students`): a login
name, optionally ``:`` and an initial password (``chpasswd``'s format), ``#`` comments and blank
lines ignored. A student without a Unix user gets one (``useradd -m -U``, a group of their own,
so nobody shares their primary group); a student the file gives a password, or any student with
``--initial-password`` whose file line gives none, gets that password (a generated one is
printed once, for the admin to hand out). The hub's PAM login checks these passwords.

Every student's home is made 0700 (:func:`close_home`): classmates cannot read each other's
notebooks, keys or job directories.
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import lab  # its functions looked up at call time (tests patch lab.*)
from .lab import LabError, check_user_name

STUDENTS_GROUP = "jtlab"  # the hub lets in members of this Unix group only (hub.py)
MAX_STUDENTS = 1000
MAX_PASSWORD = 128
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"


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


def ensure_unix_user(name: str, say: Callable[[str], None] = print) -> bool:
    """Create the Unix user ``name`` with a home and a group of their own if missing; whether
    it was created."""
    check_user_name(name)
    try:
        pwd.getpwnam(name)
        return False
    except KeyError:
        pass
    _call([_tool("useradd"), "-m", "-U", "-s", "/bin/bash", name])
    say(f"{name}: Unix user created (home {pwd.getpwnam(name).pw_dir}, group {name})")
    return True


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
                 say: Callable[[str], None] = print) -> None:
    """``sandbox add-user``: for each student, in order: the Unix user (made if ``create``), an
    initial password (the file's, or a generated one with ``initial_password`` or for a user just
    created), then the lab
    (:func:`lab.add_user`), the hub's group and a 0700 home. Stops at the first failure."""
    lab._require_root("add-user")
    for student in students:
        name = check_user_name(student.name)
        created = ensure_unix_user(name, say) if create else False
        password = student.password
        if password is None and (initial_password or created):
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
