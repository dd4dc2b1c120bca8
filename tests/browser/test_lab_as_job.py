"""JupyterLab itself started as a Slurm job of the test cluster, the way Open OnDemand's Jupyter
app does (``sbatch`` of a script that runs ``jupyter lab`` with --cpus-per-task and
--mem-per-cpu), driven in chromium. From a notebook of it, a 2-node ``%%slurm_train`` with a
``--mem`` and ``--cpus-per-task`` of its own goes through the built-in ``cluster`` profile (no
SSH): it runs with its own resources (``scontrol show job``) and its ranks see their own job id,
not the server's. The cell says once that the notebook runs inside the server's job; the sidebar
shows that job marked "this notebook" without Cancel, and the new job with its Cancel.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.config.registry import Registry
from tests.cluster.conftest import VENV_BIN
from tests.helpers import wait_for

from .conftest import JOB_TIMEOUT_MS, UI_TIMEOUT_MS, Lab, _lab_process
from .test_job_widget import open_notebook, run_cell, write_notebook
from .test_sidebar import SIDEBAR_ID

pytestmark = [pytest.mark.browser, pytest.mark.cluster]

GUARD = 300.0
# What each rank prints: its job id and what an inherited allocation would have left.
BODY = """\
import os
print("seen", os.environ["SLURM_JOB_ID"], os.environ.get("SLURM_CPUS_PER_TASK"),
      os.environ.get("SLURM_MEM_PER_CPU", "unset"), flush=True)
"""


def _field(text: str, name: str) -> str:
    match = re.search(rf"(?:^|\s){re.escape(name)}=(\S+)", text)
    assert match, f"{name} not in {text!r}"
    return match.group(1)


def slurm_env(cluster_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env["SLURM_CONF"] = cluster_env["SLURM_CONF"]
    return env


def squeue_ids(name: str, env: dict[str, str]) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i"], env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    return out.stdout.split()


@pytest.fixture(scope="module")
def lab_job(cluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[Lab, str]]:
    """JupyterLab as the batch step of a Slurm job (``sbatch --wait`` stays in the foreground as
    a portal's session does); yields the lab and the job's name. Its job is cancelled at the end
    whatever happened (the server's shutdown normally ends it first)."""
    base = tmp_path_factory.mktemp("ood-lab")
    base.chmod(0o755)
    name = f"ood-lab-{uuid.uuid4().hex[:8]}"
    tiers_yaml = textwrap.dedent(f"""\
        profiles:
          cluster:
            workdir: {base}/jobs
            defaults: {{partition: debug, time: "00:10:00", python: {VENV_BIN}/python}}
        """)
    env = slurm_env(cluster_env)

    def as_job(cmd: list[str]) -> list[str]:
        return ["sbatch", "--wait", "--parsable", "-N1", "--cpus-per-task=2", "--mem-per-cpu=500M",
                "-p", "debug", "--time=00:30:00", "-J", name, "-o", str(base / "jupyter-lab.log"),
                "--wrap", f"exec {shlex.join(cmd)}"]

    try:
        with _lab_process(base, tiers_yaml, {"SLURM_CONF": env["SLURM_CONF"]}, as_job) as process:
            yield process.server, name
    finally:
        for job_id in squeue_ids(name, env):
            subprocess.run(["scancel", job_id], env=env, check=False, timeout=60)


def test_a_job_submitted_from_lab_running_as_a_job_gets_its_own_resources(
        page: Any, lab_job: tuple[Lab, str], cluster_env: dict[str, str]) -> None:
    lab, outer_name = lab_job
    env = slurm_env(cluster_env)
    outer = wait_for(lambda: squeue_ids(outer_name, env), "the lab's own job in squeue", GUARD)[0]

    name = write_notebook(lab, "in-job.ipynb", "%load_ext jupyter_tiers",
                          "%%slurm_train --profile cluster --nodes 2 --mem 300M --cpus-per-task 2 "
                          "--name ood-inner\n" + BODY)
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    expect(widget).to_be_visible(timeout=UI_TIMEOUT_MS)
    outputs = cell.locator(".jp-OutputArea")
    note = re.compile(rf"this notebook runs inside Slurm job {outer} on node node\d+")
    expect(outputs).to_contain_text(note)

    records = wait_for(lambda: [r for r in Registry(lab.registry).list(limit=50) if r.name == "ood-inner"],
                       "the inner job in the lab's registry", GUARD)
    inner = records[0].job_id
    assert inner != outer and records[0].profile == "cluster"
    shown = subprocess.run(["scontrol", "show", "job", inner], env=env, capture_output=True,
                           text=True, timeout=60, check=True).stdout
    assert _field(shown, "NumNodes") in ("2", "2-2"), shown
    assert _field(shown, "CPUs/Task") == "2", shown
    assert _field(shown, "MinMemoryNode") == "300M", shown  # its own --mem, not the lab's per-CPU

    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    seen = widget.locator(".jt-log .jt-line").filter(has_text="seen ")
    expect(seen).to_have_count(2, timeout=JOB_TIMEOUT_MS)
    for text in seen.locator(".jt-text").all_text_contents():
        assert text.split() == ["seen", inner, "2", "unset"], text  # its own id, no inherited memory

    # The sidebar: the lab's own job marked, no Cancel; the inner job is an ordinary row
    page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]').click()
    side = page.locator(f"#{SIDEBAR_ID}")
    own = side.locator(f'.jt-side-row[data-key="cluster/{outer}"]')
    expect(own).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(own.locator(".jt-side-own")).to_have_text("this notebook")
    expect(own.locator("button")).to_have_count(0)
    expect(side.locator(f'.jt-side-row[data-key="cluster/{inner}"]')).to_be_visible()
    assert squeue_ids(outer_name, env) == [outer]  # the lab's job still runs
