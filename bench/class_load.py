"""A class on the hub, measured (issue 30 item 4): N students at once, what slurmctld, the hub and
each student's server carry.

For each N in ``--students`` (default 1,10,30) the bench, as root on the machine of the Slurm test
cluster:

1. makes N students (``jupyter tiers sandbox add-user --students FILE --create``, from the class's
   venv) and starts the class's hub (``sandbox up --lab --hub``: JupyterHub, configurable-http-proxy,
   PAM, the local spawner);
2. logs every student in at once through the hub's login form (as a browser posts it) and waits for
   each student's JupyterLab behind the proxy (time to a ready server);
3. in every student's own server, starts a kernel over its REST API and websocket (as the notebook
   page does) and opens the Tiers sidebar's events socket;
4. **watch load**: each kernel submits ``J`` held jobs of its own (for each J in ``--jobs``,
   default 1,4) and follows them as a live view does (``job.watch()``), the sidebar open; for
   ``--window`` seconds (default 120) slurmctld's RPCs are counted by user with ``sdiag``: the
   per-student and total rate, which must grow with students and not with jobs per student;
5. **the lab**: every student runs the teaching-lab notebook's first ``--cells`` code cells
   (default 8: load, the 4-node gang job, placement, a held job's reason and its cancel) at the
   same time: time from a job cell's start to its first log line in the cell's output, whether
   each cell ended as it should, and the RPC rate over the run;
6. reports the hub's, the proxy's and each student's (server + kernel) memory (RSS).

The students and their Slurm associations stay for the next run (as the tests' do); the hub is
stopped and /etc/jupyter/tiers.yaml put back. Results as Markdown tables on stdout.

Run (root, the Slurm test cluster up, the class's venv made by the class-hub or student-lab tests
under /opt/jt-lab-venv, or given with --venv):

    .venv/bin/python bench/class_load.py [--students 1,10,30] [--jobs 1,4] [--window 120]
                                         [--cells 8] [--venv /opt/jt-lab-venv/KEY]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import requests
from _cluster import ROOT, cluster_env
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from jupyter_tiers.tools.sandbox import lab
from jupyter_tiers.tools.sandbox.files import files_kept

STUDENT_PREFIX = "jt-cl"
VENV_ROOT = Path(os.environ.get("JT_LAB_VENV_ROOT", "/opt/jt-lab-venv"))
SERVER_READY_S = 600.0
CELL_TIMEOUT_S = 1800.0
# The sidebar's websocket (faces/server/handlers.py: url_path_join(base, "events")).
EVENTS = "jupyter-tiers/api/events"
JOB_LINE = re.compile(r"^\d+: ", re.M)  # a rank's log line as the text view prints it


@dataclass
class Student:
    name: str
    password: str
    session: requests.Session | None = None
    ready_s: float | None = None
    kernel: str | None = None
    socket: WebSocketClientConnection | None = None
    events: WebSocketClientConnection | None = None
    errors: list[str] = field(default_factory=list)
    first_line_s: list[float] = field(default_factory=list)

    def cookies(self, path: str) -> str:
        assert self.session is not None
        return "; ".join(f"{c.name}={c.value}" for c in self.session.cookies
                         if path.startswith(c.path or "/"))

    def xsrf(self) -> str:
        assert self.session is not None
        for c in self.session.cookies:
            if c.name == "_xsrf" and (c.path or "").startswith(f"/user/{self.name}"):
                return str(c.value)
        raise RuntimeError(f"{self.name}: no _xsrf cookie of the server")


def sh(argv: list[str], env: dict[str, str] | None = None, timeout: float = 900) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(argv[:4])} ...` failed ({done.returncode}):\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def find_venv(given: str | None) -> Path:
    if given:
        venv = Path(given)
    else:
        made = sorted((p for p in VENV_ROOT.glob("*") if (p / ".complete").is_file()),
                      key=lambda p: p.stat().st_mtime)
        if not made:
            raise SystemExit(f"no class venv under {VENV_ROOT}: run the class-hub test once "
                             "(pytest tests/browser/test_class_hub.py) or give --venv")
        venv = made[-1]
    if not (venv / "bin" / "jupyterhub").exists():
        raise SystemExit(f"{venv} has no jupyterhub: not a class venv")
    return venv


# --- slurmctld's RPCs by user --------------------------------------------------------------------

def rpcs_by_user(slurm_env: dict[str, str]) -> dict[str, int]:
    """sdiag's 'Remote Procedure Call statistics by user' counts."""
    out = sh(["sdiag"], env=slurm_env)
    section = out.split("Remote Procedure Call statistics by user", 1)[-1]
    section = section.split("Pending RPC statistics", 1)[0]
    counts: dict[str, int] = {}
    for line in section.splitlines():
        m = re.match(r"\s*(\S+)\s*\(\s*\d+\)\s*count:(\d+)", line)
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def delta(before: dict[str, int], after: dict[str, int], names: list[str]) -> dict[str, int]:
    return {n: after.get(n, 0) - before.get(n, 0) for n in names}


# --- memory ------------------------------------------------------------------------------------

def rss_mib_by_user() -> dict[str, float]:
    out = subprocess.run(["ps", "-e", "-o", "user:32=,rss=,args="], capture_output=True, text=True,
                         check=False).stdout
    by: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[1].isdigit():
            by[parts[0]] = by.get(parts[0], 0.0) + int(parts[1]) / 1024
    return by


def rss_mib_of(pattern: str) -> float:
    out = subprocess.run(["ps", "-e", "-o", "rss=,args="], capture_output=True, text=True,
                         check=False).stdout
    return sum(int(line.split(None, 1)[0]) / 1024 for line in out.splitlines()
               if re.search(pattern, line) and "ps -e" not in line)


# --- the hub -----------------------------------------------------------------------------------

class ClassHub:
    def __init__(self, venv: Path, work: Path, students: list[Student]) -> None:
        self.venv, self.work, self.students = venv, work, students
        self.port = lab_free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {"PATH": f"{venv / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "HOME": "/root", "LC_ALL": "C.UTF-8", "JT_HUB_DIR": str(work / "state")}
        for key in ("JT_HUB_PROXY_DIR", "JT_CLUSTER_DIR"):
            if key in os.environ:
                self.env[key] = os.environ[key]

    def sandbox(self, *args: str, timeout: float = 1800) -> str:
        return sh([str(self.venv / "bin" / "jupyter"), "tiers", "sandbox", *args], env=self.env,
                  timeout=timeout)

    def up(self) -> None:
        roster = self.work / "students.txt"
        roster.write_text("".join(f"{s.name}:{s.password}\n" for s in self.students))
        os.chmod(roster, 0o600)
        self.sandbox("add-user", "--students", str(roster), "--create")
        self.sandbox("up", "--lab", "--hub", "--hub-port", str(self.port), "--cull-timeout", "3600",
                     "--config", str(self.work / "root-tiers.yaml"))

    def down(self) -> None:
        try:
            self.sandbox("down", "--hub", timeout=300)
        except SystemExit as exc:
            print(f"[class_load] sandbox down --hub: {exc}", file=sys.stderr)

    def login(self, student: Student) -> None:
        """The login form, as a browser posts it; then the student's server behind the proxy."""
        t0 = time.monotonic()
        session = requests.Session()
        session.get(f"{self.url}/hub/login", timeout=120).raise_for_status()
        xsrf = session.cookies.get("_xsrf", path="/hub/") or session.cookies.get("_xsrf")
        posted = session.post(f"{self.url}/hub/login?next=", timeout=300,
                              data={"username": student.name, "password": student.password, "_xsrf": xsrf})
        posted.raise_for_status()
        deadline = time.monotonic() + SERVER_READY_S
        while True:
            try:
                page = session.get(f"{self.url}/user/{student.name}/lab", timeout=120)
                if page.status_code == 200 and page.url.startswith(f"{self.url}/user/{student.name}/"):
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{student.name}'s server was not ready within {SERVER_READY_S:.0f} s")
            time.sleep(1.0)
        student.session = session
        student.ready_s = time.monotonic() - t0

    def user_url(self, student: Student, path: str, ws: bool = False) -> str:
        base = self.url.replace("http://", "ws://") if ws else self.url
        return f"{base}/user/{student.name}/{path}"


def lab_free_port() -> int:
    from jupyter_tiers.tools.sandbox.hub import free_port

    return free_port()


# --- a kernel over the server's websocket, as the notebook page drives it ------------------------

async def open_kernel(hub: ClassHub, student: Student) -> None:
    assert student.session is not None
    answer = student.session.post(hub.user_url(student, "api/kernels"), json={"name": "python3"},
                                  headers={"X-XSRFToken": student.xsrf()}, timeout=300)
    answer.raise_for_status()
    student.kernel = answer.json()["id"]
    path = f"/user/{student.name}/api/kernels/{student.kernel}/channels"
    channels = f"api/kernels/{student.kernel}/channels?session_id={uuid.uuid4().hex}"
    student.socket = await websocket_connect(HTTPRequest(
        hub.user_url(student, channels, ws=True), headers={"Cookie": student.cookies(path)}),
        max_message_size=64 << 20)
    events_path = f"/user/{student.name}/{EVENTS}"
    student.events = await websocket_connect(HTTPRequest(
        hub.user_url(student, EVENTS, ws=True), headers={"Cookie": student.cookies(events_path)}))
    asyncio.get_running_loop().create_task(drain(student.events))


async def drain(sock: WebSocketClientConnection) -> None:
    """Read the sidebar's events as the page does (and throw them away)."""
    while await sock.read_message() is not None:
        pass


async def execute(student: Student, code: str, *, expect_error: bool = False) -> tuple[str, float | None]:
    """Run ``code`` in the student's kernel; returns its stream output and the seconds from the
    request to the first job log line in it (None if none came). An error output is recorded
    unless expected."""
    assert student.socket is not None
    msg_id = uuid.uuid4().hex
    await student.socket.write_message(json.dumps({
        "header": {"msg_id": msg_id, "username": student.name, "session": student.kernel,
                   "msg_type": "execute_request", "version": "5.3",
                   "date": datetime.now(timezone.utc).isoformat()},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}}))
    started = time.monotonic()
    text: list[str] = []
    first: float | None = None
    replied = idle = False
    while not (replied and idle):
        raw = await asyncio.wait_for(student.socket.read_message(), CELL_TIMEOUT_S)
        if raw is None:
            raise RuntimeError(f"{student.name}: the kernel's socket closed")
        if not isinstance(raw, str):
            continue
        msg = json.loads(raw)
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, content = msg["header"]["msg_type"], msg.get("content", {})
        if kind == "stream":
            text.append(content.get("text", ""))
            if first is None and JOB_LINE.search(content.get("text", "")):
                first = time.monotonic() - started
        elif kind == "error" and not expect_error:
            student.errors.append(f"{content.get('ename')}: {content.get('evalue', '')[:200]}")
        elif kind == "execute_reply":
            replied = True
        elif kind == "status" and content.get("execution_state") == "idle":
            idle = True
    return "".join(text), first


# --- the phases ----------------------------------------------------------------------------------

SETUP = """\
import os
os.environ["JUPYTER_TIERS_DISPLAY"] = "text"  # the text view: lines in the cell's output
%load_ext jupyter_tiers
"""


def hold_cell(count: int) -> str:
    return f"""\
from jupyter_tiers.api import connect
_tier = connect("sandbox")
_held = [_tier.submit(_tier.make_spec("print('never')", name="held-{{}}".format(i),
                                      sbatch_options=["--hold"])) for i in range({count})]
_watching = [job.watch() for job in _held]  # as {count} live views follow them
print(len(_held), "held and watched")
"""


RELEASE = """\
for sub in _watching:
    sub.close()
for job in _held:
    job.cancel()
print("cancelled", len(_held))
"""


def lab_cells(count: int) -> list[tuple[str, str, bool]]:
    """(tag, code, expect_error) of the teaching lab's first ``count`` code cells."""
    nb = json.loads((ROOT / "examples" / "teaching_lab.ipynb").read_text())
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        tags = cell["metadata"].get("tags", [])
        cells.append((tags[0] if tags else "?", "".join(cell["source"]), "raises-exception" in tags))
    return cells[:count]


async def each(students: list[Student], make: Any) -> list[Any]:
    return list(await asyncio.gather(*(make(s) for s in students)))


async def watch_load(students: list[Student], jobs: int, window: float,
                     slurm_env: dict[str, str]) -> dict[str, Any]:
    names = [s.name for s in students]
    outs = await each(students, lambda s: execute(s, hold_cell(jobs)))
    assert all("held and watched" in out for out, _ in outs), outs
    await asyncio.sleep(15)  # every watch has made its first reads
    before = rpcs_by_user(slurm_env)
    await asyncio.sleep(window)
    counts = delta(before, rpcs_by_user(slurm_env), names)
    memory = rss_mib_by_user()
    await each(students, lambda s: execute(s, RELEASE))
    per_min = {n: c * 60 / window for n, c in counts.items()}
    return {"jobs": jobs, "per_student": statistics.mean(per_min.values()),
            "max_student": max(per_min.values()), "total": sum(per_min.values()),
            "server_mib": statistics.mean(memory.get(n, 0.0) for n in names)}


async def run_lab(students: list[Student], cells: list[tuple[str, str, bool]],
                  slurm_env: dict[str, str]) -> dict[str, Any]:
    names = [s.name for s in students]
    before = rpcs_by_user(slurm_env)
    started = time.monotonic()
    peak: dict[str, float] = {}

    async def one(student: Student) -> None:
        for _tag, code, expect_error in cells:
            _out, first = await execute(student, code, expect_error=expect_error)
            if first is not None and code.lstrip().startswith("%%slurm_train"):
                student.first_line_s.append(first)
            for user, mib in rss_mib_by_user().items():
                peak[user] = max(peak.get(user, 0.0), mib)

    await each(students, one)
    elapsed = time.monotonic() - started
    counts = delta(before, rpcs_by_user(slurm_env), names)
    firsts = [f for s in students for f in s.first_line_s]
    return {"elapsed": elapsed, "per_student": statistics.mean(c * 60 / elapsed for c in counts.values()),
            "total": sum(counts.values()) * 60 / elapsed,
            "first_line_p50": statistics.median(firsts) if firsts else None,
            "first_line_max": max(firsts) if firsts else None,
            "ok": sum(1 for s in students if not s.errors), "errors": [e for s in students for e in s.errors],
            "server_peak_mib": max((peak.get(n, 0.0) for n in names), default=0.0)}


async def measure(hub: ClassHub, students: list[Student], jobs: list[int], window: float,
                  cells: int, slurm_env: dict[str, str]) -> dict[str, Any]:
    await each(students, lambda s: open_kernel(hub, s))
    await each(students, lambda s: execute(s, SETUP))
    result: dict[str, Any] = {"watch": []}
    for j in jobs:
        result["watch"].append(await watch_load(students, j, window, slurm_env))
    if cells > 0:
        result["lab"] = await run_lab(students, lab_cells(cells), slurm_env)
    result["hub_mib"] = rss_mib_of(r"jupyterhub(\s|$)|-m jupyterhub")
    result["proxy_mib"] = rss_mib_of(r"configurable-http-proxy")
    for s in students:
        for sock in (s.socket, s.events):
            if sock is not None:
                sock.close()
    return result


def run_class(n: int, args: argparse.Namespace, venv: Path, slurm_env: dict[str, str]) -> dict[str, Any]:
    students = [Student(f"{STUDENT_PREFIX}{i:02d}", secrets.token_urlsafe(12)) for i in range(1, n + 1)]
    work = Path(tempfile.mkdtemp(prefix="jt-class-load-"))
    os.chmod(work, 0o700)
    hub = ClassHub(venv, work, students)
    try:
        hub.up()
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
            list(pool.map(hub.login, students))
        logins = time.monotonic() - t0
        result = asyncio.run(measure(hub, students, args.jobs, args.window, args.cells, slurm_env))
        ready = [s.ready_s for s in students if s.ready_s is not None]
        result.update(students=n, all_logged_in_s=logins, ready_p50=statistics.median(ready),
                      ready_max=max(ready))
        return result
    finally:
        hub.down()
        names = ",".join(s.name for s in students)
        subprocess.run(["scancel", "-u", names], env=slurm_env, capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    load = os.getloadavg()
    print(f"\nclass_load: students {args.students_text}, window {args.window:g} s, lab cells {args.cells}; "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at the end, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| students | jobs each | RPC/min per student (max) | RPC/min total | server+kernel MiB each |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        for w in row["watch"]:
            print(f"| {row['students']} | {w['jobs']} | {w['per_student']:.1f} ({w['max_student']:.1f}) | "
                  f"{w['total']:.1f} | {w['server_mib']:.0f} |")
    print("\n| students | logins done | server ready p50 / max | hub MiB | proxy MiB |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['students']} | {row['all_logged_in_s']:.0f} s | {row['ready_p50']:.1f} / "
              f"{row['ready_max']:.1f} s | {row['hub_mib']:.0f} | {row['proxy_mib']:.0f} |")
    labs = [r for r in rows if "lab" in r]
    if labs:
        print(f"\n| students | lab run ({args.cells} cells) | first line p50 / max | RPC/min per student | "
              "RPC/min total | students without an error | peak MiB each |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for row in labs:
            lab_row = row["lab"]
            first = (f"{lab_row['first_line_p50']:.1f} / {lab_row['first_line_max']:.1f} s"
                     if lab_row["first_line_p50"] is not None else "-")
            print(f"| {row['students']} | {lab_row['elapsed']:.0f} s | {first} | "
                  f"{lab_row['per_student']:.1f} | {lab_row['total']:.1f} | "
                  f"{lab_row['ok']}/{row['students']} | {lab_row['server_peak_mib']:.0f} |")
            for error in lab_row["errors"][:10]:
                print(f"  - {error}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", default="1,10,30")
    ap.add_argument("--jobs", default="1,4")
    ap.add_argument("--window", type=float, default=120.0)
    ap.add_argument("--cells", type=int, default=8, help="teaching-lab code cells to run (0: none)")
    ap.add_argument("--venv", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("class_load makes Unix users and starts the hub: run it as root")
    args.students_text = args.students
    counts = [int(n) for n in args.students.split(",")]
    args.jobs = [int(j) for j in args.jobs.split(",")]
    env = cluster_env()
    slurm_env = {**os.environ, "SLURM_CONF": env["SLURM_CONF"]}
    venv = find_venv(args.venv)
    rows: list[dict[str, Any]] = []
    try:
        with files_kept(lab.SYSTEM_CONFIG):
            for n in counts:
                rows.append(run_class(n, args, venv, slurm_env))
                print(f"[class_load] {n} students done", file=sys.stderr, flush=True)
    finally:
        if rows:
            report(rows, args)
    return 0 if all(not r.get("lab", {}).get("errors") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
