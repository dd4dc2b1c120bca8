"""Two-factor login nodes from a real IPython kernel: the code asked in the notebook (the kernel's
getpass: a password-style input_request, as JupyterLab shows it), once for several jobs; a
reconnect in the background is refused with a clear message and the next cell asks again; a
headless run (nbclient, no stdin) fails at once naming the profile and host.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from tests.cluster.test_twofactor import secret, tiers_2fa, twofactor  # noqa: F401 (fixtures)
from tests.cluster.twofactor import PROFILE, contains_code, next_code

pytestmark = pytest.mark.cluster

TIMEOUT = 300  # a bound on waiting for a cell, not an assertion about time


class Cell:
    """What one executed cell sent: its text outputs, errors and input requests."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.errors: list[dict[str, Any]] = []
        self.input_requests: list[dict[str, Any]] = []

    @property
    def all_text(self) -> str:
        return "".join(self.text) + json.dumps(self.errors)


@pytest.fixture
def kernel(tiers_2fa: Path, tmp_path: Path) -> Iterator[Any]:  # noqa: F811
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def jobs_recorded(path: Path) -> int:
    """Rows in a registry file (read directly: the kernel may run another build of the code)."""
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM jobs").fetchone()[0])


def execute(kc: Any, code: str, answer: str | None = None) -> Cell:
    """Run ``code`` with stdin allowed, answering each input request with ``answer``."""
    cell = Cell()

    def on_output(msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            cell.text.append(content["text"])
        elif kind in ("execute_result", "display_data"):
            cell.text.append(content["data"].get("text/plain", ""))
        elif kind == "error":
            cell.errors.append({"ename": content["ename"], "evalue": content["evalue"]})

    def on_stdin(msg: dict[str, Any]) -> None:
        cell.input_requests.append(msg["content"])
        kc.input(answer if answer is not None else "")

    reply = kc.execute_interactive(
        code, allow_stdin=True, output_hook=on_output, stdin_hook=on_stdin, timeout=TIMEOUT
    )
    if reply["content"]["status"] == "error" and not cell.errors:
        cell.errors.append({"ename": reply["content"]["ename"], "evalue": reply["content"]["evalue"]})
    return cell


def test_the_code_is_asked_in_the_notebook_once_for_several_jobs(
    kernel: Any, secret: str, tmp_path: Path  # noqa: F811
) -> None:
    assert not execute(kernel, "%load_ext jupyter_tiers").errors
    code = next_code(secret)
    first = execute(kernel, f"%%slurm_train --profile {PROFILE} --wait --text --name tf-a\n"
                            "print('first job')\n", answer=code)
    assert not first.errors, first.all_text
    [request] = first.input_requests
    assert request["password"] is True and request["prompt"] == "Verification code: "
    assert f"profile '{PROFILE}' (root@127.0.0.1:" in first.all_text
    assert "asks for a one-time code" in first.all_text
    assert "COMPLETED" in first.all_text

    second = execute(kernel, f"%%slurm_train --profile {PROFILE} --wait --text --name tf-b\n"
                             "print('second job')\n", answer=code)
    assert not second.errors and second.input_requests == [], second.all_text
    assert "COMPLETED" in second.all_text
    login = execute(kernel, f"%tiers login -p {PROFILE}")
    assert login.input_requests == [] and "was already connected" in login.all_text

    # The link drops while no cell runs: the watcher's thread cannot ask, and says so at once.
    background = execute(kernel, (
        "import threading\n"
        "from jupyter_tiers import api\n"
        f"t = api.connect({PROFILE!r}).transport\n"
        "t._conn.drop()\n"
        "seen = []\n"
        "def bg():\n"
        "    try:\n"
        "        t.run(['true'])\n"
        "    except Exception as e:\n"
        "        seen.append(f'{type(e).__name__}: {e}')\n"
        "th = threading.Thread(target=bg); th.start(); th.join(120)\n"
        "print(seen[0])\n"
    ))
    assert background.input_requests == [], background.all_text
    assert "OneTimeCodeRequired: profile 'box2fa'" in background.all_text
    assert "%tiers login -p PROFILE" in background.all_text
    # The next cell on the profile asks again, and the job runs.
    again = execute(kernel, f"%tiers login -p {PROFILE}", answer=next_code(secret))
    assert len(again.input_requests) == 1 and not again.errors, again.all_text
    assert f"{PROFILE} connected to" in again.all_text
    assert "a reconnect asks again" in again.all_text

    listing = execute(kernel, f"%tiers jobs -p {PROFILE}")
    assert "tf-a" in listing.all_text and "tf-b" in listing.all_text, listing.all_text
    for cell in (first, second, login, background, again, listing):
        assert not contains_code(cell.all_text, code)
    registry = tmp_path / "registry.sqlite"
    assert not contains_code(registry.read_bytes().decode("utf-8", "replace"), code)


def test_a_headless_run_fails_at_once_naming_the_profile(
    tiers_2fa: Path, twofactor: dict[str, str], tmp_path: Path  # noqa: F811
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext jupyter_tiers"),
        nbformat.v4.new_code_cell(f"%%slurm_train --profile {PROFILE} --wait --name headless\n"
                                  "print('never runs')\n"),
    ]
    client = NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    # IPython prints a UsageError on stderr (no traceback, no error output).
    printed = "".join(o.get("text", "") for o in nb.cells[1].outputs if o["output_type"] == "stream")
    port = twofactor["JT_SSH_2FA_PORT"]
    assert printed.startswith(
        f"UsageError: profile '{PROFILE}' (root@127.0.0.1:{port}) asks for a one-time code after "
        "the key (keyboard-interactive), and this kernel's client does not accept input (a "
        "headless run"
    ), nb.cells[1].outputs
    assert "Traceback" not in printed
    assert jobs_recorded(tmp_path / "registry.sqlite") == 0  # nothing was submitted
