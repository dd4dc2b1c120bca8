"""Jupyter on the cluster: a "kernel" started INSIDE an allocation of the test cluster (sbatch of a
Python program with --cpus-per-task and --mem-per-cpu, and SBATCH_* variables a portal left in
its environment) submits a 2-node job through the built-in ``cluster`` profile (no tiers.yaml
profile of its own, no SSH). The job must run with its own resources, name and time limit
(``scontrol show job``), and its ranks must see their own SLURM_JOB_ID, not the parent's."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import wait_for

pytestmark = pytest.mark.slurm

GUARD = 300.0
VENV = Path(sys.executable).parent

# The rank's view of its job: the id, and what an inherited allocation would have left.
BODY = textwrap.dedent("""\
    import os
    seen = {k: os.environ.get(k) for k in ("SLURM_JOB_ID", "SLURM_MEM_PER_CPU", "SLURM_CPUS_PER_TASK",
                                           "SBATCH_TIMELIMIT")}
    print("seen", repr(seen), flush=True)
""")

# The "kernel": what a notebook on the cluster runs, in-process (api.connect_batch).
KERNEL = textwrap.dedent("""\
    import json, os, subprocess, sys
    from jupyter_tiers.api import connect_batch
    from jupyter_tiers.batch.jobenv import enclosing_job

    tier = connect_batch("cluster")
    body = open(sys.argv[2]).read()
    job = tier.submit(tier.make_spec(body, name="oncl-nested", nodes=2, mem="300M",
                                     cpus_per_task=2))
    shown = subprocess.run(["scontrol", "show", "job", job.id], capture_output=True, text=True).stdout
    status = job.wait(timeout=240)
    out = {"outer": os.environ["SLURM_JOB_ID"], "inner": job.id, "state": status.state.name,
           "logs": job.logs(), "scontrol": shown, "sources": list(tier.profile.sources),
           "transport": type(tier.transport).__name__, "enclosing": enclosing_job(os.environ).job_id}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
    tier.close()
""")


def _field(text: str, name: str) -> str:
    match = re.search(rf"(?:^|\s){re.escape(name)}=(\S+)", text)
    assert match, f"{name} not in {text!r}"
    return match.group(1)


def test_a_kernel_inside_an_allocation_submits_a_job_that_starts_clean(
        cluster_env: dict[str, str], tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    (tmp_path / "kernel.py").write_text(KERNEL)
    (tmp_path / "body.py").write_text(BODY)
    # Only defaults are added to the built-in profile: tier, transport and no host are its own.
    (tmp_path / "tiers.yaml").write_text(textwrap.dedent(f"""\
        profiles:
          cluster:
            workdir: {tmp_path}/jobs
            defaults: {{partition: debug, time: "00:10:00", python: {VENV}/python}}
        """))
    result = tmp_path / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(SLURM_CONF=cluster_env["SLURM_CONF"], JUPYTER_TIERS_CONFIG=str(tmp_path / "tiers.yaml"),
               JUPYTER_TIERS_REGISTRY=str(tmp_path / "registry.sqlite"), HOME=str(tmp_path),
               PATH=f"{VENV}:{env['PATH']}")
    # What a portal leaves in the kernel's environment: its own SBATCH_* settings (they reach the
    # job's environment only, through --export, not the outer sbatch's options).
    export = "ALL,SBATCH_TIMELIMIT=00:01:00,SBATCH_JOB_NAME=portal-leak"
    outer = subprocess.run(
        ["sbatch", "--parsable", "-N1", "--cpus-per-task=2", "--mem-per-cpu=200M", "-p", "debug",
         "--time=00:10:00", "-J", "oncl-kernel", f"--export={export}", "-o", str(tmp_path / "kernel.out"),
         "--wrap", f"exec {VENV}/python {tmp_path}/kernel.py {result} {tmp_path}/body.py"],
        env=env, capture_output=True, text=True, timeout=60, check=True)
    outer_id = outer.stdout.strip().split(";")[0]
    try:
        wait_for(result.exists, "the kernel's report (see kernel.out)", GUARD)
    finally:
        subprocess.run(["scancel", outer_id], env=env, check=False, timeout=60)
    got = json.loads(result.read_text())
    log = (tmp_path / "kernel.out").read_text()
    assert got["outer"] == outer_id and got["enclosing"] == outer_id, log
    assert got["sources"] == ["built-in", str(tmp_path / "tiers.yaml")]
    assert got["transport"] == "LocalTransport"
    assert got["state"] == "COMPLETED", got
    inner = got["inner"]
    assert inner != outer_id
    shown = got["scontrol"]
    assert _field(shown, "JobName") == "oncl-nested"  # not the portal's SBATCH_JOB_NAME
    assert _field(shown, "TimeLimit") == "00:10:00"  # not its SBATCH_TIMELIMIT
    assert _field(shown, "NumNodes") in ("2", "2-2")  # 2-2 while pending
    assert _field(shown, "CPUs/Task") == "2"
    assert _field(shown, "MinMemoryNode") == "300M"  # its own --mem, not the parent's per-CPU memory
    seen = [line for line in got["logs"].splitlines() if " seen " in f" {line}"]
    assert len(seen) == 2, got["logs"]
    for line in seen:
        values = ast.literal_eval(line.split("seen ", 1)[1])  # the rank printed a dict's repr
        assert values["SLURM_JOB_ID"] == inner, line  # its own job, not the parent's
        assert values["SLURM_MEM_PER_CPU"] is None and values["SBATCH_TIMELIMIT"] is None, line
        assert values["SLURM_CPUS_PER_TASK"] == "2", line


def test_doctor_checks_the_builtin_cluster_profile_with_local_commands(
        cluster_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_tiers.config.profiles import load_config
    from jupyter_tiers.doctor import run_doctor
    from jupyter_tiers.doctor.model import Status

    monkeypatch.setenv("SLURM_CONF", cluster_env["SLURM_CONF"])
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("JUPYTER_TIERS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    report = run_doctor(load_config(), ["cluster"]).profiles[0]
    got = {c.name: c for c in report.checks}
    assert "login" not in got and "ssh route" not in got
    assert got["this machine"].status is Status.OK
    for name in ("slurm tools", "partitions", "workdir", "sbatch --test-only"):
        assert got[name].status is Status.OK, got[name]
    assert "partition debug" in got["sbatch --test-only"].detail


def test_the_sidebars_shared_watcher_follows_a_job_of_the_builtin_cluster_profile(
        cluster_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's Hub, inside a job of its own (SLURM_JOB_ID of the portal's job in its
    environment), watches a job of the built-in profile through local commands to its end."""
    from jupyter_tiers import api
    from jupyter_tiers.faces.server.hub import Hub

    tmp_path.chmod(0o755)
    (tmp_path / "tiers.yaml").write_text(textwrap.dedent(f"""\
        profiles:
          cluster:
            workdir: {tmp_path}/jobs
            status_interval: 1
            defaults: {{partition: debug, time: "00:10:00", python: {VENV}/python}}
        """))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tmp_path / "tiers.yaml"))
    monkeypatch.setenv("SLURM_CONF", cluster_env["SLURM_CONF"])
    monkeypatch.setenv("SLURM_JOB_ID", "999999")  # the server's own (portal) job: not inherited
    monkeypatch.setenv("SLURM_MEM_PER_CPU", "100")
    gate = tmp_path / "end-now"
    tier = api.connect_batch("cluster")
    hub = Hub(scan_interval=0.2)
    messages: list[dict[str, object]] = []
    try:
        job = tier.submit(tier.make_spec(
            f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.1)\n"
            "print('job', os.environ['SLURM_JOB_ID'], flush=True)\n", name="oncl-hub", mem="200M"))
        token, snapshot = hub.listen(messages.append)
        # the server's own job first, marked (never watched, no Cancel), then the submitted one
        assert [i["key"] for i in snapshot["items"]] == ["cluster/999999", job.key]
        assert snapshot["items"][0]["own"] is True and "own" not in snapshot["items"][1]
        wait_for(lambda: hub.watched() == [job.key], "the job to be watched", GUARD)
        gate.touch()

        def ended() -> bool:
            return any(m["type"] == "update" and any(
                i["key"] == job.key and i["terminal"] for i in m["items"])  # type: ignore[attr-defined]
                for m in list(messages))

        wait_for(ended, "the hub to deliver the job's end", GUARD)
        end = [i for m in messages if m["type"] == "update" for i in m["items"]  # type: ignore[attr-defined]
               if i["key"] == job.key and i["terminal"]][-1]
        assert end["state"] == "COMPLETED", end
        assert job.logs().strip() == f"0: job {job.id}"
        hub.unlisten(token)
    finally:
        hub.stop()
        for rec in tier.registry.list(limit=100):
            tier.cancel(rec)
        api.close_all()
