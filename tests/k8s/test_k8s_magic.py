"""``%%k8s_serve`` and ``%tiers`` on services, driven through IPython's test shell as a user
types them, against the Kubernetes emulator (text display: the test shell has no widgets)."""

from __future__ import annotations

import random
import re
import shlex
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.engine.handles import Service
from jupyter_tiers.spec.options import SERVE_OPTIONS
from tests.helpers import ipython_test_shell
from tests.k8s.conftest import GUARD, PROFILE, SERVER, wait_for, write_tiers_yaml
from tests.k8s_emulator.emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_READY = re.compile(
    r"^service (\S+) READY (\d+)/(\d+) in \d\d:\d\d:\d\d — (http://[a-z0-9.-]+:\d+)( \(revision \d+\))?$")


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = ipython_test_shell()
    shell.run_line_magic("load_ext", "jupyter_tiers")
    return shell


def serve(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str, body: str = SERVER) -> str:
    capsys.readouterr()
    ip.run_cell_magic("k8s_serve", line, body)
    return capsys.readouterr().out


def tiers(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str) -> str:
    capsys.readouterr()
    ip.run_line_magic("tiers", line)
    return capsys.readouterr().out


def usage_error(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], cell: str) -> str:
    """Run a whole cell as a user would: it must fail with a one-line UsageError, no traceback."""
    capsys.readouterr()
    result = ip.run_cell(cell)
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert isinstance(result.error_in_exec, UsageError), (result.error_in_exec, printed)
    assert "Traceback" not in printed, printed
    message = str(result.error_in_exec)
    assert message and "\n" not in message.strip(), message
    return message


def deployments(emulator: Emulator, ns: str) -> list[str]:
    return [d["metadata"]["name"] for d in emulator.store.list("deployments", ns)]


def last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines, "nothing was printed"
    return lines[-1]


# --- dry run -----------------------------------------------------------------------------------
def test_dry_run_prints_valid_yaml_without_secret_values_and_applies_nothing(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], emulator: Emulator,
        k8s_namespace: str) -> None:
    out = serve(ip, capsys, "--dry-run --name web --replicas 2 --env TOKEN=hunter2-secret")
    assert "hunter2-secret" not in out and "aHVudGVyMi1zZWNyZXQ" not in out  # nor its base64
    docs = list(yaml.safe_load_all(out))  # valid YAML: kubectl apply -f takes it as is
    assert [d["kind"] for d in docs] == ["ConfigMap", "Deployment", "Service"]
    assert all(d["metadata"]["namespace"] == k8s_namespace for d in docs)
    assert docs[1]["spec"]["replicas"] == 2
    assert "# Secret web-env" in out and "# Keys: TOKEN." in out  # the Secret: its keys only
    assert "<redacted>" not in out
    assert deployments(emulator, k8s_namespace) == []
    assert emulator.store.list("configmaps", k8s_namespace,
                               label_selector={"app.kubernetes.io/managed-by": "jupyter-tiers"}) == []
    assert Registry().list() == []


def test_dry_run_server_validates_on_the_api_server_and_creates_nothing(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], emulator: Emulator,
        k8s_namespace: str) -> None:
    ns = k8s_namespace
    before = emulator.server.requests_snapshot(ns)  # this test's namespace: other tests' threads
    # A vLLM-style cell: shell body, GPUs, an env secret; hardened pod defaults included.
    out = serve(ip, capsys, "--dry-run=server --name llm --shell --gpus 1 --env HF_TOKEN=hf-s3cret "
                "--image vllm/vllm-openai:v0.6.3", "vllm serve /models/m --port {port}")
    assert out.splitlines() == [
        "configmaps/llm-code created (server dry run)",
        "secrets/llm-env created (server dry run)",
        "deployments/llm created (server dry run)",
        "services/llm created (server dry run)",
        f"the API server accepted all 4 objects in namespace {ns}; nothing was created or changed "
        "(--dry-run=server)",
    ]
    assert "hf-s3cret" not in out
    sent = emulator.server.requests_snapshot(ns) - before
    assert sent[("PATCH", "deployments/{name}", False)] == 1  # the apply, with dryRun=All
    for kind in ("configmaps", "secrets", "deployments", "services", "pods"):
        assert emulator.store.list(kind, ns, label_selector={"app.kubernetes.io/name": "llm"}) == [], kind
    assert Registry().list() == []
    # A TGI-style cell (HTTP readiness, autoscaling) validates too.
    out = serve(ip, capsys, "--dry-run=server --name tgi --shell --gpus 1 --readiness /health "
                "--autoscale 1:3:70 --cpu 4 --memory 16Gi "
                "--image ghcr.io/huggingface/text-generation-inference:2.4",
                "text-generation-launcher --model-id /models/m --port {port}")
    assert "horizontalpodautoscalers/tgi created (server dry run)" in out
    assert out.splitlines()[-1].startswith("the API server accepted all 4 objects")
    # The same with the bare value spelled out, and `server` as a separate word.
    out = serve(ip, capsys, "--dry-run server --name web")
    assert out.splitlines()[-1].startswith("the API server accepted all 3 objects")
    # Once the service exists, the dry run says "configured" and changes nothing.
    serve(ip, capsys, "--name web --text")
    dep = emulator.store.get("deployments", ns, "web")
    out = serve(ip, capsys, "--dry-run=server --name web --replicas 3")
    assert "deployments/web configured (server dry run)" in out
    # (not resourceVersion: the Deployment's controller writes its status meanwhile)
    after = emulator.store.get("deployments", ns, "web")
    assert (after["metadata"]["generation"], after["spec"]) == (dep["metadata"]["generation"], dep["spec"])
    assert after["spec"]["replicas"] == 1


def test_dry_run_server_errors_are_one_line(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], emulator: Emulator,
        k8s_namespace: str) -> None:
    # The API server refuses it (a patch the schema rejects): its words, one line, nothing made.
    ip.user_ns["bad"] = {"Deployment": {"spec": {"replicas": -1}}}
    message = usage_error(ip, capsys, f"%%k8s_serve --dry-run=server --name web --patch bad\n{SERVER}")
    assert "spec.replicas" in message and "greater than or equal to 0" in message, message
    assert deployments(emulator, k8s_namespace) == []
    message = usage_error(ip, capsys, f"%%k8s_serve --dry-run=yes --name web\n{SERVER}")
    assert "'yes' is not a dry-run mode" in message and "--dry-run=server" in message, message
    local = usage_error(ip, capsys, f"%%k8s_serve --profile local --dry-run=server --name web\n{SERVER}")
    assert "--dry-run=server needs a kubernetes profile" in local, local


# --- apply, wait, out, patch, %tiers -----------------------------------------------------------
def test_serve_wait_out_patch_and_tiers_commands(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], emulator: Emulator,
        k8s_namespace: str) -> None:
    ns = k8s_namespace
    ip.user_ns["extra"] = {"Deployment": {"metadata": {"annotations": {"team": "llm"}}}}
    out = serve(ip, capsys, "--name web --replicas 2 --wait --text --out svc --patch extra")
    summary = last_line(out)
    m = SUMMARY_READY.match(summary)
    assert m, out
    assert m.group(1) == "web" and m.group(2) == m.group(3) == "2"
    assert m.group(4) == f"http://web.{ns}.svc:8000"
    svc = ip.user_ns["svc"]
    assert isinstance(svc, Service) and svc.name == "web"
    dep = emulator.store.get("deployments", ns, "web")
    assert dep is not None and dep["metadata"]["annotations"]["team"] == "llm"

    table = tiers(ip, capsys, "jobs")
    row = next(ln for ln in table.splitlines() if ln.split()[:1] == ["web"])
    assert row.split()[1:6] == ["service", "web", PROFILE, "kubernetes", "READY"], table
    assert "2/2" in row and f"http://web.{ns}.svc:8000" in row

    pod = svc.status().pods[0].name
    logs = wait_for(lambda: tiers(ip, capsys, f"logs web --pod {pod}"), what="pod log")
    assert logs == "serving on 8000\n"
    assert f"{pod}: serving on 8000" in tiers(ip, capsys, "logs web")

    assert tiers(ip, capsys, "scale web 3").strip() == "service web scaled to 3"
    status = svc.wait_ready(GUARD)
    wait_for(lambda: (s := svc.status()).state is ServiceState.READY and s.ready == 3, what="READY 3/3")
    assert status.desired == 3

    before = {p.name for p in svc.status().pods}
    assert "restarting" in tiers(ip, capsys, "restart web")
    wait_for(lambda: (s := svc.status()).state is ServiceState.READY and len(s.pods) == 3
             and not {p.name for p in s.pods} & before, what="every pod replaced")

    message = usage_error(ip, capsys, "%tiers cancel web")
    assert "web is a service" in message and "%tiers delete web" in message

    assert tiers(ip, capsys, "delete web").strip() == "service web deleted"
    assert deployments(emulator, ns) == []
    assert emulator.store.list("services", ns) == []
    assert svc.status().state is ServiceState.DELETED
    assert "DELETED" in tiers(ip, capsys, "jobs --kind service")


def test_serve_delete_option(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                             emulator: Emulator, k8s_namespace: str) -> None:
    serve(ip, capsys, "--name gone --env A=b --autoscale 1:2 --cpu 100m")
    assert deployments(emulator, k8s_namespace) == ["gone"]
    # IPython refuses a cell magic without a body: --delete is added to the cell that made it.
    out = serve(ip, capsys, "--delete --name gone --env A=b --autoscale 1:2 --cpu 100m")
    assert out.strip() == "service gone deleted"
    for resource in ("deployments", "services", "configmaps", "secrets", "horizontalpodautoscalers"):
        assert emulator.store.list(resource, k8s_namespace,
                                   label_selector={"app.kubernetes.io/name": "gone"}) == [], resource
    assert Registry().get("gone", profile=PROFILE).state == ServiceState.DELETED.value
    message = usage_error(ip, capsys, "%%k8s_serve --delete --name never-made\nprint('hi')\n")
    assert "never-made" in message

    # IPython refuses an empty cell-magic body, so deleting alone is the line magic.
    serve(ip, capsys, "--name gone-too")
    capsys.readouterr()
    ip.run_line_magic("k8s_serve", f"--profile {PROFILE} --name gone-too --delete")
    assert capsys.readouterr().out.strip() == "service gone-too deleted"
    assert emulator.store.list("deployments", k8s_namespace,
                               label_selector={"app.kubernetes.io/name": "gone-too"}) == []
    with pytest.raises(UsageError, match="only deletes"):
        ip.run_line_magic("k8s_serve", f"--profile {PROFILE} --name x")


# --- bad input ---------------------------------------------------------------------------------
BAD_LINES = [
    ("--replicas -1", "--replicas"),
    ("--replicas many", "--replicas"),
    ("--name Bad_Name", "--name"),
    ("--port 0", "--port"),
    ("--port 70000", "--port"),
    ("--autoscale 5:2 --cpu 100m", "--autoscale"),
    ("--autoscale x", "--autoscale"),
    ("--cpu lots", "--cpu"),
    ("--memory 12 parsecs", ""),
    ("--memory lots", "--memory"),
    ("--secret-env X", "--secret-env"),
    ("--patch missing_var", "--patch missing_var"),
    ("--patch not_a_dict", "--patch not_a_dict"),
    ("--strategy canary", "--strategy"),
    ("--image-pull-policy Sometimes", "--image-pull-policy"),
    ("--readiness 'no slash'", "--readiness"),
    ("--gpus -2", "--gpus"),
    ("--env =x", "--env"),
    ("--node-selector novalue", "--node-selector"),
    ("--out 1x", "--out"),
    ("--name 'unbalanced", "cannot split"),
    ("--profile nosuch", "nosuch"),
    ("--profile far", "%%k8s_serve --profile far"),
]


@pytest.mark.parametrize(("line", "named"), BAD_LINES)
def test_bad_options_are_one_line_usage_errors(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                               emulator: Emulator, k8s_namespace: str,
                                               line: str, named: str) -> None:
    ip.user_ns["not_a_dict"] = [1, 2]
    message = usage_error(ip, capsys, f"%%k8s_serve --dry-run {line}\nprint('hi')\n")
    assert named in message, message
    assert deployments(emulator, k8s_namespace) == []


def test_profiles_of_the_other_kind_are_refused(ip: InteractiveShell,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    message = usage_error(ip, capsys, "%%k8s_serve --profile far --dry-run\nprint('hi')\n")
    assert "slurm profile" in message and "kubernetes profile" in message
    message = usage_error(ip, capsys, f"%%slurm_train --profile {PROFILE} --dry-run\nprint('hi')\n")
    assert "%%slurm_train" in message and "kubernetes profile" in message
    message = usage_error(ip, capsys, "%%k8s_serve --dry-run\n\n")
    assert "empty" in message


JUNK = ["", "-", "--", "---", "=", "'", '"', "\\", "-1", "0", "99999999999999999999", "1e9", "nan", "x:y:z",
        "a=b", "=", "K=", "/", "//x", "é", "\x00", "-e", "-r", "--dry-run", "--out", "--patch", "$HOME",
        "{}", "[]", "None", "True", "3:1", "1:2:3:4", "500m", "16Gi", "-3", "--name=", "--port=", "a" * 80]
VALUES = {
    "name": ["web", "a", "x-y", "Bad_Name", "-x", "a" * 60, "web."],
    "image": ["python:3.11-slim", "UPPER", "a b", "", "registry:5000/x@sha256:abc"],
    "replicas": ["0", "1", "3", "-1", "1001", "two"],
    "gpus": ["0", "1", "65", "-1"],
    "cpu": ["500m", "2", "0.5", "lots", "-1", "1e3"],
    "memory": ["512Mi", "1Gi", "lots", "1.5G", "-1Mi"],
    "port": ["8000", "1", "65535", "0", "65536", "http"],
    "env": ["A=b", "A=", "1A=b", "=b", "PATH", "NO_SUCH_VAR_X", "A=b=c"],
    "secret_env": ["A=s/k", "A=s", "X", "A=/k"],
    "readiness": ["/health", "health", "/a b", "/"],
    "autoscale": ["1:3", "1:3:50", "5:2", "0:1", "x", "1:2:200"],
    "strategy": ["rolling", "bluegreen", "canary"],
    "python": ["python3", "/usr/bin/python3", ""],
    "image_pull_policy": ["Always", "Never", "IfNotPresent", "Sometimes"],
    "node_selector": ["disk=ssd", "disk", "=x", "a/b/c=d"],
    "patch": ["good_patch", "bad_patch", "list_patch", "missing_var", "1x"],
}


def random_line(rng: random.Random) -> str:
    words: list[str] = []
    for _ in range(rng.randint(0, 5)):
        roll = rng.random()
        if roll < 0.75:
            option = rng.choice(SERVE_OPTIONS)
            flag = rng.choice(option.flags)
            if option.arity == "flag":
                words.append(flag)
                continue
            value = rng.choice(VALUES.get(option.field) or JUNK) if rng.random() < 0.8 else rng.choice(JUNK)
            if rng.random() < 0.3 and flag.startswith("--"):
                words.append(f"{flag}={value}")
            else:
                words += [flag, value]
        else:
            words.append(rng.choice(JUNK))
    line = " ".join(shlex.quote(w) if rng.random() < 0.8 else w for w in words)
    return f"--dry-run {line}" if rng.random() < 0.9 else f"{line} --dry-run"


def test_fuzz_option_lines_give_only_usage_errors(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                                  emulator: Emulator, k8s_namespace: str) -> None:
    ip.user_ns.update(good_patch={"Deployment": {"metadata": {"annotations": {"a": "b"}}}},
                      bad_patch={"Pod": {}}, list_patch=[1])
    rng = random.Random(20261202)
    outcomes = {"ok": 0, "usage": 0}
    for i in range(1000):
        line = random_line(rng)
        body = rng.choice(["print('hi')\n", SERVER, "vllm serve /m --port 8000\n", "   \n"])
        try:
            ip.run_cell_magic("k8s_serve", line, body)
        except UsageError as exc:
            message = str(exc)
            assert message.strip(), (i, line)
            outcomes["usage"] += 1
        except SystemExit:  # argparse's -h
            pytest.fail(f"line {i}: {line!r} exited")
        except Exception as exc:
            pytest.fail(f"line {i}: {line!r} raised {type(exc).__name__}: {exc}")
        else:
            out = capsys.readouterr().out
            assert out.startswith("---\n") or out == "", (i, line, out[:200])
            outcomes["ok"] += 1
    print(f"fuzz: {outcomes}")
    assert outcomes["ok"] > 20 and outcomes["usage"] > 100, outcomes
    assert deployments(emulator, k8s_namespace) == []
    assert Registry().list() == []


# --- 11. reattach after a kernel restart -------------------------------------------------------
REATTACH = textwrap.dedent("""\
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from jupyter_tiers import config
    config.SYSTEM_PATH = Path({tmp!r}) / "no-system-tiers.yaml"
    config.USER_PATH = Path({tmp!r}) / "no-user-tiers.yaml"
    from IPython.testing.globalipapp import get_ipython
    import jupyter_tiers
    ip = get_ipython()
    ip.run_line_magic("load_ext", "jupyter_tiers")
    ip.run_line_magic("tiers", "jobs")
    service = jupyter_tiers.connect({profile!r}).attach("web")
    status = service.status()
    print("KIND", service.kind)
    print("STATE", status.state.value, status.ready, status.desired)
    print("LOGS", service.logs().replace("\\n", "|"))
    from jupyter_tiers import api
    api.close_all()
""")


def test_reattach_from_a_new_process(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path, k8s_namespace: str) -> None:
    out = serve(ip, capsys, "--name web --wait --text")
    assert SUMMARY_READY.match(last_line(out)), out
    script = tmp_path / "reattach.py"
    script.write_text(REATTACH.format(root=str(ROOT), tmp=str(tmp_path), profile=PROFILE))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=GUARD,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    row = next((ln for ln in lines if ln.split()[:1] == ["web"]), None)
    assert row is not None and "service" in row and "READY" in row, proc.stdout
    assert "KIND service" in lines
    assert "STATE READY 1 1" in lines, proc.stdout
    logs = next(ln for ln in lines if ln.startswith("LOGS "))
    assert re.fullmatch(r"LOGS web-[a-z0-9]+-[a-z0-9]+: serving on 8000\|", logs), logs


# --- 9. API errors through the magic ------------------------------------------------------------
def test_api_errors_become_one_line_usage_errors(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], emulator: Emulator,
        k8s_namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    viewer = emulator.write_kubeconfig(tmp_path / "viewer.kubeconfig", emulator.viewer_token(k8s_namespace))
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    closed = tmp_path / "closed.kubeconfig"
    closed.write_text(emulator.kubeconfig_path.read_text().replace(emulator.server.url,
                                                                   f"http://127.0.0.1:{port}"))
    base = {"tier": "kubernetes", "request_timeout": 5, "defaults": {"image": "python:3.11-slim"}}
    path = write_tiers_yaml(tmp_path / "errors-tiers.yaml", {
        "viewer": {**base, "kubeconfig": str(viewer), "namespace": k8s_namespace},
        "nons": {**base, "kubeconfig": str(emulator.kubeconfig_path), "namespace": "no-such-ns"},
        "closed": {**base, "kubeconfig": str(closed), "namespace": "default"},
    }, default="viewer")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    cell = "%%k8s_serve --profile {} --name web\nprint('hi')\n"
    message = usage_error(ip, capsys, cell.format("viewer"))
    assert "403" in message and "patch" in message and "configmaps" in message, message
    message = usage_error(ip, capsys, cell.format("nons"))
    assert "404" in message and "no-such-ns" in message, message
    message = usage_error(ip, capsys, cell.format("closed"))
    assert "ApiUnreachable" in message and f"127.0.0.1:{port}" in message, message
    assert deployments(emulator, k8s_namespace) == []
