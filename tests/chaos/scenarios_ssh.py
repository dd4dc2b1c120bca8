"""SSH scenario on the Slurm test cluster: this process's own SSH connections cut from the outside
while a short job's log is followed: client side (``ss -K`` destroys the TCP socket in the
kernel, as a dropped link does to the client) or server side (the sshd child serving this
process's connection SIGKILLed, as an sshd restart or an OOM kill does). Only this process's
connections to the cluster's sshd are touched: never another process's, never the listening sshd.

Invariants: every numbered line exactly once and in order, the job COMPLETED; recovery is from a
cut to the next line received.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import secrets
import shlex
import signal
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import JobState
from tests.chaos import schedules
from tests.chaos.harness import Outcome, check_sequence

GUARD = 300.0


def own_ssh_ports(host: str, port: int) -> list[int]:
    """Local ports of this process's TCP connections to ``host:port`` (from ``ss -tnp``)."""
    out = subprocess.run(["ss", "-tnpH", "state", "established", "dst", f"{host}:{port}"],
                         capture_output=True, text=True, timeout=30).stdout
    mine = f"pid={os.getpid()},"
    ports = []
    for line in out.splitlines():
        fields = line.split()
        if mine in line and len(fields) >= 3:
            ports.append(int(fields[2].rsplit(":", 1)[1]))
    return ports


def cut_own_connections(host: str, port: int) -> int:
    """Destroy this process's sockets to ``host:port`` (``ss -K``); returns how many."""
    ports = own_ssh_ports(host, port)
    for local in ports:
        subprocess.run(["ss", "-K", "-tn", "dst", f"{host}:{port}", "sport", "=", f":{local}"],
                       capture_output=True, timeout=30, check=False)
    return len(ports)


def own_sshd_children(host: str, port: int) -> list[int]:
    """The sshd processes serving this process's connections to ``host:port``: the server end of
    each of our sockets, found by our local port (``ss -tnp``), never the listening sshd."""
    pids: set[int] = set()
    for local in own_ssh_ports(host, port):
        out = subprocess.run(["ss", "-tnpH", "state", "established", "src", f"{host}:{port}",
                              "dst", f"{host}:{local}"], capture_output=True, text=True, timeout=30).stdout
        for name, pid in re.findall(r'\("([^"]+)",pid=(\d+),', out):
            if name == "sshd" and int(pid) != os.getpid():
                pids.add(int(pid))
    return sorted(pids)


def kill_own_sshd_children(host: str, port: int) -> int:
    """SIGKILL the sshd children serving this process's connections; returns how many."""
    pids = own_sshd_children(host, port)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def log_stream_cuts(tier: Any, host: str, port: int, *, seed: int, cuts: int, lines: int = 1000,
                    server_share: float = 0.5, cut_kinds: dict[str, int] | None = None,
                    progress: Callable[[str], None] | None = None) -> Outcome:
    """A job printing ``lines`` numbered lines (100 a second), and more until the cuts are done,
    followed while this process's SSH connection is cut ``cuts`` times, at moments drawn from
    ``seed``: a seeded ``server_share`` of them server side (the sshd child SIGKILLed), the
    others client side (``ss -K``); ``cut_kinds`` (if given) gets how many of each were made.
    The job ends with a ``total N`` line: how many numbered lines it wrote."""
    outcome = Outcome("ssh: connection cut mid-stream (client and server side)")
    # It prints on until the cutter is done (a file in its directory), at most GUARD seconds:
    # on a busy machine the SSH reconnects between cuts can outlast a fixed 1,000 lines.
    body = textwrap.dedent(f"""\
        import os, time
        done = os.path.join(os.environ["JT_JOB_DIR"], "cuts-done")
        deadline = time.monotonic() + {GUARD}
        i = 0
        while i < {lines} or (not os.path.exists(done) and time.monotonic() < deadline):
            print("n", i, flush=True)
            i += 1
            time.sleep(0.01)
        print("total", i, flush=True)
        """)
    job = tier.submit(tier.make_spec(body, name="chaos-ssh"))
    seen: list[int] = []
    received_at: list[float] = []
    first = threading.Event()
    cut_at: list[float] = []
    stop = threading.Event()
    kinds = {"client": 0, "server": 0}
    plan = schedules.ssh_stream_cuts(seed, cuts, lines, server_share)

    def cutter() -> None:
        try:
            cut_all()
        finally:
            for _ in range(20):  # tell the job the cuts are done (the tier reconnects if need be)
                try:
                    tier.transport.run(["touch", "--", f"{job.record.jobdir}/cuts-done"])
                    break
                except Exception:  # a reconnect refused a moment: try again
                    if stop.wait(0.5):
                        break

    def undelivered(rest: list[schedules.Fault]) -> None:
        for fault in rest:  # the job writes until the cuts are done: it ended early (said below)
            outcome.undelivered_fault(f"{fault.target} ({fault.kind} side): the job's log ended first")

    def cut_all() -> None:
        first.wait(GUARD)
        # Spread over most of the job's run (100 lines a second): a cut every 0.2..0.8 s for
        # the bounded run's 1,000 lines, proportionally more apart for a longer job.
        previous = 0.0
        for n, fault in enumerate(plan):
            if stop.wait(fault.at - previous):
                undelivered(plan[n:])
                return
            previous = fault.at
            side = fault.kind
            cut = kill_own_sshd_children if side == "server" else cut_own_connections
            # Between a cut and the reconnect there is no connection to cut: retry until the
            # follower has one again (a busy machine's SSH login takes seconds) or the job ended,
            # so that a slow reconnect does not silently skip the cut.
            while True:
                at = time.monotonic()
                if cut(host, port):
                    break
                if stop.wait(0.05):
                    undelivered(plan[n:])
                    return
            cut_at.append(at)
            outcome.faults += 1
            kinds[side] += 1
            if progress:
                progress(f"  SSH cut {outcome.faults}/{cuts} ({side} side)")

    thread = threading.Thread(target=cutter, name="chaos-ssh-cutter", daemon=True)
    thread.start()
    total: int | None = None
    try:
        for line in job.follow(timeout=2 * GUARD + 3 * lines / 100):  # a bound on the whole run
            parts = line.text.split()
            if len(parts) == 2 and parts[0] == "n" and parts[1].isdigit():
                seen.append(int(parts[1]))
                received_at.append(time.monotonic())
                first.set()
            elif len(parts) == 2 and parts[0] == "total" and parts[1].isdigit():
                total = int(parts[1])
    finally:
        stop.set()
        thread.join(30)
    if total is None:
        outcome.problems.append("the job's closing 'total' line was lost")
    written = total if total is not None else max([lines - 1, *seen]) + 1
    result = check_sequence(seen, written)
    outcome.checked = len(seen)
    outcome.lost, outcome.duplicated = result.lost, result.duplicated
    if result.out_of_order:
        outcome.wrong(f"{result.out_of_order} lines out of order")
    if result.lost or result.duplicated:
        outcome.problems.append(f"{result.lost} lost, {result.duplicated} duplicated of {written}")
    status = job.wait(timeout=2 * GUARD + 3 * lines / 100)
    if status.state is not JobState.COMPLETED:
        outcome.wrong(f"job {job.id} ended {status.state.value}: {status.reason}")
    for at in cut_at:
        after = next((t for t in received_at if t > at), None)
        if after is not None:
            outcome.recover_s.append(after - at)
    if progress:
        progress(f"  cuts: {kinds['client']} client side, {kinds['server']} server side")
    if cut_kinds is not None:
        cut_kinds.update(kinds)
    return outcome


def submit_cuts(tier: Any, host: str, port: int, *, seed: int, submits: int, server_share: float = 0.0,
                progress: Callable[[str], None] | None = None) -> Outcome:
    """``submits`` short jobs, each submit's SSH connection cut once at a moment drawn from
    ``seed`` (a share of the way into ``tier.submit``, of an uncut submit's time measured first:
    while the job's files go up, sbatch runs or its answer comes back). Invariants: every submit
    returns a job, the cluster holds exactly one job of that name (squeue, which keeps ended jobs
    for MinJobAge), the registry exactly one record, its id that job's. A seeded ``server_share``
    of the cuts kill the sshd child serving the connection instead (the remote submit's own
    processes lose their session with it). Recovery: from the cut to ``submit`` returning."""
    both = " (client and server side)" if server_share else ""
    outcome = Outcome("ssh: connection cut mid-submit" + both)
    run = secrets.token_hex(3)
    tier.login()  # a live connection for the first cut to hit
    names: list[str] = []
    ids: dict[str, str] = {}
    # One uncut submit first, on the live connection (checked as the others): how long a submit
    # takes here. Each cut lands at its seeded share of that; a cut submit reconnects first, so
    # it lasts longer; a cut that still comes after its submit returned is tried again on another
    # submit (SUBMIT_TRIES in all) before it counts as undelivered.
    uncut = f"chaos-sub-{run}-uncut"
    names.append(uncut)
    began = time.monotonic()
    try:
        ids[uncut] = tier.submit(tier.make_spec("print('done')", name=uncut)).id
    except Exception as e:
        outcome.lost += 1
        outcome.problems.append(f"the uncut submit failed: {type(e).__name__}: {e}")
    took = time.monotonic() - began
    for i, fault in enumerate(schedules.ssh_submit_cuts(seed, submits, server_share)):
        # A cut that came after its submit returned (this submit was quicker than the uncut one)
        # is tried again on another submit, at the same share of the quicker one's time, up to
        # SUBMIT_TRIES submits: the workload runs until its faults are delivered.
        basis, missed = took, ""
        server = fault.kind == "server"
        for attempt in range(SUBMIT_TRIES):
            delay = fault.at * basis
            name = f"chaos-sub-{run}-{i}" + (f"-again{attempt}" if attempt else "")
            names.append(name)
            began_one, done, cut_at = _cut_submit(tier, host, port, name, delay, server, ids, outcome, i)
            if cut_at and cut_at[0] < done:
                outcome.faults += 1
                outcome.recover_s.append(done - cut_at[0])
                missed = ""
                break
            missed = f"submit {i}: its cut {delay:.2f} s in " + (
                "came after it returned" if cut_at else "found no connection")
            basis = min(basis, done - began_one)
        if missed:
            outcome.undelivered_fault(f"{missed} ({SUBMIT_TRIES} submits)")
        if progress:
            side = " server side" if server else ""
            progress(f"  submit {i + 1}/{submits}{f' (cut{side} mid-submit)' if not missed else ''}")
    # What the cluster holds: every job of these names, ended ones too.
    listing = tier.transport.run(["squeue", "-h", "-a", "-t", "all", "-o", "%i|%j"], check=False).text()
    on_cluster: dict[str, list[str]] = {}
    for line in listing.splitlines():
        job_id, _, job_name = line.strip().partition("|")
        if job_name in names:
            on_cluster.setdefault(job_name, []).append(job_id)
    recorded: dict[str, list[str]] = {}
    for rec in tier.registry.list(limit=1000):
        if rec.name in names:
            recorded.setdefault(rec.name, []).append(rec.job_id)
    for name in names:
        outcome.checked += 1
        jobs, recs = on_cluster.get(name, []), recorded.get(name, [])
        if len(jobs) > 1:
            outcome.duplicated += len(jobs) - 1
            outcome.problems.append(f"{name}: {len(jobs)} jobs on the cluster ({', '.join(jobs)})")
        if not jobs and name in ids:
            outcome.lost += 1
            outcome.problems.append(f"{name}: job {ids[name]} not on the cluster")
        if len(recs) > 1:
            outcome.duplicated += len(recs) - 1
            outcome.problems.append(f"{name}: {len(recs)} registry records")
        if jobs and (recs != [ids.get(name)] or ids.get(name) not in jobs):
            outcome.wrong(f"{name}: registry {recs}, submit answered {ids.get(name)}, cluster {jobs}")
    return outcome


#: Submits one scheduled mid-submit cut may take to land (see submit_cuts).
SUBMIT_TRIES = 3


def _cut_submit(tier: Any, host: str, port: int, name: str, delay: float, server: bool,
                ids: dict[str, str], outcome: Outcome, index: int) -> tuple[float, float, list[float]]:
    """One submit of ``name`` with its connection cut ``delay`` s in (client side, or the sshd
    child serving it when ``server``): (when it began, when it returned, [when the cut came])."""
    cut_at: list[float] = []
    started = threading.Event()

    def cutter() -> None:
        started.wait(GUARD)
        time.sleep(delay)
        at = time.monotonic()  # before the cut: a submit may fail the instant it lands
        if (kill_own_sshd_children if server else cut_own_connections)(host, port):
            cut_at.append(at)

    thread = threading.Thread(target=cutter, name="chaos-submit-cutter", daemon=True)
    thread.start()
    spec = tier.make_spec("print('done')", name=name)
    began = time.monotonic()
    started.set()
    try:
        ids[name] = tier.submit(spec).id
    except Exception as e:  # a failed submit is what this scenario counts
        outcome.lost += 1
        outcome.problems.append(f"submit {index} failed: {type(e).__name__}: {e}")
    done = time.monotonic()
    thread.join(GUARD)
    return began, done, cut_at


def download_cuts(tier: Any, host: str, port: int, dest: Path, *, seed: int, cuts: int,
                  megabytes: int = 64, progress: Callable[[str], None] | None = None) -> Outcome:
    """A finished job's ``megabytes`` MiB random file fetched with ``job.download`` while this
    process's SSH connection is cut ``cuts`` times (each once the transfer is under way, after a
    seeded share of the bytes), ``download`` called again after a cut that reached the caller.
    Invariants: the local file's sha256 equals the cluster's, no ``.part`` left, download
    called at most cuts + 1 times. Recovery: from a cut to the next chunk written."""
    outcome = Outcome("ssh: connection cut mid-download")
    size = megabytes << 20
    job = tier.submit(tier.make_spec(
        f"import os\nwith open('big.bin', 'wb') as f:\n    f.write(os.urandom({size}))\n",
        name="chaos-dl"))
    status = job.wait(timeout=GUARD)
    if status.state is not JobState.COMPLETED:
        outcome.wrong(f"job {job.id} ended {status.state.value}: {status.reason}")
        return outcome
    remote = tier.transport.run(["sha256sum", f"{job.record.jobdir}/big.bin"]).text().split()[0]
    shares = [fault.at for fault in schedules.ssh_download_cuts(seed, cuts)]
    written = [0]
    cut_at: list[float] = []
    recovered: list[float] = []
    pending = threading.Event()
    finished = threading.Event()

    def on_progress(name: str, have: int, total: int) -> None:
        written[0] = have
        if cut_at and len(recovered) < len(cut_at):
            recovered.append(time.monotonic() - cut_at[len(recovered)])
        if len(cut_at) < cuts and have >= shares[len(cut_at)] * total and not pending.is_set():
            pending.set()

    def cutter() -> None:
        while len(cut_at) < cuts:
            if not pending.wait(GUARD) or finished.is_set():
                return
            at, before = time.monotonic(), written[0]
            if cut_own_connections(host, port) and before < size:  # not after the last byte
                cut_at.append(at)
                outcome.faults += 1
                if progress:
                    progress(f"  download cut {outcome.faults}/{cuts} at {written[0] >> 20} MiB")
            pending.clear()

    thread = threading.Thread(target=cutter, name="chaos-download-cutter", daemon=True)
    thread.start()
    calls = 0
    errors: list[str] = []
    paths: list[Path] = []
    while calls <= cuts + 1 and not paths:
        calls += 1
        try:
            paths = job.download("big.bin", str(dest), progress=on_progress)
        except TiersError as e:
            errors.append(str(e))
    finished.set()
    pending.set()
    thread.join(30)
    for share in shares[len(cut_at):]:
        outcome.undelivered_fault(f"the cut at {share:.0%} of the bytes: the download was done first")
    outcome.checked = 1
    outcome.recover_s = recovered
    local = dest / "big.bin"
    if not paths or not local.exists():
        outcome.lost += 1
        outcome.problems.append(f"not downloaded after {calls} calls: {errors[-1:]}")
        return outcome
    digest = hashlib.sha256(local.read_bytes()).hexdigest()
    if digest != remote:
        outcome.wrong(f"big.bin differs: {local.stat().st_size} of {size} bytes, sha256 {digest[:12]} "
                      f"!= {remote[:12]}")
    if local.stat().st_size > size:
        outcome.duplicated += 1
    if list(dest.glob("*.part")):
        outcome.wrong(f".part left: {list(dest.glob('*.part'))}")
    for error in errors:
        if "\n" in error or "Traceback" in error:
            outcome.wrong(f"a cut said more than one line: {error!r}")
    if progress:
        progress(f"  {calls} download call(s); what they said: {errors}")
    return outcome


def sync_cuts(tier: Any, host: str, port: int, project: Path, *, seed: int, submits: int,
              progress: Callable[[str], None] | None = None) -> Outcome:
    """``submits`` jobs submitted with ``--sync`` from ``project`` (40 files, 8 MiB; a quarter
    of them changed before each submit so there is something to send), the connection cut once
    at a seeded share of the way into each (the manifest check, the tar going up, the snapshot,
    sbatch) of an uncut such submit's time, measured first (two uncut submits come first, checked
    as the others). Invariants: each submit returns one job, the cluster holds one job of its name, and
    the snapshot it runs in holds exactly the project's files as they were, byte for byte
    (sha256). Recovery: from the cut to submit returning."""
    outcome = Outcome("ssh: connection cut mid --sync upload")
    rng = random.Random(f"{seed}/ssh-sync-bytes")
    run = secrets.token_hex(3)
    name = f"chaos-sync-{run}"
    for i in range(40):
        (project / f"d{i % 4}").mkdir(parents=True, exist_ok=True)
        (project / f"d{i % 4}" / f"f{i}.bin").write_bytes(rng.randbytes(200_000))
    tier.login()
    ids: list[str] = []
    cwd = os.getcwd()
    os.chdir(project)
    try:
        # Two uncut submits first (checked as the others): the whole project, then with a quarter
        # changed, as each cut one has: how long such a submit takes here. Each cut lands at its
        # seeded share of that; one that still comes after its submit returned is undelivered.
        plan: list[schedules.Fault | None] = [None, None, *schedules.ssh_sync_cuts(seed, submits)]
        took = 1.0
        for i, fault in enumerate(plan):
            for j in rng.sample(range(40), 10):
                (project / f"d{j % 4}" / f"f{j}.bin").write_bytes(rng.randbytes(200_000))
            local = {str(p.relative_to(project)): hashlib.sha256(p.read_bytes()).hexdigest()
                     for p in project.rglob("*") if p.is_file()}
            cut_at: list[float] = []
            delay = fault.at * took if fault is not None else 0.0
            timer = threading.Timer(delay, lambda c=cut_at: c.append(time.monotonic())
                                    if cut_own_connections(host, port) else None)
            if fault is not None:
                timer.start()
            began = time.monotonic()
            try:
                job = tier.submit(tier.make_spec("print('synced')", name=name, sync=["."]))
            except TiersError as e:
                outcome.lost += 1
                outcome.problems.append(f"submit {i} failed: {e}")
                continue
            finally:
                done = time.monotonic()
                if fault is not None:
                    timer.join(GUARD)
            ids.append(job.id)
            if i == 1:
                took = done - began
            if fault is not None and cut_at and cut_at[0] < done:
                outcome.faults += 1
                outcome.recover_s.append(done - cut_at[0])
            elif fault is not None:
                outcome.undelivered_fault(f"sync submit {i}: its cut {delay:.2f} s in " + (
                    "came after it returned" if cut_at else "found no connection"))
            found = re.search(r"export JT_SYNC_DIR=(\S+)", job.record.script or "")
            if not found:
                outcome.wrong(f"job {job.id}: no JT_SYNC_DIR in its script")
                continue
            snap = shlex.split(found.group(1))[0]
            listing = tier.transport.run(["bash", "-c", 'cd -- "$1" && find . -type f -print0 | '
                                          'xargs -0 -r sha256sum', "jt", snap]).text()
            remote = {path[2:]: digest for digest, path in
                      (line.split(None, 1) for line in listing.splitlines() if line.strip())}
            outcome.checked += len(local)
            outcome.lost += len(set(local) - set(remote))
            extra = set(remote) - set(local)
            if extra:
                outcome.wrong(f"job {job.id}: files not in the project: {sorted(extra)[:3]}")
            differ = [p for p in local if p in remote and remote[p] != local[p]]
            if differ:
                outcome.wrong(f"job {job.id}: {len(differ)} files differ, e.g. {differ[0]}")
            if progress:
                mid = " (cut mid-submit)" if cut_at and cut_at[0] < done else ""
                progress(f"  sync submit {i + 1}/{submits}{mid}")
    finally:
        os.chdir(cwd)
    listing = tier.transport.run(["squeue", "-h", "-a", "-t", "all", "-n", name, "-o", "%i"],
                                 check=False).text().split()
    if sorted(listing) != sorted(ids):
        outcome.duplicated += max(0, len(listing) - len(ids))
        outcome.wrong(f"jobs on the cluster {sorted(listing)}, submits answered {sorted(ids)}")
    tier.transport.run(["rm", "-rf", "--", f"{tier.profile.workdir}/.sync/{name}"], check=False)
    return outcome
