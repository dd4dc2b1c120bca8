"""JupyterLab running inside a real Slurm job of the test cluster (as Open OnDemand and
batchspawner start it): the server gets that job's own SLURM_* environment, read from inside the
job. The Tiers sidebar shows the job first, marked "this notebook", with no Cancel button and no
detail panel; its REST cancel is a 409 naming why; a kernel's ``%tiers jobs`` says once that the
notebook runs inside job N on node X, and ``%tiers cancel N`` is refused. The job is still
RUNNING afterwards (``squeue``); the test cancels it itself at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.cluster.conftest import VENV_BIN
from tests.helpers import wait_for

from .conftest import API_TIMEOUT_S, UI_TIMEOUT_MS, Lab, _running_lab
from .test_job_widget import open_notebook, run_cell, write_notebook
from .test_sidebar import SIDEBAR_ID

pytestmark = [pytest.mark.browser, pytest.mark.cluster]

GUARD = 240.0
#: What a job's environment passes on to a server it starts (the variables enclosing_job reads,
#: and the rest of Slurm's, as a portal's job script leaves them).
JOB_PREFIXES = ("SLURM_", "SLURMD_")


def squeue_state(job_id: str, env: dict[str, str]) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    return out.stdout.strip()


@pytest.fixture(scope="module")
def portal_job(cluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[dict[str, str]]:
    """A running job of the test cluster standing in for a portal's Jupyter job: it writes its
    own environment to a file, then sleeps. Yields that environment; cancelled at the end."""
    base = tmp_path_factory.mktemp("portal-job")
    base.chmod(0o755)
    dump = base / "job.env"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env["SLURM_CONF"] = cluster_env["SLURM_CONF"]
    sub = subprocess.run(
        ["sbatch", "--parsable", "-N1", "-p", "debug", "--time=00:30:00", "-J", "ood-jupyter",
         "-o", str(base / "job.out"), "--wrap",
         f"{VENV_BIN}/python -c 'import json, os; json.dump(dict(os.environ), open(\"{dump}.tmp\", \"w\"))'"
         f" && mv {dump}.tmp {dump} && exec sleep 1800"],
        env=env, capture_output=True, text=True, timeout=60, check=True)
    job_id = sub.stdout.strip().split(";")[0]
    try:
        wait_for(dump.exists, f"job {job_id} to write its environment", GUARD, interval=0.5)
        job_env = json.loads(dump.read_text())
        assert job_env["SLURM_JOB_ID"] == job_id, job_env
        yield {k: v for k, v in job_env.items() if k.startswith(JOB_PREFIXES)}
    finally:
        subprocess.run(["scancel", job_id], env=env, check=False, timeout=60)


@pytest.fixture(scope="module")
def own_lab(cluster_env: dict[str, str], portal_job: dict[str, str],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab whose server (and kernels) run with the portal job's environment, and a Slurm
    profile that runs on this machine (no host) as the default."""
    base = tmp_path_factory.mktemp("own-lab")
    tiers_yaml = textwrap.dedent(f"""\
        default_profile: here
        profiles:
          here:
            tier: slurm
            workdir: {base}/jobs
            defaults: {{partition: debug, time: "00:10:00", python: {VENV_BIN}/python}}
        """)
    extra = {**portal_job, "SLURM_CONF": cluster_env["SLURM_CONF"]}
    with _running_lab(base, tiers_yaml, extra) as lab:
        yield lab


def post(lab: Lab, path: str) -> tuple[int, Any]:
    req = urllib.request.Request(f"{lab.url}{path}", method="POST", data=b"",
                                 headers={"Authorization": f"token {lab.token}"})
    try:
        with urllib.request.urlopen(req, timeout=API_TIMEOUT_S) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def test_the_notebooks_own_job_is_marked_and_never_cancelled(page: Any, own_lab: Lab,
                                                            portal_job: dict[str, str],
                                                            cluster_env: dict[str, str]) -> None:
    job_id, node = portal_job["SLURM_JOB_ID"], portal_job["SLURMD_NODENAME"]
    key = f"here/{job_id}"
    slurm_env = {**os.environ, "SLURM_CONF": cluster_env["SLURM_CONF"]}
    slurm_env = {k: v for k, v in slurm_env.items() if not k.startswith("SLURM_JOB")}

    # REST: the row, marked, first, under the profile that runs here
    listed = own_lab.api("/jupyter-tiers/api/jobs")
    own = listed["items"][0]
    assert own["key"] == key and own["own"] is True and own["where"] == node, listed
    assert own["name"] == "ood-jupyter" and own["state"] == "RUNNING"

    # The sidebar: the row, its mark and tooltip, no Cancel; a click opens no panel
    page.goto(f"{own_lab.url}/lab?reset&token={own_lab.token}")
    page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]').click()
    side = page.locator(f"#{SIDEBAR_ID}")
    row = side.locator(f'.jt-side-row[data-key="{key}"]')
    expect(row).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(row).to_have_attribute("data-own", "1")
    expect(row.locator(".jt-side-own")).to_have_text("this notebook")
    expect(row.locator(".jt-side-own")).to_have_attribute("title", own["own_note"])
    expect(row.locator(".jt-side-where")).to_have_text(node)
    expect(row.locator("button")).to_have_count(0)
    expect(side.locator(".jt-side-cancel")).to_have_count(0)
    row.click()
    row.press("Enter")
    # openItem adds its panel synchronously on the click; the wait only gives a wrong one time
    page.wait_for_timeout(1000)
    expect(page.locator(".jt-detail")).to_have_count(0)

    # REST cancel: refused, named; the job still runs
    status, answer = post(own_lab, f"/jupyter-tiers/api/jobs/here/{job_id}/cancel")
    assert status == 409, answer
    assert f"job {job_id} is the Slurm job this notebook runs inside on node {node}" in answer["error"]

    # A kernel of this server inherits the job: %tiers jobs says so once; %tiers cancel refuses
    name = write_notebook(own_lab, "inside.ipynb", "%load_ext jupyter_tiers", "%tiers jobs",
                          "%tiers jobs", f"%tiers cancel {job_id}")
    cells = open_notebook(page, own_lab, name)
    for index in range(4):
        run_cell(page, cells, index)
    sentence = f"this notebook runs inside Slurm job {job_id} on node {node}"
    expect(cells.nth(1).locator(".jp-OutputArea")).to_contain_text(sentence)
    expect(cells.nth(2).locator(".jp-OutputArea")).not_to_contain_text("runs inside")
    expect(cells.nth(3).locator(".jp-OutputArea")).to_contain_text(
        f"job {job_id} is the Slurm job this notebook runs inside")
    assert squeue_state(job_id, slurm_env) == "RUNNING"

