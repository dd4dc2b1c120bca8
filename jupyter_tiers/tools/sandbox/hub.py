"""The class's JupyterHub on the lab machine: ``jupyter tiers sandbox up --lab --hub``.

A real JupyterHub (the ``jupyterhub`` package, installed with ``jupyterhub-idle-culler`` in the
class's venv: the root-owned venv whose ``jupyter tiers`` runs this) behind configurable-http-proxy
from npm (installed once under :func:`proxy_dir`, :func:`ensure_proxy`, with ``npm ci`` from the
committed ``proxy/package.json`` and ``proxy/package-lock.json`` beside this file: every transitive
version and its integrity hash pinned, no install scripts run):

- PAM logs the students in with their Unix passwords (``sandbox add-user``), members of the Unix
  group :data:`students.STUDENTS_GROUP` only;
- the local process spawner runs each student's JupyterLab as that student (their uid, their
  0700 home) from the class's venv (``jupyterhub-singleuser``), so the Tiers sidebar and the
  magics use the lab profile in /etc/jupyter/tiers.yaml as the student;
- the idle culler stops a server idle for :data:`CULL_TIMEOUT` seconds (The Littlest
  JupyterHub's default), checking every :data:`CULL_EVERY` (never more than half the timeout).

Its state (generated config, database, cookie secret, pid and log files, the token
``sandbox status`` reads the hub's REST API with) lives in :func:`hub_dir`, root's and 0700.
``sandbox down --hub`` stops the hub (and with it the proxy and the students' servers);
``sandbox down`` stops the hub, then the cluster.

The pure parts, :func:`hub_config` (the config file's text) and :func:`render_status`, are
separate from the commands that run.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .lab import LabError, trusted_path_problem
from .students import STUDENTS_GROUP, students_group_members

PROXY_PACKAGE = "configurable-http-proxy"
PROXY_VERSION = "4.6.3"  # as proxy/package.json pins it (tests/cluster/test_hub_unit.py checks)
#: The committed npm project the proxy is installed from: package.json and its package-lock.json
#: (made with ``npm install --package-lock-only``; renew both together).
PROXY_PROJECT = Path(__file__).with_name("proxy")
PROXY_FILES = ("package.json", "package-lock.json")
CULL_TIMEOUT = 600
CULL_EVERY = 60
DEFAULT_PORT = 8000
START_TIMEOUT_S = 180.0
STATUS_SERVICE = "jt-status"
_NPM_PATH = "/usr/local/bin:/usr/bin:/bin"


def hub_dir() -> Path:
    """The hub's state (root's, 0700); ``JT_HUB_DIR`` moves it."""
    return Path(os.environ.get("JT_HUB_DIR", "/var/lib/jupyter-tiers-hub"))


def proxy_dir() -> Path:
    """Where npm installs configurable-http-proxy (kept across hubs); ``JT_HUB_PROXY_DIR`` moves it."""
    return Path(os.environ.get("JT_HUB_PROXY_DIR", "/var/lib/jupyter-tiers-hub-proxy"))


@dataclass(frozen=True)
class HubSettings:
    """What the admin chooses (``--hub-ip``, ``--hub-port``, ``--cull-timeout``) and what the
    start finds: the class's venv, the proxy, two free loopback ports for the hub's and the
    proxy's own APIs."""

    venv: str
    proxy: str
    ip: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    hub_api_port: int = 0
    proxy_api_port: int = 0
    cull_timeout: int = CULL_TIMEOUT
    cull_every: int = CULL_EVERY
    group: str = "jtlab"
    state: str = "/var/lib/jupyter-tiers-hub"
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.ip in ("", "0.0.0.0") else self.ip
        return f"http://{host}:{self.port}"


def check_cull_timeout(value: Any) -> int:
    """``value`` as a culler timeout in seconds (60 to 7 days), else a LabError."""
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        raise LabError(f"--cull-timeout takes whole seconds, not {str(value)[:40]!r}") from None
    if not 60 <= seconds <= 7 * 86400:
        raise LabError(f"--cull-timeout must be 60 to 604800 seconds (10 minutes is 600), not {seconds}")
    return seconds


def cull_every_for(timeout: int) -> int:
    """How often the culler looks: :data:`CULL_EVERY`, or half a shorter timeout (at least 10 s)."""
    return max(10, min(CULL_EVERY, timeout // 2))


def hub_config(s: HubSettings) -> str:
    """The text of ``jupyterhub_config.py`` for ``s``: every value written with ``repr`` (no value
    is ever pasted into code), the status service's token read from its 0600 file at load time."""
    py = str(Path(s.venv) / "bin" / "python")
    path = f"{Path(s.venv) / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    state = Path(s.state)
    culler = [py, "-m", "jupyterhub_idle_culler", f"--timeout={s.cull_timeout}",
              f"--cull-every={s.cull_every}"]
    env = {"PATH": path, **s.extra_env}
    lines = [
        "# Written by jupyter tiers sandbox up --lab --hub; rewritten at every start.",
        "from pathlib import Path",
        "c = get_config()  # noqa",
        f"c.JupyterHub.bind_url = {f'http://{s.ip}:{s.port}/'!r}",
        f"c.JupyterHub.hub_bind_url = {f'http://127.0.0.1:{s.hub_api_port}'!r}",
        f"c.ConfigurableHTTPProxy.api_url = {f'http://127.0.0.1:{s.proxy_api_port}'!r}",
        f"c.ConfigurableHTTPProxy.command = {[s.proxy]!r}",
        f"c.ConfigurableHTTPProxy.pid_file = {str(state / 'proxy.pid')!r}",
        "c.ConfigurableHTTPProxy.should_start = True",
        f"c.JupyterHub.pid_file = {str(state / 'jupyterhub.pid')!r}",
        f"c.JupyterHub.db_url = {'sqlite:///' + str(state / 'jupyterhub.sqlite')!r}",
        f"c.JupyterHub.cookie_secret_file = {str(state / 'jupyterhub_cookie_secret')!r}",
        # Students log in with their Unix password; only the class's group may.
        "c.JupyterHub.authenticator_class = 'pam'",
        f"c.PAMAuthenticator.allowed_groups = {{{s.group!r}}}",
        "c.PAMAuthenticator.open_sessions = False",
        # Each student's JupyterLab as that student, from the class's venv, in their home.
        "c.JupyterHub.spawner_class = 'localprocess'",
        f"c.Spawner.cmd = {[str(Path(s.venv) / 'bin' / 'jupyterhub-singleuser')]!r}",
        "c.Spawner.default_url = '/lab'",
        "c.Spawner.notebook_dir = '~'",
        f"c.Spawner.environment = {env!r}",
        "c.Spawner.start_timeout = 120",
        "c.Spawner.http_timeout = 120",
        "c.JupyterHub.cleanup_servers = True",
        "c.JupyterHub.services = [",
        f"    {{'name': 'idle-culler', 'command': {culler!r}}},",
        f"    {{'name': {STATUS_SERVICE!r},",
        f"     'api_token': Path({str(state / 'status.token')!r}).read_text().strip()}},",
        "]",
        "c.JupyterHub.load_roles = [",
        "    {'name': 'idle-culler', 'services': ['idle-culler'],",
        "     'scopes': ['list:users', 'read:users:activity', 'read:servers', 'delete:servers']},",
        f"    {{'name': 'jt-status', 'services': [{STATUS_SERVICE!r}],",
        "     'scopes': ['list:users', 'read:users', 'read:servers']},",
        "]",
    ]
    return "\n".join(lines) + "\n"


def render_status(url: str | None, running: bool, students: Iterable[str],
                  users: list[dict[str, Any]] | None, problem: str | None = None) -> str:
    """``sandbox status``'s hub part: the hub, then one line per student (the Unix group's
    members and anyone the hub knows), with their server and last activity. ``users`` is the
    hub's ``GET /hub/api/users`` answer, or None when it could not be read."""
    if not running:
        return "hub: not running (start it: jupyter tiers sandbox up --lab --hub)\n"
    out = [f"hub: running at {url}/ (your students open this URL)"]
    if problem:
        out.append(f"  cannot read the hub's users: {problem}")
    known = {str(u.get("name")): u for u in users or [] if isinstance(u, dict)}
    names = sorted(set(students) | set(known))
    if not names:
        out.append("  no students yet (add them: jupyter tiers sandbox add-user --students FILE)")
    for name in names:
        user = known.get(name)
        if user is None:
            out.append(f"  {name:<20} never logged in")
            continue
        server = (user.get("servers") or {}).get("") if isinstance(user.get("servers"), dict) else None
        last = user.get("last_activity") or "-"
        if isinstance(server, dict):
            state = "server ready" if server.get("ready") else "server starting"
            if server.get("stopped") is True:
                state = "server stopping"
            out.append(f"  {name:<20} logged in, {state} since {server.get('started') or '-'}, "
                       f"last activity {server.get('last_activity') or last}")
        else:
            out.append(f"  {name:<20} no server (last activity {last})")
    return "\n".join(out) + "\n"


# --- this machine (root) -----------------------------------------------------------------------

def installed_proxy(directory: Path | None = None) -> Path | None:
    """The configurable-http-proxy of :data:`PROXY_VERSION` under ``directory``, if installed
    from this package's lockfile (its package.json and package-lock.json there, the same bytes)."""
    directory = directory or proxy_dir()
    package = directory / "node_modules" / PROXY_PACKAGE / "package.json"
    try:
        version = json.loads(package.read_text()).get("version")
        same = all((directory / name).read_bytes() == (PROXY_PROJECT / name).read_bytes()
                   for name in PROXY_FILES)
    except (OSError, ValueError):
        return None
    binary = directory / "node_modules" / ".bin" / PROXY_PACKAGE
    return binary if same and version == PROXY_VERSION and binary.exists() else None


def proxy_install_argv(npm: str, directory: Path) -> list[str]:
    """``npm ci`` in ``directory``: exactly the lockfile's packages, checked against its integrity
    hashes (npm refuses a lockfile that does not match package.json), none of their scripts run."""
    return [npm, "ci", "--prefix", str(directory), "--no-audit", "--no-fund", "--omit=dev",
            "--ignore-scripts"]


def ensure_proxy(directory: Path | None = None, say: Callable[[str], None] = print) -> Path:
    """configurable-http-proxy :data:`PROXY_VERSION` under ``directory``: installed once with
    :func:`proxy_install_argv` from the committed lockfile, then kept (not fetched again while it is
    the lockfile's)."""
    directory = directory or proxy_dir()
    found = installed_proxy(directory)
    if found is not None:
        return found
    npm = shutil.which("npm", path=f"{os.environ.get('PATH', '')}:{_NPM_PATH}")
    if npm is None or shutil.which("node", path=f"{os.environ.get('PATH', '')}:{_NPM_PATH}") is None:
        raise LabError("the hub's proxy needs Node.js and npm (Debian: apt-get install nodejs npm)")
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    for name in PROXY_FILES:  # replaced whole (a link planted there is replaced, not followed)
        tmp = directory / f".{name}.new"
        tmp.unlink(missing_ok=True)
        tmp.write_bytes((PROXY_PROJECT / name).read_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, directory / name)
    say(f"installing {PROXY_PACKAGE}@{PROXY_VERSION} with npm ci (package-lock.json) into {directory}")
    done = subprocess.run(proxy_install_argv(npm, directory),
                          capture_output=True, text=True, timeout=900, check=False,
                          stdin=subprocess.DEVNULL)
    found = installed_proxy(directory)
    if done.returncode != 0 or found is None:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise LabError(f"npm ci {PROXY_PACKAGE} failed: {said[-1][:300] if said else 'no output'}")
    return found


def class_venv() -> str:
    """This Python's venv, if every student may run it and nobody but root may change it (its
    interpreter, ``jupyterhub-singleuser``), else a LabError saying what is wrong."""
    if sys.prefix == sys.base_prefix:
        raise LabError("the hub runs the students' JupyterLab from the class's venv: run "
                       "'jupyter tiers sandbox up --lab --hub' with that venv's jupyter")
    venv = Path(sys.prefix)
    for path, want in ((Path(sys.executable), "exec"), (venv / "bin" / "jupyterhub-singleuser", "exec"),
                       (venv / "pyvenv.cfg", "read")):
        problem = trusted_path_problem(path, want)
        if problem:
            raise LabError(f"the class's venv {venv} is not safe for the students' servers: {problem}")
    for module in ("jupyterhub", "jupyterhub_idle_culler"):
        try:
            __import__(module)
        except ImportError:
            raise LabError(f"{module} is not installed in {venv}: pip install jupyterhub "
                           "jupyterhub-idle-culler") from None
    return str(venv)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _settings_path() -> Path:
    return hub_dir() / "settings.json"


def saved_settings() -> HubSettings | None:
    """The settings of the last start (None if never started or unreadable)."""
    try:
        return HubSettings(**json.loads(_settings_path().read_text()))
    except (OSError, ValueError, TypeError):
        return None


def running_pid() -> int | None:
    """The hub's pid if it runs."""
    return _pid(hub_dir() / "jupyterhub.pid")


def api(settings: HubSettings, path: str, timeout: float = 10) -> Any:
    """GET ``/hub/api{path}`` with the status service's token."""
    token = (Path(settings.state) / "status.token").read_text().strip()
    request = urllib.request.Request(f"{settings.url}/hub/api{path}",
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


def start(*, ip: str = "127.0.0.1", port: int = DEFAULT_PORT, cull_timeout: int = CULL_TIMEOUT,
          say: Callable[[str], None] = print) -> HubSettings:
    """Start the hub (stopping one already running: a new start takes new settings) and wait
    until its API answers. Returns what it runs with."""
    if os.geteuid() != 0:
        raise LabError("the hub must run as root (PAM reads /etc/shadow; each server runs as its student)")
    venv = class_venv()
    proxy = ensure_proxy(say=say)
    stop(say=lambda _: None)
    state = hub_dir()
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    token = state / "status.token"
    if not token.is_file():
        token.touch(mode=0o600)
        token.write_text(secrets.token_hex(32) + "\n")
    settings = HubSettings(venv=venv, proxy=str(proxy), ip=ip, port=port, hub_api_port=free_port(),
                           proxy_api_port=free_port(), cull_timeout=cull_timeout,
                           cull_every=cull_every_for(cull_timeout), group=STUDENTS_GROUP, state=str(state),
                           extra_env=_passed_env())
    (state / "jupyterhub_config.py").write_text(hub_config(settings))
    _settings_path().write_text(json.dumps(asdict(settings)))
    log = state / "jupyterhub.log"
    env = {"PATH": f"{Path(venv) / 'bin'}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL": "C.UTF-8",
           "HOME": "/root", **settings.extra_env}
    with log.open("ab") as out:
        proc = subprocess.Popen([str(Path(venv) / "bin" / "python"), "-m", "jupyterhub", "-f",
                                 str(state / "jupyterhub_config.py")], cwd=state, env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise LabError(f"jupyterhub exited with {proc.returncode}: see {log}:\n{_tail(log)}")
        try:
            api(settings, "/")
            break
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise LabError(f"jupyterhub did not answer within {START_TIMEOUT_S:.0f}s: see {log}")
        time.sleep(0.5)
    say(f"hub: running at {settings.url}/ (your students open this URL; log: {log}); idle servers "
        f"are stopped after {cull_timeout} s")
    return settings


#: Settings passed from the admin's environment to the students' servers, when set to a number
#: of seconds: how often a server reports its activity to the hub, and how long a live widget no
#: page shows keeps sending (faces/widgets/view_common.py). Tests shorten both.
PASSED_ENV = ("JUPYTERHUB_ACTIVITY_INTERVAL", "JUPYTER_TIERS_UNSEEN_AFTER")


def _passed_env() -> dict[str, str]:
    """:data:`PASSED_ENV` from the admin's environment, those set to a whole number of seconds."""
    return {name: value for name in PASSED_ENV if (value := os.environ.get(name, "")).isdigit()}


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return True
        time.sleep(0.3)
    return False


def stop(say: Callable[[str], None] = print) -> bool:
    """Stop the hub (it stops the students' servers and its proxy); whether one ran."""
    state = hub_dir()
    pid = running_pid()
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, 60):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 10)
    proxy = _pid(state / "proxy.pid")  # a proxy left behind by a hub that was killed
    if proxy is not None:
        os.kill(proxy, signal.SIGTERM)
        _wait_gone(proxy, 10)
    say("hub: stopped" if pid is not None else "hub: was not running")
    return pid is not None


def status_text() -> str:
    """``sandbox status``'s hub part (see :func:`render_status`)."""
    settings = saved_settings()
    if running_pid() is None or settings is None:
        return render_status(None, False, [], None)
    users, problem = None, None
    try:
        users = api(settings, "/users")
    except (OSError, ValueError, urllib.error.URLError) as exc:
        problem = str(exc)[:200]
    return render_status(settings.url, True, students_group_members(), users, problem)
