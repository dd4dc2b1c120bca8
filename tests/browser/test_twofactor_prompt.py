"""The one-time code prompt in a real JupyterLab (headless chromium): a `%%slurm_train` cell on a
profile whose login node wants a code shows the server's prompt as text with a password field
under the running cell; after the code the job widget appears, and the next job on the profile
asks nothing. The login node is the test cluster's second sshd (tests/cluster/twofactor.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.cluster.twofactor import PROFILE, next_code, profile_yaml, start_twofactor_sshd

from .conftest import JOB_TIMEOUT_MS, OUTPUT, UI_TIMEOUT_MS, Lab, _require_browser_tools, _running_lab
from .test_job_widget import open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]


@pytest.fixture(scope="module")
def lab2fa(
    cluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Lab, str]]:
    _require_browser_tools()
    twofactor = start_twofactor_sshd()
    base = tmp_path_factory.mktemp("lab2fa")
    with _running_lab(base, profile_yaml(cluster_env, twofactor)) as server:
        yield server, twofactor["JT_SSH_2FA_TOTP_SECRET"]


def test_the_code_is_asked_under_the_cell_once_for_the_profile(lab2fa: tuple[Lab, str], page: Any) -> None:
    lab, secret = lab2fa
    name = write_notebook(
        lab, "twofactor.ipynb",
        "%load_ext jupyter_tiers",
        f"%%slurm_train --profile {PROFILE} --name tf-browser\nprint('hello through two factors')",
        f"%%slurm_train --profile {PROFILE} --wait --text --name tf-browser-2\nprint('second job')",
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)

    first = cells.nth(1)
    first.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    field = first.locator("input.jp-Stdin-input")
    expect(field).to_be_visible(timeout=UI_TIMEOUT_MS)
    assert field.get_attribute("type") == "password"
    expect(first.locator(".jp-Stdin-prompt")).to_have_text(re.compile(r"^Verification code:\s*$"))
    expect(first.locator(".jp-OutputArea-output").first).to_contain_text(
        f"profile '{PROFILE}' (root@127.0.0.1:"
    )
    expect(first.locator(".jp-OutputArea-output").first).to_contain_text("asks for a one-time code")
    OUTPUT.mkdir(exist_ok=True)
    first.screenshot(path=str(OUTPUT / "twofactor-prompt.png"))
    code = next_code(secret)
    field.fill(code)
    field.press("Enter")
    widget = first.locator(".jt-job")
    expect(widget.locator(".jt-title")).to_have_text(re.compile(r"^job \d+ · "), timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)

    second = run_cell(page, cells, 2)
    expect(second.locator(".jp-OutputArea-output").last).to_contain_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    assert second.locator("input.jp-Stdin-input").count() == 0
    assert code not in page.locator(".jp-Notebook").inner_text()
