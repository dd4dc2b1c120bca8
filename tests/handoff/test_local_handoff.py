"""The handoff and the routing guard through the magics on the local tier, for real: ranks,
supervisors and the served replica are real processes (nothing mocked). Waits are bounded only so
a broken tier fails instead of hanging; no assertion is on time."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.data.handoff import decode_detail
from tests.handoff.conftest import TRAIN
from tests.helpers import tiers_shell

# Reads the model at start (as a model server loads weights) and answers every GET with it.
SERVE = """\
import http.server, os
path = os.environ["JT_MODEL_PATH"]
assert path == "{model_path}", (path, "{model_path}")
weights = open(path).read()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{weights} from {path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    return tiers_shell()


pytestmark = pytest.mark.usefixtures("isolated_local")


def cell(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], magic: str, line: str,
         body: str) -> tuple[str, str]:
    capsys.readouterr()
    ip.run_cell_magic(magic, line, body)
    captured = capsys.readouterr()
    return captured.out, captured.err


def refused(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], magic: str, line: str,
            body: str) -> str:
    """Run the cell as a user would: a one-line UsageError, no traceback. Returns its message."""
    capsys.readouterr()
    result = ip.run_cell(f"%%{magic} {line}\n{body}")
    captured = capsys.readouterr()
    assert isinstance(result.error_in_exec, UsageError), (result.error_in_exec, captured)
    assert "Traceback" not in captured.out + captured.err
    message = str(result.error_in_exec)
    assert "\n" not in message
    return message


def test_checkpoint_recorded_then_served_locally_from_a_job_variable(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = cell(ip, capsys, "slurm_train", "--name ft --ntasks-per-node 2 --wait --out job", TRAIN)
    job = ip.user_ns["job"]
    rec = Registry().get(job.key)
    directory, newest = decode_detail(rec.detail)
    workdir = Path(rec.jobdir).parent
    assert directory == f"{workdir}/ft/{job.id}/checkpoints"
    assert newest == f"{directory}/ckpt-000100.pt"
    # every rank saw the same directory, already created before it started
    assert sorted(re.findall(r"^(\d): checkpoint dir (\S+) (\w+)$", out, re.M)) == [
        ("0", directory, "exists"), ("1", directory, "exists")]
    summary = out.strip().splitlines()[-1]
    assert summary.startswith(f"job {job.id} COMPLETED in ") and summary.endswith(f" — checkpoint {newest}")

    out, _ = cell(ip, capsys, "k8s_serve", "--name ft-svc --model-from job --wait --out svc", SERVE)
    svc = ip.user_ns["svc"]
    assert svc.url and svc.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(svc.url, timeout=30) as resp:
        assert resp.read().decode() == f"weights of step 100 from {newest}"
    stored = Registry().get(svc.key)
    assert (stored.spec["model_path"], stored.spec["model_source"]) == (newest, f"local/{job.id} (ft)")
    assert "model from local/" in out  # the text view's header names the source job


def test_model_from_by_id_and_by_name_resolve_the_newest_checkpoint(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    cell(ip, capsys, "slurm_train", "--name by-name --wait --out first", TRAIN)
    cell(ip, capsys, "slurm_train", "--name by-name --wait --out second --resubmit", TRAIN)
    first, second = ip.user_ns["first"], ip.user_ns["second"]
    for ref, job in ((first.id, first), ("by-name", second)):
        out, _ = cell(ip, capsys, "k8s_serve", f"--name shown --model-from {ref} --dry-run", SERVE)
        path = f"{Path(job.record.jobdir).parent}/by-name/{job.id}/checkpoints/ckpt-000100.pt"
        assert f'assert path == "{path}"' in out, out


def test_every_local_refusal_names_the_job(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    assert refused(ip, capsys, "k8s_serve", "--name x --model-from nope", SERVE).startswith(
        "--model-from nope: no such job in the registry")

    cell(ip, capsys, "slurm_train", "--name empty --wait --out empty", "print('no checkpoint')\n")
    empty = ip.user_ns["empty"]
    message = refused(ip, capsys, "k8s_serve", "--name x --model-from empty", SERVE)
    assert f"job {empty.id} (empty) completed but left no checkpoint in " in message

    cell(ip, capsys, "slurm_train", "--name failing --wait --out failing", "import sys\nsys.exit(3)\n")
    failing = ip.user_ns["failing"]
    message = refused(ip, capsys, "k8s_serve", f"--name x --model-from {failing.id}", SERVE)
    assert message == (f"--model-from: job {failing.id} (failing) is FAILED, not COMPLETED; a model is "
                       "served from a job that completed")

    cell(ip, capsys, "slurm_train", "--name sleeper --out sleeper",
         "import time\ntime.sleep(600)\n")
    sleeper = ip.user_ns["sleeper"]
    message = refused(ip, capsys, "k8s_serve", "--name x --model-from sleeper", SERVE)
    expected = rf"--model-from: job {sleeper.id} \(sleeper\) is (PENDING|RUNNING), not COMPLETED; .*"
    assert re.fullmatch(expected, message), message

    cell(ip, capsys, "k8s_serve", "--name plain --dry-run", "print('x')\n")  # nothing applied
    cell(ip, capsys, "k8s_serve", "--name plain-svc --wait", SERVE.replace(
        'path = os.environ["JT_MODEL_PATH"]\nassert path == "{model_path}", (path, "{model_path}")\n'
        'weights = open(path).read()\n', 'path = weights = "none"\n'))
    assert "is a service, not a training job" in refused(
        ip, capsys, "k8s_serve", "--name x --model-from plain-svc", SERVE)


TRAINING_BODY = "import torch.distributed as dist\ndist.init_process_group('gloo')\n"
SERVER_BODY = "import http.server\nhttp.server.HTTPServer(('', 8000), None).serve_forever()\n"


def test_guard_refuses_training_on_the_serve_magic_unless_forced(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    message = refused(ip, capsys, "k8s_serve", "--name trainer", TRAINING_BODY)
    assert message.startswith("%%k8s_serve: this cell calls init_process_group (line 2) — a training shape;")
    assert "%%slurm_train" in message and "--force" in message
    out, _ = cell(ip, capsys, "k8s_serve", "--name trainer --force --dry-run", TRAINING_BODY)
    assert "init_process_group" in out  # past the guard: the plan is printed


def test_guard_warns_about_a_server_on_the_train_magic_unless_forced(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    out, err = cell(ip, capsys, "slurm_train", "--name server --dry-run", SERVER_BODY)
    warnings = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(warnings) == 1, err
    assert warnings[0].startswith("%%slurm_train warning: this cell calls serve_forever (line 2)")
    assert "%%k8s_serve" in warnings[0]
    assert "JT_CHECKPOINT_DIR" in out  # a warning only: the job is still rendered
    out, err = cell(ip, capsys, "slurm_train", "--name server --dry-run --force", SERVER_BODY)
    assert "warning" not in err and "JT_CHECKPOINT_DIR" in out


def test_job_widget_header_shows_the_checkpoint(tmp_path: Path) -> None:
    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.faces.widgets.job_view import JobView
    from jupyter_tiers.local.tier import LocalTier

    tier = LocalTier(Profile(name="local", tier="local", settings={"workdir": str(tmp_path / "jobs")}),
                     Registry(), watcher_options={"status_interval": 0.5, "rank_interval": 0.2,
                                                  "first_poll": 0.1})
    try:
        job = tier.submit(tier.make_spec(TRAIN, name="widget"))
        view = JobView(job)
        status = view.wait(120)
        assert status is not None and status.state.value == "COMPLETED"
        expected = f"{tmp_path}/jobs/widget/{job.id}/checkpoints/ckpt-000100.pt"
        assert view.checkpoint == expected
        assert view.summary.endswith(f" — checkpoint {expected}")
        view.close()
    finally:
        tier.close()


def test_a_bad_checkpoint_dir_is_a_usage_error_naming_the_option(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    message = refused(ip, capsys, "slurm_train", "--name x --checkpoint-dir rel/dir --dry-run", "print(1)\n")
    assert message == ("--checkpoint-dir: 'rel/dir' is not allowed; use an absolute path or ~/path of "
                       "letters, digits and _ . / + @ = , - (no '..')")
    out, _ = cell(ip, capsys, "slurm_train", "--name x --checkpoint-dir /tmp/jt-ckpt --dry-run", "print(1)\n")
    assert "export JT_CHECKPOINT_DIR=/tmp/jt-ckpt\n" in out
