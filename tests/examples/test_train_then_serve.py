"""examples/train_then_serve.ipynb: train on the Slurm test cluster, serve the checkpoint on the
Kubernetes API emulator through the serving profile's model volume and path_map, ask the model
through a port-forward, delete the service."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from jupyter_tiers.config.registry import Registry

from .conftest import K8sEmulator
from .nbrun import execute, last_line, nodes_of, torch_available

TRAIN_SUMMARY = re.compile(
    r"^job (\d+) COMPLETED in \d\d:\d\d:\d\d on (\S+)(?: — loss [\d.]+)?"
    r" — checkpoint (/\S+/checkpoints/step-00010\.json)$"
)
POD = r"linear-[a-z0-9]+-[a-z0-9]+"


@pytest.mark.cluster
@pytest.mark.slurm_beside
@pytest.mark.timeout(1200)
def test_train_on_slurm_then_serve_on_kubernetes(
    pipeline_env: dict[str, str], k8s_emulator: K8sEmulator, tmp_path: Path
) -> None:
    out = execute("train_then_serve.ipynb", pipeline_env, tmp_path)
    ns = k8s_emulator.namespace
    scratch = tmp_path / "scratch"
    assert re.search(r"^\s+sandbox\s+slurm\s+127\.0\.0\.1", out["load"], re.M), out["load"]
    assert re.search(rf"^\s+serving\s+kubernetes\s.*namespace {ns}", out["load"], re.M), out["load"]

    # Training: two Slurm nodes, one rank each, agreeing on the weights; the checkpoint recorded.
    train = out["train"]
    header = re.match(r"job (\d+) \(linear-fit\) submitted to sandbox: 2 ranks", train)
    assert header, train
    job_id = header.group(1)
    backend = "torch gloo" if torch_available() else "plain Python"
    finals = re.findall(r"^(\d): rank \1 of 2: w=(\S+) b=(\S+) \((.+)\)$", train, re.M)
    assert sorted(r for r, *_ in finals) == ["0", "1"] and {f[1:] for f in finals} == {
        (finals[0][1], finals[0][2], backend)}, train
    summary = TRAIN_SUMMARY.match(last_line(train))
    assert summary and summary.group(1) == job_id, train
    assert len(nodes_of(summary.group(2))) == 2, train
    checkpoint = Path(summary.group(3))
    assert checkpoint == scratch / "linear-fit" / job_id / "checkpoints" / "step-00010.json"
    ckpt = json.loads(checkpoint.read_text())  # the cluster's storage is this machine's disk
    assert (f"{ckpt['w']:.4f}", f"{ckpt['b']:.4f}") == (finals[0][1], finals[0][2])
    assert out["checkpoint"] == (
        f"job {job_id} COMPLETED; newest checkpoint on the cluster: {checkpoint}\n"
    )

    # Serving: the checkpoint as the pods see it, through the volume's path_map.
    serve = out["serve"]
    in_pod = f"/models/linear-fit/{job_id}/checkpoints/step-00010.json"
    assert serve.splitlines()[0].startswith(
        f"service linear applied to serving (namespace {ns}): 2 replicas, image python:3.11-slim"
    ), serve
    started = set(re.findall(
        rf"^({POD}): serving y = {re.escape(finals[0][1])}x \+ {re.escape(finals[0][2])}"
        r" \(step-00010\.json, step 10\) on port 8000$", serve, re.M))
    assert len(started) == 2, serve
    ready = re.match(
        rf"^service linear READY 2/2 in \d\d:\d\d:\d\d — http://linear\.{ns}\.svc:8000 \(revision 1\)",
        last_line(serve))
    assert ready, serve
    assert out["query"] == (f"y(2) = {2 * ckpt['w'] + ckpt['b']:.4f} from step-00010.json (step 10); "
                            "the true line gives 7\n"), out["query"]

    (service,) = [rec for rec in Registry().list() if rec.kind == "service"]
    (deployment,) = [o for o in yaml.safe_load_all(service.script) if o and o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "JT_MODEL_PATH", "value": in_pod} in pod["containers"][0]["env"]
    assert {"name": "models", "hostPath": {"path": str(scratch), "type": "Directory"}} in pod["volumes"]

    rows = [ln.split() for ln in out["jobs"].splitlines()]
    assert ["linear", "service", "linear", "serving", "kubernetes", "READY", "2/2"] in [r[:7] for r in rows]
    assert [job_id, "job", "linear-fit", "sandbox", "slurm", "COMPLETED", "2"] in [r[:7] for r in rows]
    assert out["delete"] == "service linear deleted\n"
