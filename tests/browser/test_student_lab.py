"""Issue 21 section 4: ``examples/teaching_lab.ipynb`` run to its last cell by a real student.

What a class gets, end to end: the package is built into a wheel and installed, with JupyterLab,
into a *system* venv that is not the developer venv (:func:`system_venv`, under
:data:`VENV_ROOT`, cached by the wheel's sha256 so a rerun reuses it); root runs that venv's
``jupyter tiers sandbox add-user jt-lab1`` against the shared Slurm test cluster; then the Unix user
``jt-lab1`` starts JupyterLab from the system venv, opens the shipped notebook (copied into their
home) in Chromium, runs all cells with the notebook's own parameters and waits for the last. The
saved notebook's outputs must hold no error (but in the two cells that show a refusal on purpose)
and say what the markdown promises; ``jupyter tiers doctor`` from the student's seat must find no
FAIL in either lab profile.

/etc/jupyter/tiers.yaml is machine-wide: the fixture puts back what was there. The student's Unix
user, home and Slurm association stay from one run to the next (as tests/cluster/test_lab.py's).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import nbformat
import pytest
import tomllib
import yaml
from playwright.sync_api import expect

from jupyter_tiers.tools.sandbox import lab
from jupyter_tiers.tools.sandbox.files import files_kept
from tests.examples.nbrun import SUMMARY_OK, last_line, nodes_of, texts
from tests.helpers import free_port, loud_skip

from .conftest import OUTPUT, ROOT, SERVER_START_S, UI_TIMEOUT_MS, Lab
from .test_job_widget import open_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]

STUDENT = "jt-lab1"
NOTEBOOK = "teaching_lab.ipynb"
# Root's, 0755 and outside /root and /tmp/pytest-of-root (both closed to other users), so the lab
# setup trusts the venv's Python for the students' jobs as it would a real admin's.
VENV_ROOT = Path(os.environ.get("JT_LAB_VENV_ROOT", "/opt/jt-lab-venv"))
NOTEBOOK_TIMEOUT_S = 1500  # every cell of the notebook, several multi-node jobs on a loaded machine
# The front end's packages, at the developer venv's versions (what the browser tests know), and
# the class's hub (test_class_hub.py: the same venv); pip resolves the rest as an admin's would.
PINNED = ("jupyterlab", "ipykernel", "ipywidgets", "anywidget", "jupyterhub", "jupyterhub-idle-culler")
RAISES = {"guard-serve", "no-storage"}  # the cells that show a refusal on purpose


def _need(ok: bool, why: str) -> None:
    if not ok:
        loud_skip("the student's teaching lab test", why)


def _wheel(out: Path) -> Path:
    """The package's wheel, built from this checkout (its build hook builds or reuses the
    labextension, jlpm coming with the developer venv's jupyterlab)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)]
    built = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert built.returncode == 0, f"pip wheel failed:\n{built.stdout}\n{built.stderr}"
    (wheel,) = out.glob("jupyter_tiers-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    data = wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".data/data/"
    ext = f"{data}share/jupyter/labextensions/jupyter-tiers/"
    for needed in (f"{ext}package.json", f"{ext}static/style.js", "jupyter_tiers/tools/sandbox/cluster.sh",
                   f"{data}etc/jupyter/jupyter_server_config.d/jupyter_tiers.json"):
        assert needed in names, f"the wheel {wheel.name} lacks {needed}"
    return wheel


def _source_key() -> str:
    """A hash of everything the wheel is built from: an unchanged checkout needs no new wheel."""
    digest = hashlib.sha256()
    files = [ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "labextension" / "package.json"]
    for base in ("jupyter_tiers", "jupyter-config", "labextension/src", "labextension/style"):
        files += sorted(p for p in (ROOT / base).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        digest.update(f"{path.relative_to(ROOT)}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _deps_key(pins: str) -> str:
    """A hash of what the venv holds besides the package: the package's dependencies, the pins
    and the machine's Python; a new key makes a new venv."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    python = subprocess.run(["/usr/bin/python3", "-V"], capture_output=True, text=True, check=True).stdout
    text = "\n".join([*project["dependencies"], pins, python])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _pip(venv: Path, *args: str) -> None:
    old_umask = os.umask(0o022)  # files every student may read and nobody else may write
    try:
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", *args],
                              capture_output=True, text=True, timeout=1200, check=False)
    finally:
        os.umask(old_umask)
    said = "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                     if "WARNING: Location" not in line)  # a local index's harmless noise
    assert done.returncode == 0, f"pip install into {venv} failed:\n{said[-4000:]}"


@pytest.fixture(scope="session")
def system_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv made with the machine's python3 holding the wheel, JupyterLab and JupyterHub, as an
    admin installs it (the front end's packages pinned to the developer venv's versions).

    Cached: the venv is kept per dependency set (:func:`_deps_key`) and the wheel it holds is
    rebuilt and reinstalled (no dependencies) only when the sources changed (:func:`_source_key`).
    """
    _need(os.geteuid() == 0, "it creates a Unix user and installs into /opt: it needs root")
    _need(shutil.which("python3", path="/usr/bin:/bin") is not None, "/usr/bin/python3 is missing")
    _need(shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") is not None, "runuser is missing")
    pins = "".join(f"{name}=={metadata.version(name)}\n" for name in PINNED)
    venv = VENV_ROOT / _deps_key(pins)
    source, stamp = _source_key(), venv / ".jt-source"
    if (venv / ".complete").is_file() and stamp.is_file() and stamp.read_text() == source:
        return venv
    wheel = _wheel(tmp_path_factory.mktemp("wheel"))
    if (venv / ".complete").is_file():
        _pip(venv, "--no-deps", "--force-reinstall", str(wheel))
    else:
        VENV_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
        for old in VENV_ROOT.iterdir():  # one venv at a time: another dependency set's is stale
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=300)
        constraints = tmp_path_factory.mktemp("pins") / "constraints.txt"
        constraints.write_text(pins)
        _pip(venv, "-c", str(constraints), str(wheel), "jupyterlab", "jupyterhub", "jupyterhub-idle-culler")
        (venv / ".complete").write_text(wheel.name + "\n")
    stamp.write_text(source)
    return venv


def _as_student(argv: list[str], home: str, venv: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", STUDENT, "--", *_student_env(home, venv), *argv], cwd=home,
                          capture_output=True, text=True, check=False, **kwargs)


def _student_env(home: str, venv: Path) -> list[str]:
    """A clean login-like environment whose PATH starts with the system venv (as the admin's
    JupyterHub spawner or a student's shell would set it)."""
    return ["env", "-i", f"HOME={home}", f"USER={STUDENT}", f"LOGNAME={STUDENT}", "LC_ALL=C.UTF-8",
            f"PATH={venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED=1"]


@pytest.fixture(scope="module")
def student(system_venv: Path, cluster_env: dict[str, str]) -> Iterator[pwd.struct_passwd]:
    """``jt-lab1`` added to the lab by the system venv's ``jupyter tiers sandbox add-user``."""
    try:
        pwd.getpwnam(STUDENT)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", STUDENT], check=True)
    subprocess.run(["usermod", "-p", "*", STUDENT], check=True)  # unlocked, no password
    config = lab.SYSTEM_CONFIG
    with files_kept(config), contextlib.ExitStack() as stack:
        stack.callback(subprocess.run, ["scancel", "-u", STUDENT], capture_output=True, check=False,
                       env={**os.environ, "SLURM_CONF": cluster_env["SLURM_CONF"]})
        admin = [str(system_venv / "bin" / "jupyter"), "tiers", "sandbox", "add-user", STUDENT]
        added = subprocess.run(admin, capture_output=True, text=True, timeout=300, check=False, cwd="/")
        assert added.returncode == 0, f"add-user failed:\n{added.stdout}\n{added.stderr}"
        home = pwd.getpwnam(STUDENT).pw_dir
        assert f"profiles 'sandbox' and 'sandbox-serve' (serving from {home})" in added.stdout, added.stdout
        profiles = yaml.safe_load(config.read_text())["profiles"]
        # The system venv is root's and closed to writers: the students' jobs run its Python.
        assert profiles["sandbox"]["defaults"]["python"] == str(system_venv / "bin" / "python"), profiles
        assert home in profiles["sandbox-serve"]["path_map"], profiles
        yield pwd.getpwnam(STUDENT)


@pytest.fixture
def student_lab(student: pwd.struct_passwd, system_venv: Path) -> Iterator[Lab]:
    """The student's own JupyterLab from the system venv, rooted in their home, with a fresh copy
    of the shipped notebook there."""
    home = Path(student.pw_dir)
    target = home / NOTEBOOK
    target.unlink(missing_ok=True)
    shutil.copyfile(ROOT / "examples" / NOTEBOOK, target)
    os.chown(target, student.pw_uid, student.pw_gid)
    os.chmod(target, 0o644)
    page_config = home / ".jt-test" / "jupyter-config" / "labconfig" / "page_config.json"
    no_news = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
    # Every cell stays in the page (no windowing), so each one's prompt can be read while it runs.
    settings = home / ".jt-test" / "user-settings" / "@jupyterlab" / "notebook-extension"
    for path, text in ((page_config, json.dumps(no_news)),
                       (settings / "tracker.jupyterlab-settings", json.dumps({"windowingMode": "none"}))):
        wrote = _as_student(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", str(path)],
                            str(home), system_venv, input=text)
        assert wrote.returncode == 0, wrote.stderr
    token = secrets.token_hex(24)
    port = free_port()
    OUTPUT.mkdir(exist_ok=True)
    log = OUTPUT / "student-lab.log"  # kept after the run (pytest prunes old tmp dirs)
    argv = ["runuser", "-u", STUDENT, "--", *_student_env(str(home), system_venv),
            f"JUPYTER_CONFIG_DIR={home / '.jt-test' / 'jupyter-config'}",
            str(system_venv / "bin" / "jupyter-lab"), "--no-browser", f"--ServerApp.token={token}",
            "--ServerApp.ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={home}", f"--LabApp.workspaces_dir={home / '.jt-test' / 'workspaces'}",
            f"--LabApp.user_settings_dir={home / '.jt-test' / 'user-settings'}",
            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=home, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    server = Lab(url=f"http://127.0.0.1:{port}", token=token, root=home, config=lab.SYSTEM_CONFIG,
                 registry=home / ".local", log=log)  # registry: unused here (the student's own)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the student's jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                server.api("/api/status")
                break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the student's jupyter lab did not answer in {SERVER_START_S}s:\n"
                            f"{server.log_tail()}")
            time.sleep(0.3)
        yield server
    finally:
        if proc.poll() is None:
            try:
                server.api("/api/shutdown", method="POST")
            except (OSError, urllib.error.URLError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # A run that failed half-way may have left the notebook's local service up: the student's
        # own CLI stops it (a no-op after the last cell deleted it).
        _as_student([str(system_venv / "bin" / "jupyter"), "tiers", "delete", "lab-model"], str(home),
                    system_venv, timeout=120)


def _kernel_busy(lab: Lab) -> bool:
    """Whether the student's kernel is executing something, as the server sees it. JupyterLab
    takes the ``[*]`` off every queued cell as soon as one cell replies with an error, even a
    ``raises-exception`` one, while the kernel goes on to run them: the prompts alone cannot tell
    a run that stopped from one still going (CI saw the serve cell after the refused one counted
    as stopped)."""
    try:
        return any(k.get("execution_state") != "idle" for k in lab.api("/api/kernels"))
    except OSError:
        return True  # cannot tell now: keep waiting (the run's deadline still bounds it)


def _run_all_and_wait(page: Any, cells: Any, lab: Lab) -> None:
    """Run > Run All Cells, then wait until the last cell has its execution count, or fail as soon
    as the run stopped short of it (a cell raised: no cell shows ``[*]`` and the kernel is idle)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    last = cells.last.locator(".jp-InputPrompt")
    prompts = page.locator(".jp-NotebookPanel .jp-Cell .jp-InputPrompt")
    expect(prompts.filter(has_text="[*]").first).to_be_attached(timeout=UI_TIMEOUT_MS)
    deadline = time.monotonic() + NOTEBOOK_TIMEOUT_S
    idle = 0  # polls in a row that saw no queued or running cell
    while not re.fullmatch(r"\[\d+\]:?", (last.text_content() or "").strip()):
        idle = 0 if prompts.filter(has_text="[*]").count() or _kernel_busy(lab) else idle + 1
        if idle >= 3 and not re.fullmatch(r"\[\d+\]:?", (last.text_content() or "").strip()):
            shown = [(p.text_content() or "").strip() for p in prompts.all()]
            ran = [i for i, p in enumerate(shown) if re.fullmatch(r"\[\d+\]:?", p)]
            said = cells.nth(ran[-1]).locator(".jp-OutputArea").text_content() if ran else ""
            pytest.fail(f"the run stopped before the last cell; prompts: {shown}; the last cell run "
                        f"(#{ran[-1] if ran else None}) shows:\n{said}")
        if time.monotonic() > deadline:
            pytest.fail(f"the notebook did not reach its last cell in {NOTEBOOK_TIMEOUT_S}s")
        time.sleep(2)


def _saved_notebook(page: Any, path: Path, cells: int) -> nbformat.NotebookNode:
    """Save with Ctrl+S and read the student's file once the last code cell's outputs are in it."""
    page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 60
    while True:
        try:
            nb = nbformat.reads(path.read_text(), as_version=4)
            code = [c for c in nb.cells if c.cell_type == "code"]
            if len(nb.cells) == cells and code[-1].get("execution_count"):
                return nb
        except (OSError, ValueError):
            pass
        assert time.monotonic() < deadline, f"{path} was not saved with the outputs"
        time.sleep(0.5)


@pytest.mark.timeout(2400)
def test_student_runs_the_teaching_lab_to_the_last_cell(
    page: Any, student_lab: Lab, student: pwd.struct_passwd, system_venv: Path,
    cluster_env: dict[str, str],
) -> None:
    cells = open_notebook(page, student_lab, NOTEBOOK)
    extensions = page.evaluate("JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    assert "jupyter-tiers" in [e["name"] for e in extensions["federated_extensions"]], extensions
    expected = len(nbformat.read(ROOT / "examples" / NOTEBOOK, as_version=4).cells)
    started = time.monotonic()
    _run_all_and_wait(page, cells, student_lab)
    print(f"[student lab] all {expected} cells ran in the browser in {time.monotonic() - started:.0f} s")
    # A job widget appeared where a --wait cell runs (the widget front end of the system venv).
    expect(cells.nth(5).locator(".jt-job .jt-summary")).to_contain_text("COMPLETED in ")
    nb = _saved_notebook(page, Path(student.pw_dir) / NOTEBOOK, expected)

    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tag = cell.metadata["tags"][0]
        errors = [o for o in cell.outputs if o.output_type == "error"
                  or (o.output_type == "stream" and o.name == "stderr" and "Traceback" in o.text)]
        if tag in RAISES:
            assert errors or any("UsageError" in o.get("text", "") for o in cell.outputs), (tag, cell.outputs)
        else:
            assert not errors, f"cell {tag!r} failed as the student:\n{cell.outputs}"
    out = texts(nb)
    home = student.pw_dir

    assert re.search(r"^\s+sandbox\s+slurm", out["load"], re.M), out["load"]
    assert re.search(r"^\s+sandbox-serve\s+local", out["load"], re.M), out["load"]
    assert "/etc/jupyter/tiers.yaml" in out["load"], out["load"]

    # Gang allocation: all four nodes, every rank running at one moment.
    gang = SUMMARY_OK.match(last_line(out["gang"]))
    assert gang and len(nodes_of(gang.group(2))) == 4, out["gang"]
    assert re.search(rf"^gang: 4 ranks on 4 nodes \({re.escape(gang.group(2))}\) started within [\d.]+ s$",
                     out["gang-starts"], re.M), out["gang-starts"]
    assert "all ranks were running at the same moment: True" in out["gang-starts"], out["gang-starts"]
    # --switches: rank 0 found both nodes under one leaf.
    assert SUMMARY_OK.match(last_line(out["switches"])), out["switches"]
    # The held job: its pending reason, then cancelled.
    held = re.search(r"job (\d+) 'held'", out["held"])  # the widget's text: JobView(job N 'held': ...)
    assert held, out["held"]
    assert f"job {held.group(1)} is PENDING, reason: JobHeldUser" in out["held-reason"], out["held-reason"]
    assert f"job {held.group(1)} is CANCELLED" in out["held-cancel"], out["held-cancel"]
    # Fail-stop: rank 3 failed first, the other three were stopped.
    assert re.match(r"^job \d+ FAILED in \d\d:\d\d:\d\d — first failure: rank 3 \(node\d+\) exit 7;"
                    r" 3 ranks stopped$", last_line(out["fail"])), out["fail"]
    assert re.search(r"^rank 3 \(node\d+\) exit 7$", out["fail-ranks"], re.M), out["fail-ranks"]
    # The routing guard, both ways.
    guard_serve, guard_train = out["guard-serve"], out["guard-train"]
    assert "%%k8s_serve: this cell calls init_process_group (line 3)" in guard_serve, guard_serve
    assert "%%slurm_train warning: this cell calls serve_forever (line 3)" in guard_train, guard_train
    assert re.search(r"job \d+ is CANCELLED", out["guard-train-cancel"]), out["guard-train-cancel"]
    # Train here, serve there: the student's checkpoint, in their own home, served from it.
    fit = re.search(r"job (\d+) 'lab-fit'", out["fit"])
    assert fit, out["fit"]
    checkpoint = f"{home}/jupyter-tiers/lab-fit/{fit.group(1)}/checkpoints/step-00010.json"
    fitted = SUMMARY_OK.match(last_line(out["fit"]))
    assert fitted and fitted["checkpoint"] == checkpoint, out["fit"]
    assert f"profile 'local' has no path_map covering {checkpoint}" in out["no-storage"], out["no-storage"]
    # The serve cell's line is kept current (display.LiveLine): the lab's last cell deletes the
    # service, so the saved notebook says DELETED when the watcher saw it before the run ended,
    # else still READY (timing decides; both are true), naming the model it served either way.
    assert re.search(rf"service lab-model (?:READY 1/1|DELETED: ).* — model from sandbox/{fit.group(1)} "
                     r"\(lab-fit\)", last_line(out["serve"])), out["serve"]
    assert re.fullmatch(r"y\(2\) = [\d.]+ from step-00010\.json \(step 10\); the true line gives 7\n",
                        out["query"]), out["query"]
    assert out["delete"] == "service lab-model deleted\n", out["delete"]
    assert page.jt_errors == [], page.jt_errors

    # The doctor, from the student's seat: both lab profiles, no FAIL.
    doctor = _as_student([str(system_venv / "bin" / "jupyter"), "tiers", "doctor", "sandbox", "sandbox-serve",
                          "--json"], home, system_venv, timeout=300)
    report = json.loads(doctor.stdout)
    statuses = {(p["profile"], c["name"]): c["status"] for p in report["profiles"] for c in p["checks"]}
    assert {p["profile"] for p in report["profiles"]} == {"sandbox", "sandbox-serve"}, doctor.stdout
    assert statuses and set(statuses.values()) <= {"OK", "WARN"}, doctor.stdout
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
