"""``%%k8s_serve`` and ``%tiers`` on the local tier, through IPython's test shell as a user types
them: no tiers.yaml at all, so the built-in ``local`` profile serves. Real processes; the text
view (``JUPYTER_TIERS_DISPLAY=text``), since the test shell has no widget front end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers import api
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.engine.tier import Service
from jupyter_tiers.local.serve_tier import LocalServeTier
from tests.helpers import isolate_tiers, tiers_shell

from .conftest import CRASH_BODY, HTTP_BODY, service_processes, stop_everything, wait_for

# "in HH:MM:SS" only when the view saw the rollout in progress (a fast replica may be ready first).
SUMMARY_READY = re.compile(r"^service web READY (\d)/(\d)(?: in \d\d:\d\d:\d\d)? — (http://127\.0\.0\.1:\d+) "
                           r"\(revision (\d+)\)$", re.M)


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    return tiers_shell()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No tiers.yaml anywhere (the built-in local profile), the Jupyter data dir (and so the
    local workdir) under tmp_path, text display, the venv's python first on PATH."""
    isolate_tiers(tmp_path, monkeypatch)
    workdir = tmp_path / "jupyter-data" / "tiers" / "local-jobs"
    yield workdir
    api.close_all()
    stop_everything(workdir, Registry())


def run(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], cell: str) -> str:
    capsys.readouterr()
    result = ip.run_cell(cell)
    out = capsys.readouterr()
    assert result.error_in_exec is None, (result.error_in_exec, out.out, out.err)
    assert "Traceback" not in out.out + out.err, out
    return out.out


def terminal_tiers(tmp_path: Path, *args: str) -> str:
    """``jupyter tiers ARGS`` in a new process with this test's data dir, registry and no tiers.yaml."""
    code = ("import sys\nfrom pathlib import Path\nfrom jupyter_tiers import config\n"
            f"config.SYSTEM_PATH = config.USER_PATH = Path({str(tmp_path / 'none.yaml')!r})\n"
            "from jupyter_tiers.faces.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def usage_error(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], cell: str) -> str:
    capsys.readouterr()
    result = ip.run_cell(cell)
    printed = "".join(capsys.readouterr())
    assert isinstance(result.error_in_exec, UsageError), (result.error_in_exec, printed)
    assert "Traceback" not in printed, printed
    message = str(result.error_in_exec)
    assert message and "\n" not in message.strip(), message
    return message


@pytest.mark.local_procs
def test_serve_query_scale_restart_logs_delete_from_the_notebook(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], _isolated: Path) -> None:
    out = run(ip, capsys, "%%k8s_serve --name web --readiness /health --image vllm/vllm-openai:v0.6.0 "
              f"--gpus 1 --node-selector pool=gpu --wait --text --out svc\n{HTTP_BODY}")
    assert "service web applied to local" in out, out
    assert "! not applied on the local tier: image=vllm/vllm-openai:v0.6.0, gpus=1, node_selector=pool=gpu" \
        in out, out
    match = SUMMARY_READY.search(out)
    assert match and match.group(1, 2, 4) == ("1", "1", "1"), out
    url = match.group(3)
    svc = ip.user_ns.pop("svc")
    assert isinstance(svc, Service) and isinstance(svc.tier, LocalServeTier) and svc.url == url
    with urllib.request.urlopen(url + "/health", timeout=30) as resp:
        first = resp.read().decode()
    assert first.startswith("web-")

    table = run(ip, capsys, "%tiers jobs")
    row = next(line.split() for line in table.splitlines() if line.split()[:2] == ["web", "service"])
    assert row[3:7] == ["local", "local", "READY", "1/1"] and url in row, table

    # the same from a terminal, in another process
    home = _isolated.parents[2]
    terminal = terminal_tiers(home, "jobs")
    row_re = r"^web +service +web +local +local +READY +1/1 +" + re.escape(url)
    assert re.search(row_re, terminal, re.M), terminal
    assert terminal_tiers(home, "logs", "web", "--tail", "1").startswith(first + ": ")

    out = run(ip, capsys, "%tiers scale web 2")
    assert out.strip() == "service web scaled to 2"
    wait_for(lambda: svc.status().ready == 2, "two ready replicas")
    out = run(ip, capsys, "%tiers attach web --text --wait")
    match = SUMMARY_READY.search(out)
    assert match and match.group(1, 2, 3) == ("2", "2", url), out

    assert "listening on" in run(ip, capsys, f"%tiers logs web --pod {first} --tail 1")
    merged = run(ip, capsys, "%tiers logs web")
    assert f"{first}: listening on" in merged

    out = run(ip, capsys, "%tiers restart web")
    assert out.strip() == "service web restarting (rolling update)"
    wait_for(lambda: svc.status().revision == "2" and svc.status().state.value == "READY"
             and first not in {p.name for p in svc.status().pods}, "the rolling restart")

    svcdir = Path(svc.record.jobdir)
    assert run(ip, capsys, "%tiers delete web").strip() == "service web deleted"
    assert service_processes(svcdir) == [] and not svcdir.exists()
    assert Registry().get("web").state == "DELETED"


@pytest.mark.local_procs
def test_crash_loop_summary_and_line_magic_delete(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                                  _isolated: Path) -> None:
    out = run(ip, capsys, f"%%k8s_serve --name crashy --wait --text\n{CRASH_BODY}")
    assert re.search(r"pod crashy-\S+: CrashLoopBackOff \(exit 3\): back-off 10s restarting failed", out), out
    assert re.search(r"^service crashy FAILED(?: after \d\d:\d\d:\d\d)?: pod crashy-\S+ CrashLoopBackOff "
                     r"\(exit 3\) — last line: about to fail$", out, re.M), out
    out = run(ip, capsys, "%k8s_serve --name crashy --delete")
    assert out.strip() == "service crashy deleted"
    assert service_processes(_isolated) == []


def test_dry_run_starts_nothing_and_names_what_is_ignored(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], _isolated: Path) -> None:
    out = run(ip, capsys, "%%k8s_serve --name plan --shell --replicas 2 --image vllm/vllm-openai:v0.6.0 "
              "--gpus 1 --env HF_TOKEN=s3cret-value --dry-run\nvllm serve /models/x --port {port}\n")
    assert "local service 'plan': 2 replicas" in out
    assert "# Not applied locally: image=vllm/vllm-openai:v0.6.0, gpus=1" in out
    assert "vllm serve /models/x --port ${PORT}" in out
    assert "HF_TOKEN" in out and "s3cret-value" not in out
    assert not (_isolated / "services").exists()
    assert Registry().list() == []


def test_bad_local_input_is_a_one_line_usage_error(ip: InteractiveShell,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert "--replicas" in usage_error(ip, capsys, "%%k8s_serve --replicas 65 --dry-run\nprint(1)\n")
    assert "--name" in usage_error(ip, capsys, "%%k8s_serve --name 42 --dry-run\nprint(1)\n")
    message = usage_error(ip, capsys, "%tiers scale nothing-here 2")
    assert "nothing-here" in message


def test_dry_run_line_fuzz_on_the_local_profile(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                                _isolated: Path) -> None:
    """Seeded random %%k8s_serve lines with --dry-run on the built-in local profile: each prints
    the plan or fails with a one-line UsageError; none starts anything or records anything."""
    import random

    rng = random.Random(424242)
    options = ["--name", "--replicas", "--port", "--readiness", "--image", "--gpus", "--cpu", "--memory",
               "--python", "--env", "--node-selector", "--autoscale", "--strategy", "--image-pull-policy",
               "--shell", "--secret-env"]
    values = ["web", "3", "0", "65", "-1", "8000", "99999", "/health", "health", "vllm/x:1", "UPPER", "1",
              "500m", "2Gi", "python3", "/bad path", "K=V", "=x", "pool=gpu", "1:3:50", "3:1", "rolling",
              "bluegreen", "Never", "sometimes", "a/b", "'a b'", "''", "{port}", "é", "x" * 70]
    printed_plan = 0
    for _ in range(150):
        words = []
        for _ in range(rng.randint(0, 5)):
            option = rng.choice(options)
            words.append(option if option == "--shell" else f"{option} {rng.choice(values)}")
        capsys.readouterr()
        result = ip.run_cell(f"%%k8s_serve --dry-run {' '.join(words)}\nprint('serving')\n")
        out = "".join(capsys.readouterr())
        assert "Traceback" not in out, (words, out)
        if result.error_in_exec is None:
            assert "# jupyter-tiers local service" in out, (words, out)
            printed_plan += 1
        else:
            assert isinstance(result.error_in_exec, UsageError), (words, result.error_in_exec)
            assert "\n" not in str(result.error_in_exec).strip(), (words, result.error_in_exec)
    assert printed_plan > 10  # the fuzz reaches the renderer, not only the parser
    assert not (_isolated / "services").exists() and Registry().list() == []
