"""Scheduler load of the Tiers sidebar: 1 browser tab vs 10 tabs on the ``events`` websocket.

Starts a real ``jupyter server`` (with the jupyter_tiers extension, from this venv) whose only
profile is the Slurm test cluster, submits ``--jobs`` sleeping jobs, then for each phase opens
1 (then 10) ``events`` websockets with the server's token (plain tornado clients, as many tabs
would), keeps them open for ``--warmup`` + ``--seconds`` and counts the scheduler queries the
server made in the ``--seconds`` window: the hub's batched ``squeue`` polls as the server itself
reports them (``GET jupyter-tiers/api/stats``), and, as a cross-check, slurmctld's own job-query
RPC counters from ``sdiag`` (not reset; these include anything else using the shared cluster in
the same minutes). Each phase starts from no listener (the hub stops polling between phases), so
both see the same start-up. Prints both figures per minute and the ratio 10 tabs / 1 tab
(goal: 1.0). A third phase is the baseline a sidebar without the shared watcher would be: 10 tabs
each polling ``GET jobs`` (a refresh: one batched ``squeue``) every ``--poll`` seconds (15, the
watcher's own steady-state interval).

Run: .venv/bin/python bench/sidebar_load.py [--seconds 60] [--warmup 20] [--jobs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _cluster import ROOT, cluster_env, slurm
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

QUERY_RPCS = ("REQUEST_JOB_INFO", "REQUEST_JOB_INFO_SINGLE", "REQUEST_FED_INFO", "REQUEST_JOB_USER_INFO")


def sdiag_job_queries() -> int | None:
    """slurmctld's job-query RPC count so far (None when sdiag does not answer)."""
    try:
        out = slurm("sdiag")
    except subprocess.CalledProcessError:
        return None
    section = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    total = 0
    for line in section.splitlines():
        m = re.match(r"\s*(\w+)\s*\(\s*\d+\)\s*count:(\d+)", line)
        if m and m.group(1) in QUERY_RPCS:
            total += int(m.group(2))
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_profile(path: Path, env: dict[str, str]) -> None:
    venv_bin = Path(sys.executable).parent
    path.write_text(f"""\
default_profile: box
profiles:
  box:
    tier: slurm
    host: {env["JT_SSH_HOST"]}
    port: {env["JT_SSH_PORT"]}
    user: {env["JT_SSH_USER"]}
    identity_file: {env["JT_SSH_KEY"]}
    known_hosts: {env["JT_KNOWN_HOSTS"]}
    workdir: /var/lib/jupyter-tiers-jobs/bench
    defaults: {{time: "00:30:00", python: {venv_bin}/python}}
""")


class Server:
    """A jupyter server subprocess with the extension, on loopback with a token."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log = open(workdir / "server.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "jupyter"), "server", "--no-browser",
             f"--ServerApp.port={self.port}", "--ServerApp.ip=127.0.0.1",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={workdir}",
             "--allow-root"],
            cwd=workdir, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def base(self) -> str:
        return f"127.0.0.1:{self.port}/jupyter-tiers/api"

    async def get(self, path: str) -> Any:
        request = HTTPRequest(f"http://{self.base}/{path}", headers={"Authorization": f"token {self.token}"})
        response = await AsyncHTTPClient().fetch(request)
        return json.loads(response.body)

    async def wait_up(self) -> None:
        for _ in range(240):
            if self.proc.poll() is not None:
                sys.exit(f"jupyter server exited with {self.proc.returncode}; see {self.log.name}")
            try:
                await self.get("stats")
                return
            except Exception:
                await asyncio.sleep(0.5)
        sys.exit(f"jupyter server did not answer; see {self.log.name}")

    async def tab(self) -> Any:
        """One browser tab's events websocket (its snapshot read)."""
        request = HTTPRequest(f"ws://{self.base}/events", headers={"Authorization": f"token {self.token}"})
        ws = await websocket_connect(request)
        first = json.loads(await ws.read_message())
        assert first["type"] == "snapshot", first
        return ws

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


async def drain(ws: Any, stop: asyncio.Event) -> int:
    """Read a tab's messages until ``stop``; returns how many arrived."""
    count = 0
    while not stop.is_set():
        try:
            message = await asyncio.wait_for(ws.read_message(), 1.0)
        except asyncio.TimeoutError:
            continue
        if message is None:
            break
        count += 1
    return count


async def phase(server: Server, tabs: int, warmup: float, seconds: float) -> dict[str, float]:
    sockets = [await server.tab() for _ in range(tabs)]
    stop = asyncio.Event()
    readers = [asyncio.ensure_future(drain(ws, stop)) for ws in sockets]
    await asyncio.sleep(warmup)
    stats0, rpc0 = await server.get("stats"), sdiag_job_queries()
    await asyncio.sleep(seconds)
    stats1, rpc1 = await server.get("stats"), sdiag_job_queries()
    stop.set()
    messages = sum(await asyncio.gather(*readers))
    for ws in sockets:
        ws.close()
    # Let the hub see the last listener go (it then drops every subscription).
    for _ in range(60):
        if (await server.get("stats"))["listeners"] == 0:
            break
        await asyncio.sleep(0.5)
    queries = stats1["scheduler_queries"].get("box", 0) - stats0["scheduler_queries"].get("box", 0)
    per_min = 60.0 / seconds
    # A restarted slurmctld (another user of the shared cluster) resets its counters: no figure.
    rpcs = (rpc1 - rpc0) * per_min if rpc0 is not None and rpc1 is not None and rpc1 >= rpc0 else None
    return {"tabs": tabs, "queries_per_min": queries * per_min, "rpcs_per_min": rpcs,
            "watched": len(stats1["watched"]), "messages": messages}


async def naive_phase(server: Server, tabs: int, poll: float, seconds: float) -> dict[str, float]:
    """``tabs`` tabs each asking ``GET jobs`` every ``poll`` seconds (staggered), no websockets."""
    stop = asyncio.Event()

    async def tab(i: int) -> None:
        await asyncio.sleep(poll * i / tabs)
        while not stop.is_set():
            await server.get("jobs")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), poll)

    stats0, rpc0 = await server.get("stats"), sdiag_job_queries()
    tasks = [asyncio.ensure_future(tab(i)) for i in range(tabs)]
    await asyncio.sleep(seconds)
    stop.set()
    stats1, rpc1 = await server.get("stats"), sdiag_job_queries()
    await asyncio.gather(*tasks)

    def total(stats: Any) -> int:
        return stats["scheduler_queries"].get("box", 0) + stats["refresh_queries"].get("box", 0)

    per_min = 60.0 / seconds
    rpcs = (rpc1 - rpc0) * per_min if rpc0 is not None and rpc1 is not None and rpc1 >= rpc0 else None
    return {"tabs": tabs, "queries_per_min": (total(stats1) - total(stats0)) * per_min, "rpcs_per_min": rpcs}


async def run(args: argparse.Namespace) -> None:
    env = cluster_env()
    work = Path(tempfile.mkdtemp(prefix="jt-sidebar-bench-"))
    write_profile(work / "tiers.yaml", env)
    registry = work / "registry.sqlite"
    server_env = {**os.environ, "JUPYTER_TIERS_CONFIG": str(work / "tiers.yaml"),
                  "JUPYTER_TIERS_REGISTRY": str(registry), "JUPYTER_TIERS_DISPLAY": "text",
                  "PYTHONPATH": str(ROOT)}
    os.environ.update({k: server_env[k] for k in ("JUPYTER_TIERS_CONFIG", "JUPYTER_TIERS_REGISTRY")})
    from jupyter_tiers import api

    tier = api.connect("box")
    jobs = [tier.submit(tier.make_spec("import time\ntime.sleep(1200)\n", name=f"sidebar-bench-{i}"))
            for i in range(args.jobs)]
    print(f"submitted {len(jobs)} jobs: {', '.join(j.id for j in jobs)}; server in {work}")
    server = Server(work, server_env)
    try:
        await server.wait_up()
        results = []
        for tabs in (1, 10):
            r = await phase(server, tabs, args.warmup, args.seconds)
            results.append(r)
            rpcs = "n/a" if r["rpcs_per_min"] is None else f"{r['rpcs_per_min']:.1f}"
            print(f"{tabs:>2} tab(s): {r['queries_per_min']:.1f} scheduler queries/min (server), "
                  f"{rpcs} slurmctld job-query RPCs/min (sdiag, whole cluster), "
                  f"{r['watched']} jobs watched, {r['messages']} messages to the tabs")
        one, ten = results
        ratio = ten["queries_per_min"] / one["queries_per_min"] if one["queries_per_min"] else float("nan")
        rpc_ratio = (f"{ten['rpcs_per_min'] / one['rpcs_per_min']:.2f}"
                     if one["rpcs_per_min"] and ten["rpcs_per_min"] is not None else "n/a")
        print(f"ratio 10 tabs / 1 tab: {ratio:.2f} (scheduler queries, goal 1.0); "
              f"{rpc_ratio} (sdiag RPCs, includes other users of the cluster)")
        if args.poll > 0:
            naive = await naive_phase(server, 10, args.poll, args.seconds)
            rpcs = "n/a" if naive["rpcs_per_min"] is None else f"{naive['rpcs_per_min']:.1f}"
            print(f"baseline, 10 tabs polling GET jobs every {args.poll:.0f} s: "
                  f"{naive['queries_per_min']:.1f} scheduler queries/min (server), {rpcs} RPCs/min (sdiag); "
                  f"baseline / shared watcher with 10 tabs: "
                  f"{naive['queries_per_min'] / ten['queries_per_min']:.1f}x")
    finally:
        server.stop()
        for job in jobs:
            job.cancel()
        api.close_all()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="counting window per phase")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds before counting (the watcher's "
                    "first polls come quickly after a subscription, then settle at 15 s)")
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--poll", type=float, default=15.0, help="the baseline's polling interval (0: skip it)")
    args = ap.parse_args()
    started = time.monotonic()
    asyncio.run(run(args))
    print(f"(took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
