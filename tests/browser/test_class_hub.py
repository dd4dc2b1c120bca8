"""Issue 30: a class on JupyterHub, started the way an admin starts it.

Root runs the class's venv (test_student_lab.py's :func:`system_venv`, which also holds
jupyterhub and jupyterhub-idle-culler) ``jupyter tiers sandbox add-user --students FILE --create``
for two students with passwords, then ``jupyter tiers sandbox up --lab --hub`` with a short culler
timeout: a real JupyterHub, configurable-http-proxy from npm, PAM, the local process spawner. The
students log in through the hub's login form (HTTP, as a browser posts it, and two at once in
Chromium, each seeing only their own jobs in the sidebar; one then uses a job's Files tab and a
service's Try it and Load panel), their JupyterLab starts as them,
and the Tiers REST API answers through the proxy under ``/user/NAME/`` with XSRF;
one student cannot reach the other's server; our routes do not move the server's last activity;
the culler stops a server while its Slurm job goes on, and after logging in again the job is
listed with its end and ``jupyter tiers attach`` shows all its lines.

The hub's state goes to a temporary directory (``JT_HUB_DIR``) and is stopped with ``sandbox
down --hub``: the shared Slurm cluster is never stopped. /etc/jupyter/tiers.yaml is put back.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import secrets
import stat
import subprocess
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_tiers.tools.sandbox import lab
from jupyter_tiers.tools.sandbox.files import files_kept
from tests.helpers import free_port, wait_for

from .conftest import SERVER_START_S, UI_TIMEOUT_MS
from .test_load_panel import COUNT_BODY
from .test_sidebar import SIDEBAR_ID
from .test_student_lab import system_venv  # noqa: F401 (the class's venv, a fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.browser]

STUDENTS = ("jt-hub1", "jt-hub2")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CULL_TIMEOUT = 60  # the shortest the command takes; the culler then looks every 30 s
UNSEEN_AFTER = 20  # seconds a widget no page shows keeps sending (JUPYTER_TIERS_UNSEEN_AFTER)
API = "jupyter-tiers/api"


@dataclass
class Hub:
    url: str
    state: Path
    venv: Path
    passwords: dict[str, str]
    env: dict[str, str]

    def api(self, path: str) -> Any:
        """The hub's REST API with the status service's token (what ``sandbox status`` reads)."""
        import requests

        token = (self.state / "status.token").read_text().strip()
        answer = requests.get(f"{self.url}/hub/api{path}", headers={"Authorization": f"token {token}"},
                              timeout=30)
        answer.raise_for_status()
        return answer.json()

    def server(self, name: str) -> dict[str, Any] | None:
        servers = self.api(f"/users/{name}").get("servers") or {}
        found: dict[str, Any] | None = servers.get("")
        return found

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = (self.state / "jupyterhub.log").read_text(errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        except OSError:
            return ""


def _sandbox(venv: Path, *args: str, env: dict[str, str],
             timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "jupyter"), "tiers", "sandbox", *args], env=env, cwd="/",
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def class_hub(system_venv: Path, cluster_env: dict[str, str],  # noqa: F811
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """Two students added from a students file, then the hub, with a 60 s culler."""
    work = tmp_path_factory.mktemp("hub")
    os.chmod(work, 0o700)
    passwords = {name: secrets.token_urlsafe(12) for name in STUDENTS}
    roster = work / "students.txt"
    roster.write_text("# the class\n" + "".join(f"{n}:{p}\n" for n, p in passwords.items()))
    os.chmod(roster, 0o600)
    env = {"PATH": f"{system_venv / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/root", "LC_ALL": "C.UTF-8", "JT_HUB_DIR": str(work / "state"),
           "JUPYTERHUB_ACTIVITY_INTERVAL": "10", "JUPYTER_TIERS_UNSEEN_AFTER": str(UNSEEN_AFTER)}
    for key in ("JT_HUB_PROXY_DIR", "JT_CLUSTER_DIR"):
        if key in os.environ:
            env[key] = os.environ[key]
    port = free_port()
    with files_kept(lab.SYSTEM_CONFIG), contextlib.ExitStack() as stack:
        stack.callback(_stop_hub, system_venv, env, cluster_env)
        added = _sandbox(system_venv, "add-user", "--students", str(roster), "--create", env=env)
        assert added.returncode == 0, f"add-user failed:\n{added.stdout}\n{added.stderr}"
        for name in STUDENTS:
            assert f"{name}: password set from the students file" in added.stdout, added.stdout
            assert passwords[name] not in added.stdout + added.stderr  # never printed
            home = os.stat(pwd.getpwnam(name).pw_dir)
            assert stat.S_IMODE(home.st_mode) == 0o700, f"{name}'s home is {stat.S_IMODE(home.st_mode):o}"
        up = _sandbox(system_venv, "up", "--lab", "--hub", "--hub-port", str(port),
                      "--cull-timeout", str(CULL_TIMEOUT), "--config", str(work / "root-tiers.yaml"), env=env)
        assert up.returncode == 0, f"sandbox up --lab --hub failed:\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}"
        assert f"hub: running at http://127.0.0.1:{port}/" in up.stdout, up.stdout[-2000:]
        yield Hub(f"http://127.0.0.1:{port}", work / "state", system_venv, passwords, env)


def _stop_hub(venv: Path, env: dict[str, str], cluster_env: dict[str, str]) -> None:
    down = _sandbox(venv, "down", "--hub", env=env, timeout=180)
    print(f"[class hub] sandbox down --hub: {down.stdout.strip()} {down.stderr.strip()}")
    subprocess.run(["scancel", "-u", ",".join(STUDENTS)], capture_output=True, check=False,
                   env={**os.environ, "SLURM_CONF": cluster_env["SLURM_CONF"]})


def login(hub: Hub, name: str) -> Any:
    """A browser's session: the hub's login form posted with its XSRF cookie, then the student's
    server waited for (the hub spawns it on login) until its own API answers through the proxy."""
    import requests

    session = requests.Session()
    form = session.get(f"{hub.url}/hub/login", timeout=60)
    assert form.status_code == 200, form.text[:500]
    xsrf = session.cookies.get("_xsrf", path="/hub/") or session.cookies.get("_xsrf")
    posted = session.post(f"{hub.url}/hub/login?next=", timeout=120,
                          data={"username": name, "password": hub.passwords[name], "_xsrf": xsrf})
    assert posted.status_code == 200, f"login as {name}: {posted.status_code} {posted.url}\n{hub.log_tail()}"

    def ready() -> bool:
        try:
            answer = session.get(f"{hub.url}/user/{name}/lab", timeout=60)
        except requests.RequestException:
            return False
        return answer.status_code == 200 and answer.url.startswith(f"{hub.url}/user/{name}/")

    wait_for(ready, f"{name}'s server behind the hub", timeout=SERVER_START_S + 240, interval=2.0)
    return session


def user_api(hub: Hub, session: Any, name: str, path: str, method: str = "GET", **kw: Any) -> Any:
    headers = dict(kw.pop("headers", {}))
    return session.request(method, f"{hub.url}/user/{name}/{path}", headers=headers, timeout=120, **kw)


def _xsrf(session: Any, name: str) -> str:
    for cookie in session.cookies:
        if cookie.name == "_xsrf" and cookie.path.startswith(f"/user/{name}"):
            return str(cookie.value)
    raise AssertionError(f"no _xsrf cookie of /user/{name}/ in {[(c.name, c.path) for c in session.cookies]}")


@pytest.mark.timeout(1800)
def test_students_log_in_through_the_hub_and_reach_only_their_own_server(class_hub: Hub) -> None:
    hub = class_hub
    one, two = STUDENTS
    s1 = login(hub, one)
    s2 = login(hub, two)
    status = _sandbox(hub.venv, "status", env=hub.env, timeout=300).stdout
    for name in STUDENTS:
        assert re.search(rf"^\s+{name}\s+logged in, server ready", status, re.M), status
    # The server runs as the student, from the class's venv.
    for name in STUDENTS:
        info = user_api(hub, s1 if name == one else s2, name, "api/status").json()
        assert "last_activity" in info, info
    ps = subprocess.run(["ps", "-ww", "-o", "user=,args=", "-u", ",".join(STUDENTS)], capture_output=True,
                        text=True, check=False).stdout
    for name in STUDENTS:
        venv = re.escape(str(hub.venv))
        assert re.search(rf"^{name}\s+\S*{venv}/bin/\S*python\S* \S*jupyterhub-singleuser", ps, re.M), ps

    # The Tiers REST API through the proxy, as the student.
    jobs = user_api(hub, s1, one, f"{API}/jobs?refresh=0")
    assert jobs.status_code == 200, jobs.text[:500]
    assert {"items", "errors"} <= set(jobs.json())
    profiles = user_api(hub, s1, one, f"{API}/profiles").json()
    assert "sandbox" in json.dumps(profiles), profiles
    # A POST needs the server's XSRF token with the cookie login: without it 403, with it the route.
    cancel = f"{API}/jobs/sandbox/999999999/cancel"
    refused = user_api(hub, s1, one, cancel, "POST")
    assert refused.status_code == 403, (refused.status_code, refused.text[:300])
    done = user_api(hub, s1, one, cancel, "POST", headers={"X-XSRFToken": _xsrf(s1, one)})
    assert done.status_code not in (401, 403) and "error" in done.json(), (done.status_code, done.text[:300])

    # One student cannot reach the other's server (nor its jobs), though both servers run.
    other = user_api(hub, s1, two, f"{API}/jobs?refresh=0")
    assert other.status_code == 403, (other.status_code, other.url, other.text[:300])
    assert "items" not in other.text
    assert user_api(hub, s1, two, f"{API}/jobs", "POST").status_code in (403, 405)

    # Our routes do not count as the student's activity: the server's own last_activity (what it
    # reports to the hub, and so what the culler reads) does not move while only they are called.
    before = user_api(hub, s1, one, "api/status").json()["last_activity"]
    time.sleep(1.5)  # a later clock reading than `before`, not a bound on anything
    for _ in range(3):
        for path in (f"{API}/jobs?refresh=0", f"{API}/jobs", f"{API}/profiles", f"{API}/stats"):
            assert user_api(hub, s1, one, path).status_code in (200, 409), path
    after = user_api(hub, s1, one, "api/status").json()["last_activity"]
    assert after == before, f"our routes moved the server's last_activity: {before} -> {after}"


JOB = textwrap.dedent("""\
    import os, pathlib, time
    flag = pathlib.Path(os.path.expanduser("~/hub-cull-release"))
    print("line 1: started", flush=True)
    while not flag.exists():
        time.sleep(2)
    print("line 2: released", flush=True)
    print("line 3: done", flush=True)
""")



def _as_student(hub: Hub, name: str, argv: list[str],
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    home = pwd.getpwnam(name).pw_dir
    env = ["env", "-i", f"HOME={home}", f"USER={name}", f"LOGNAME={name}", "LC_ALL=C.UTF-8",
           f"PATH={hub.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "JUPYTER_TIERS_DISPLAY=text"]
    return subprocess.run(["runuser", "-u", name, "--", *env, *argv], cwd=home, capture_output=True,
                          text=True, timeout=timeout, check=False)


#: The other student's cells after the lab's first ones: a job that leaves a file, a service of
#: the class's serving profile (its Try it and Load panel), and the service's delete.
BEHIND_THE_HUB = [
    "%%slurm_train --profile {profile} --name hub-files --wait\n"
    "import pathlib\npathlib.Path('result.txt').write_text('42\\n')\n",
    "%%k8s_serve --profile {serve_profile} --name hub-web\n" + COUNT_BODY,
    "%k8s_serve --profile {serve_profile} --name hub-web --delete",
]


def _lab_notebook(name: str, cluster_env: dict[str, str], then: list[str] | None = None) -> Path:
    """The teaching lab's first cells (parameters, %load_ext, the gang job) and then the cells
    ``then`` (by default a job that waits for a flag file), as a notebook in the student's home
    (theirs)."""
    shipped = nbformat.read(EXAMPLES / "teaching_lab.ipynb", as_version=4)
    code = [c for c in shipped.cells if c.cell_type == "code"]
    tags = [c.metadata["tags"][0] for c in code[:3]]
    assert tags == ["parameters", "load", "gang"], tags
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nodes = int(cluster_env["JT_CLUSTER_NODES"])
    params = f'profile = "sandbox"\nnodes = {nodes}\nserve_profile = "sandbox-serve"'
    nb.cells = [nbformat.v4.new_code_cell(params), *(nbformat.v4.new_code_cell(c.source) for c in code[1:3]),
                *(nbformat.v4.new_code_cell(source) for source in
                  (then or ["%%slurm_train --profile {profile} --name hub-cull\n" + JOB]))]
    pw = pwd.getpwnam(name)
    path = Path(pw.pw_dir) / "hub-lab.ipynb"
    nbformat.write(nb, path)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    return path


def _submit_login(page: Any, hub: Hub, name: str) -> None:
    """Fill and send the hub's login form (the lab then loads: :func:`_lab_loaded`)."""
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", hub.passwords[name])
    page.click("#login_submit")


def _lab_loaded(page: Any, name: str) -> None:
    page.wait_for_url(re.compile(rf"/user/{re.escape(name)}/lab"), timeout=(SERVER_START_S + 240) * 1000)


def _browser_login(page: Any, hub: Hub, name: str) -> None:
    _submit_login(page, hub, name)
    _lab_loaded(page, name)


def _sidebar_rows(page: Any) -> Any:
    """The Tiers sidebar opened; its job rows."""
    from playwright.sync_api import expect

    tab = page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]')
    expect(tab).to_be_visible()
    if tab.get_attribute("aria-selected") != "true":
        tab.click()
    return page.locator(f"#{SIDEBAR_ID} .jt-side-row")


@pytest.mark.timeout(2400)
def test_a_students_whole_path_and_culling_that_loses_nothing(
        class_hub: Hub, cluster_env: dict[str, str], page: Any) -> None:
    """Two students log in through the hub's page in Chromium at once, each runs the lab
    notebook's first cells and sees only their own jobs in the sidebar. One then runs a job,
    watches it, closes the tab and logs out: the idle culler stops the server while the job runs
    (the widget left following it goes quiet: it kept the server busy before); the job goes on;
    logging in again, the sidebar lists the job with its end and `jupyter tiers attach` has all
    its lines."""
    from playwright.sync_api import expect

    from .test_job_widget import job_id_of, open_notebook_at, run_cell
    from .test_load_panel import set_value
    from .test_try_it_widget import send

    hub = class_hub
    name = STUDENTS[1]
    home = Path(pwd.getpwnam(name).pw_dir)
    flag = home / "hub-cull-release"
    flag.unlink(missing_ok=True)
    notebook = _lab_notebook(name, cluster_env)
    slurm = {**os.environ, "SLURM_CONF": cluster_env["SLURM_CONF"]}

    # Two students log in at once, each in a browser of their own (no shared cookie): both forms
    # are sent before either lab is waited for; each opens the lab notebook and runs its first
    # cells, the two gang jobs submitted together (the second waits for the cluster's nodes).
    other = STUDENTS[0]
    other_notebook = _lab_notebook(other, cluster_env, BEHIND_THE_HUB)
    other_context = page.context.browser.new_context(viewport={"width": 1280, "height": 1000})
    other_context.set_default_timeout(UI_TIMEOUT_MS)
    other_page = other_context.new_page()
    other_errors: list[str] = []
    other_page.on("pageerror", lambda exc: other_errors.append(str(exc)))
    students = ((page, name, notebook), (other_page, other, other_notebook))
    for pg, who, _nb in students:
        _submit_login(pg, hub, who)
    for pg, who, _nb in students:
        _lab_loaded(pg, who)
    opened = [open_notebook_at(pg, f"{hub.url}/user/{who}/lab/tree/{nb.name}?reset")
              for pg, who, nb in students]
    for (pg, _who, _nb), its_cells in zip(students, opened, strict=True):
        for index in range(2):  # parameters, %load_ext
            run_cell(pg, its_cells, index)
    for (pg, _who, _nb), its_cells in zip(students, opened, strict=True):
        its_cells.nth(2).locator(".cm-content").click()  # the 4-node gang job (--wait), both at once
        pg.keyboard.press("Shift+Enter")
    gangs = [its_cells.nth(2).locator(".jt-job") for its_cells in opened]
    for gang in gangs:
        expect(gang.locator(".jt-state")).to_have_text("COMPLETED", timeout=600_000)
    mine, theirs = (job_id_of(gang) for gang in gangs)
    # Each sees only their own jobs in the sidebar.
    for pg, own, foreign in ((page, mine, theirs), (other_page, theirs, mine)):
        rows = _sidebar_rows(pg)
        expect(rows.and_(pg.locator(f'[data-key="sandbox/{own}"]'))).to_have_count(1)  # listed: loaded
        expect(rows.and_(pg.locator(f'[data-key="sandbox/{foreign}"]'))).to_have_count(0)
    # Behind the hub, the other student's job's Files tab, and a service's Try it and Load panel.
    other_cells = opened[1]
    files = run_cell(other_page, other_cells, 3).locator(".jt-job")
    expect(files.locator(".jt-state")).to_have_text("COMPLETED", timeout=600_000)
    files.locator(".jt-files-toggle").click()
    expect(files.locator(".jt-file-name").filter(has_text="result.txt")).to_have_count(1)
    web = run_cell(other_page, other_cells, 4).locator(".jt-serve")
    expect(web.locator(".jt-ready-count")).to_have_text("READY 1/1", timeout=300_000)
    web.locator(".jt-try-toggle").click()
    send(web, "GET", "/hello")
    expect(web.locator(".jt-try-result .jt-try-status")).to_have_text("200 OK")
    load = web.locator("details.jt-load")
    load.locator("summary").click()
    set_value(load, ".jt-load-path", "/hello")
    set_value(load, ".jt-load-rps", "5")
    set_value(load, ".jt-load-seconds", "2")
    load.locator(".jt-load-start").click()
    expect(load.locator(".jt-load-state")).to_have_text("done", timeout=300_000)
    run_cell(other_page, other_cells, 5)  # the service deleted
    expect(web.locator(".jt-ready-count")).not_to_have_text("READY 1/1", timeout=300_000)
    assert other_errors == [], other_errors
    other_context.close()
    cells = opened[0]
    widget = run_cell(page, cells, 3).locator(".jt-job")
    job_id = job_id_of(widget)
    expect(widget.locator(".jt-state")).to_have_text("RUNNING", timeout=600_000)
    expect(widget.locator(".jt-log")).to_contain_text("line 1: started", timeout=600_000)
    assert page.jt_errors == [], page.jt_errors

    def state() -> str:
        return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=slurm, capture_output=True,
                              text=True, check=False).stdout.strip()

    # The student closes the tab (its notebook unsaved: a navigation away would stop at
    # JupyterLab's "leave the page?") and logs out; the kernel and its widget stay on the server.
    context = page.context
    page.close()
    logout = context.request.get(f"{hub.url}/hub/logout")
    assert logout.ok, (logout.status, logout.url)
    home = context.request.get(f"{hub.url}/hub/home")  # logged out: the hub asks to log in
    assert "/hub/login" in home.url, (home.status, home.url)
    wait_for(lambda: hub.server(name) is None, f"the culler to stop {name}'s server while job {job_id} runs",
             timeout=CULL_TIMEOUT + UNSEEN_AFTER + 900, interval=5.0)
    culled = rf"DELETE /hub/api/users/{re.escape(name)}/server .*\(idle-culler@"
    assert re.search(culled, hub.log_tail(400)), hub.log_tail()
    assert state() == "RUNNING", f"job {job_id} did not go on after the cull: {state()!r}"

    _as_student(hub, name, ["touch", str(flag)])
    wait_for(lambda: state() == "", f"job {job_id} to end", timeout=600, interval=3.0)
    # Back again, in a new tab: the hub's login page, a new server, the sidebar with the job's end.
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _browser_login(page, hub, name)
    _sidebar_rows(page)
    row = page.locator(f'#{SIDEBAR_ID} .jt-side-row[data-key="sandbox/{job_id}"]')
    expect(row.locator(".jt-side-badge")).to_have_text("COMPLETED", timeout=300_000)
    assert errors == [], errors
    attach = _as_student(hub, name, [str(hub.venv / "bin" / "jupyter"), "tiers", "attach", job_id,
                                     "--wait"])
    assert attach.returncode == 0, attach.stdout[-2000:] + attach.stderr[-2000:]
    for line in ("line 1: started", "line 2: released", "line 3: done"):
        assert line in attach.stdout, attach.stdout[-3000:]
    assert "COMPLETED" in attach.stdout, attach.stdout[-3000:]
    flag.unlink(missing_ok=True)
