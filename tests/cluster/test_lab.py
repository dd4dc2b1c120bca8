"""Issue 11, teaching labs: two real Unix users (jt-student1, jt-student2) made lab students with
``sandbox add-user``, each running jupyter-tiers as themselves through the shared profile in
/etc/jupyter/tiers.yaml, against the cluster in a box over its real sshd.

The students' Python: the venv's interpreter lives under /root (0700), which a student cannot
execute, so their processes run Debian's /usr/bin/python3 (the same 3.11 ABI) with the venv's
site-packages added: the same jupyter_tiers code, run by the student's own uid and HOME.

/etc/jupyter/tiers.yaml is machine-wide: the module fixture keeps what was there and puts it back
(or removes the file and the directory it made) when the module ends.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from jupyter_tiers.tools.sandbox import lab
from jupyter_tiers.tools.sandbox.files import files_kept
from tests.helpers import loud_skip, wait_for

pytestmark = pytest.mark.cluster

STUDENTS = ("jt-student1", "jt-student2")
LOCKED = "jt-locked"
SITE = sysconfig.get_paths()["purelib"]
STUDENT_PYTHON = "/usr/bin/python3"
ROOT = Path(__file__).resolve().parents[2]


def _student_python_usable() -> str | None:
    """Why the students' interpreter cannot run the package here, or None."""
    if os.geteuid() != 0:
        return "the lab tests create Unix users and run as them: they need root"
    if not shutil.which("runuser") and not Path("/usr/sbin/runuser").exists():
        return "runuser is missing"
    if not Path(STUDENT_PYTHON).exists():
        return f"{STUDENT_PYTHON} is missing"
    probe = subprocess.run([STUDENT_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True, check=False)
    if probe.stdout.strip() != str(tuple(sys.version_info[:2])):
        return (f"{STUDENT_PYTHON} is Python {probe.stdout.strip()}, the venv {sys.version_info[:2]}: "
                "the venv's compiled packages would not load in it")
    return None


def _ensure_user(name: str, *, locked: bool = False) -> None:
    """Create ``name`` once (home, bash); the students' accounts are unlocked ('*', no password)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True)
    password = "!" if locked else "*"
    subprocess.run(["usermod", "-p", password, name], check=True)


def as_student(name: str, code: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run Python ``code`` as the Unix user ``name`` (their uid, HOME, cwd; a clean environment)."""
    home = pwd.getpwnam(name).pw_dir
    prelude = f"import site; site.addsitedir({SITE!r}); import sys; sys.path.insert(0, {str(ROOT)!r})\n"
    env = ["env", "-i", f"HOME={home}", f"USER={name}", f"LOGNAME={name}",
           "PATH=/usr/local/bin:/usr/bin:/bin", "JUPYTER_TIERS_DISPLAY=text", "LC_ALL=C.UTF-8"]
    return subprocess.run(["runuser", "-u", name, "--", *env, STUDENT_PYTHON, "-c", prelude + code],
                          cwd=home, capture_output=True, text=True, timeout=timeout, check=False)


def ssh_as(name: str, key_owner: str, command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``ssh`` run by ``key_owner`` with their lab key, logging in as ``name``."""
    key = Path(pwd.getpwnam(key_owner).pw_dir) / ".ssh" / "jupyter_tiers_lab"
    argv = ["runuser", "-u", key_owner, "--", "ssh", "-n", "-F", "/dev/null", "-i", str(key),
            "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
            "-p", env["JT_SSH_PORT"], f"{name}@{env['JT_SSH_HOST']}", command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          cwd="/")


def _newest(stdout: str, name: str) -> list[str]:
    """[job id, job dir, state] of the newest registry record named ``name`` (the students' homes,
    and so their registries, stay from one run to the next)."""
    for line in stdout.splitlines():
        if line.startswith("RECORDS "):
            for record in json.loads(line[len("RECORDS "):]):
                if record[3] == name:
                    return list(record[:3])
    raise AssertionError(f"no record of {name} in:\n{stdout}")


@pytest.fixture(scope="module")
def lab_students(cluster_env: dict[str, str]) -> Iterator[dict[str, list[str]]]:
    """Both students added (twice: the second run must change nothing); /etc restored after."""
    why = _student_python_usable()
    if why:
        loud_skip("teaching lab tests", why)
    with files_kept(lab.SYSTEM_CONFIG):
        for name in STUDENTS:
            _ensure_user(name)
        said: dict[str, list[str]] = {}
        for name in (*STUDENTS, *STUDENTS):
            said[name] = []
            lab.add_user(name, say=said[name].append)
        yield said


def test_add_user_sets_up_each_student_once(lab_students: dict[str, list[str]],
                                            cluster_env: dict[str, str]) -> None:
    for name in STUDENTS:
        pw = pwd.getpwnam(name)
        key = Path(pw.pw_dir) / ".ssh" / "jupyter_tiers_lab"
        info = key.lstat()
        assert (info.st_uid, info.st_mode & 0o777) == (pw.pw_uid, 0o600)
        assert (key.parent.stat().st_uid, key.parent.stat().st_mode & 0o777) == (pw.pw_uid, 0o700)
        public = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True,
                                check=True).stdout.split()[:2]
        authorized = Path(cluster_env["JT_CLUSTER_DIR"]) / "ssh" / "authorized_keys.d" / name
        assert authorized.read_text().split()[1:3] == public
        assert authorized.stat().st_uid == 0 and authorized.stat().st_mode & 0o022 == 0
        assoc = subprocess.run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={name}",
                                "format=account"], capture_output=True, text=True, check=True,
                               env={**os.environ, "SLURM_CONF": cluster_env["SLURM_CONF"]})
        assert lab.LAB_ACCOUNT in assoc.stdout.split()
        # The second add-user (the last words recorded) found everything in place.
        said = "\n".join(lab_students[name])
        assert "association jtlab/" + name + " on jtbox: already there" in said
        assert "SSH key " + str(key) + ": kept" in said
        assert ": already there" in said.split("key authorised")[1].splitlines()[0]
        assert f"checked: logs in as {name}" in said
        assert "/etc/jupyter/tiers.yaml: kept" in said
    config = lab.SYSTEM_CONFIG
    assert config.stat().st_mode & 0o777 == 0o644 and config.stat().st_uid == 0
    profile = yaml.safe_load(config.read_text())["profiles"]["sandbox"]
    assert "user" not in profile  # ssh logs in as whoever runs Jupyter
    assert profile["identity_file"] == "~/.ssh/jupyter_tiers_lab"
    assert os.stat(profile["known_hosts"]).st_mode & 0o004  # students can read it


def _notebook_profiles() -> dict[str, str]:
    """The profile names examples/teaching_lab.ipynb's parameters cell names (variable -> name)."""
    import ast

    notebook = json.loads((ROOT / "examples" / "teaching_lab.ipynb").read_text())
    cell = next(c for c in notebook["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    names = {}
    for node in ast.parse("".join(cell["source"])).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id.endswith("profile"):
            assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            names[target.id] = node.value.value
    return names


def test_the_lab_notebooks_profiles_exist_for_a_student(lab_students: dict[str, list[str]]) -> None:
    """Issue 21 section 4: every profile the shipped lab notebook's parameters name exists from a
    student's seat, and the serving one maps where that student's jobs keep their checkpoints."""
    wanted = _notebook_profiles()
    assert set(wanted) == {"profile", "serve_profile"} and wanted["serve_profile"] == lab.LAB_SERVE_PROFILE
    for name in STUDENTS:
        home = pwd.getpwnam(name).pw_dir
        out = as_student(name, textwrap.dedent(f"""\
            import json
            from jupyter_tiers.config.profiles import load_config
            config = load_config()
            found = {{}}
            for name in {sorted(wanted.values())!r}:
                profile = config.profile(name)
                found[name] = [profile.tier, profile.get("path_map")]
            print("FOUND " + json.dumps(found))
        """))
        assert out.returncode == 0, out.stdout + out.stderr
        found = json.loads(out.stdout.split("FOUND ", 1)[1])
        assert found[wanted["profile"]][0] == "slurm"
        tier, path_map = found[wanted["serve_profile"]]
        assert tier == "local" and path_map.get(home) == home, found


def test_doctor_from_a_students_seat(lab_students: dict[str, list[str]]) -> None:
    """Issue 21: a student runs ``jupyter tiers doctor`` on the notebook's profiles, as themselves:
    the shared profile logs in with their lab key and every check passes."""
    wanted = sorted(_notebook_profiles().values())
    out = as_student("jt-student1", textwrap.dedent(f"""\
        from jupyter_tiers.faces.cli import main
        print("EXIT", main(["doctor", *{wanted!r}]))
    """))
    assert "EXIT 0" in out.stdout, out.stdout + out.stderr
    assert "FAIL" not in out.stdout and "login: logged in with a key" in out.stdout
    assert "workdir: /home/jt-student1/jupyter-tiers" in out.stdout
    assert "sandbox-serve (local)" in out.stdout


def test_a_lab_key_logs_in_as_its_own_user_only(lab_students: dict[str, list[str]],
                                                 cluster_env: dict[str, str]) -> None:
    own = ssh_as("jt-student2", "jt-student2", "id -un", cluster_env)
    assert (own.returncode, own.stdout.strip()) == (0, "jt-student2"), own.stderr
    other = ssh_as("jt-student1", "jt-student2", "id -un", cluster_env)
    assert other.returncode == 255 and "Permission denied (publickey)" in other.stderr
    as_root = ssh_as("root", "jt-student2", "id -un", cluster_env)
    assert as_root.returncode == 255 and "Permission denied (publickey)" in as_root.stderr


def test_a_locked_account_is_refused_with_the_fix(cluster_env: dict[str, str]) -> None:
    if os.geteuid() != 0:
        loud_skip("teaching lab tests", "creating a Unix user needs root")
    _ensure_user(LOCKED, locked=True)
    with pytest.raises(lab.LabError, match=r"locked .* usermod -p '\*' jt-locked$"):
        lab.add_user(LOCKED, say=lambda _line: None)
    assert not (Path(cluster_env["JT_CLUSTER_DIR"]) / "ssh" / "authorized_keys.d" / LOCKED).exists()


SUBMIT = textwrap.dedent("""\
    import json
    from tests.helpers import tiers_shell
    from jupyter_tiers.config.registry import Registry
    shell = tiers_shell()
    shell.run_cell_magic("slurm_train", {line!r}, {body!r})
    shell.run_line_magic("tiers", "jobs")
    print("RECORDS", json.dumps([[r.job_id, r.jobdir, r.state, r.name] for r in Registry().list()]))
""")
WHOAMI = ("import subprocess\n"
          "print('whoami:', subprocess.run(['id', '-un'], capture_output=True, text=True).stdout)\n")


def test_students_run_as_themselves_and_cannot_touch_each_other(
        lab_students: dict[str, list[str]], cluster_env: dict[str, str]) -> None:
    slurm = {**os.environ, "SLURM_CONF": cluster_env["SLURM_CONF"]}
    # Student 1: a job through the /etc profile runs as jt-student1.
    done = as_student("jt-student1", SUBMIT.format(line="--profile sandbox --name lab-whoami --wait --text",
                                                   body=WHOAMI))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "whoami: jt-student1" in done.stdout, done.stdout
    job_id, jobdir, state = _newest(done.stdout, "lab-whoami")
    assert state == "COMPLETED" and jobdir.startswith("/home/jt-student1/jupyter-tiers/")
    # slurmdbd may record a job a moment after slurmctld has ended it: ask until sacct knows it.
    sacct = ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "User"]
    owner = wait_for(lambda: subprocess.run(sacct, env=slurm, capture_output=True, text=True,
                                            check=True).stdout.split(),
                     f"sacct to know job {job_id}", interval=1.0)
    assert owner == ["jt-student1"]

    # A job of student 1 that stays running while student 2 tries things.
    sleeper = as_student("jt-student1", SUBMIT.format(line="--profile sandbox --name lab-sleeper --text",
                                                      body="import time\ntime.sleep(600)\n"))
    assert sleeper.returncode == 0, sleeper.stderr[-3000:]
    sleeper_id = _newest(sleeper.stdout, "lab-sleeper")[0]
    try:
        # Student 2 cannot read student 1's job files, nor list the workdir.
        peek = ssh_as("jt-student2", "jt-student2",
                      f"cat {jobdir}/job.log; cat {jobdir}/main.py; ls /home/jt-student1/jupyter-tiers",
                      cluster_env)
        assert peek.returncode != 0 and "whoami" not in peek.stdout
        assert peek.stderr.count("Permission denied") == 3, peek.stderr
        # Slurm's PrivateData: student 2's squeue and sacct show none of student 1's jobs.
        seen = ssh_as("jt-student2", "jt-student2",
                      "squeue -h -o %u; sacct -a -X -n -S now-1days -o User%40", cluster_env)
        assert seen.returncode == 0 and "jt-student1" not in seen.stdout, seen.stdout + seen.stderr
        history = as_student("jt-student2", textwrap.dedent("""\
            from jupyter_tiers.faces.cli import main
            print("EXIT", main(["history", "-p", "sandbox", "--user", "all", "--days", "1"]))
        """))
        assert "EXIT 0" in history.stdout, history.stdout + history.stderr
        assert "jt-student1" not in history.stdout and "lab-sleeper" not in history.stdout
        assert "lab-two" in history.stdout or "no jobs" in history.stdout  # their own, if any yet
        # Slurm refuses student 2's scancel; the job goes on.
        kill = ssh_as("jt-student2", "jt-student2", f"scancel {sleeper_id}", cluster_env)
        assert kill.returncode != 0 and "Access/permission denied" in kill.stderr, kill.stderr
        alive = subprocess.run(["squeue", "-h", "-j", sleeper_id, "-o", "%u %T"], env=slurm,
                               capture_output=True, text=True, check=True).stdout.split()
        assert alive[0] == "jt-student1" and alive[1] in ("PENDING", "RUNNING", "CONFIGURING")
        # Our cancel, as student 2: the job is not theirs, and it says so.
        cancel = as_student("jt-student2", textwrap.dedent(f"""\
            from jupyter_tiers.faces.cli import main
            print("EXIT", main(["cancel", {sleeper_id!r}]))
        """))
        assert "EXIT 1" in cancel.stdout, cancel.stdout + cancel.stderr
        assert f"no job '{sleeper_id}' in the registry (/home/jt-student2/" in cancel.stderr
        # Student 2's own job; %tiers jobs lists it and none of student 1's.
        line = "--profile sandbox --name lab-two --wait --text"
        theirs = as_student("jt-student2", SUBMIT.format(line=line, body=WHOAMI))
        assert theirs.returncode == 0, theirs.stderr[-3000:]
        assert "whoami: jt-student2" in theirs.stdout
        two_id = _newest(theirs.stdout, "lab-two")[0]
        listing = theirs.stdout.split("RECORDS")[0].split("COMPLETED in")[-1]
        assert two_id in listing and "lab-two" in listing
        assert job_id not in listing and sleeper_id not in listing and "lab-sleeper" not in listing
        # Student 1 cancels their own job with the same command.
        own = as_student("jt-student1", textwrap.dedent(f"""\
            from jupyter_tiers.faces.cli import main
            print("EXIT", main(["cancel", {sleeper_id!r}]))
        """))
        assert "EXIT 0" in own.stdout, own.stdout + own.stderr
    finally:
        subprocess.run(["scancel", sleeper_id], env=slurm, check=False, capture_output=True)


def test_remove_user_takes_the_lab_away(lab_students: dict[str, list[str]],
                                        cluster_env: dict[str, str]) -> None:
    name = "jt-student3"
    _ensure_user(name)
    lab.add_user(name, say=lambda _line: None)
    assert ssh_as(name, name, "id -un", cluster_env).stdout.strip() == name
    said: list[str] = []
    lab.remove_user(name, say=said.append)
    assert said == [f"{name}: key no longer authorised for the cluster's sshd",
                    f"{name}: Slurm association jtlab/{name} removed"]
    refused = ssh_as(name, name, "id -un", cluster_env)
    assert refused.returncode == 255 and "Permission denied (publickey)" in refused.stderr
    assoc = subprocess.run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={name}",
                            "format=account"], capture_output=True, text=True, check=True,
                           env={**os.environ, "SLURM_CONF": cluster_env["SLURM_CONF"]})
    assert lab.LAB_ACCOUNT not in assoc.stdout.split()
    assert (Path(pwd.getpwnam(name).pw_dir) / ".ssh" / "jupyter_tiers_lab").exists()  # theirs, kept
    said.clear()
    lab.remove_user(name, say=said.append)  # again: nothing left to do, and it says so
    assert said == [f"{name}: no key was authorised", f"{name}: had no Slurm association in jtlab"]


def test_a_student_cannot_run_the_admin_commands(lab_students: dict[str, list[str]]) -> None:
    out = as_student("jt-student1", textwrap.dedent("""\
        from jupyter_tiers.faces.cli import main
        print("EXIT", main(["sandbox", "add-user", "jt-student1"]))
    """))
    assert "EXIT 1" in out.stdout, out.stdout + out.stderr
    assert "sandbox add-user must run as root" in out.stderr and "Traceback" not in out.stderr


def test_up_lab_writes_the_same_shared_profile(lab_students: dict[str, list[str]], tmp_path: Path) -> None:
    before = lab.SYSTEM_CONFIG.read_text()  # written by add-user
    admin = tmp_path / "admin-tiers.yaml"
    up = subprocess.run([sys.executable, "-m", "jupyter_tiers.faces.cli", "sandbox", "up", "--lab",
                         "--config", str(admin)], capture_output=True, text=True, timeout=900, check=False)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "kept the lab profile 'sandbox' in /etc/jupyter/tiers.yaml" in up.stdout
    assert "add each student with: jupyter tiers sandbox add-user NAME" in up.stdout
    assert lab.SYSTEM_CONFIG.read_text() == before
    # The admin's own profile (root's key) too, which overrides the shared one key by key.
    assert f"wrote profile 'sandbox' in {admin}" in up.stdout
    assert yaml.safe_load(admin.read_text())["profiles"]["sandbox"]["user"] == "root"
