"""Serving from object storage (pure): the init container and emptyDir of k8s/fetch.py against
the shapes of a real cluster's pod (golden 13a), and handoff.serving_model's choice between
shared storage and the object store, with its one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import ServeSpec
from jupyter_tiers.data.handoff import (
    Checkpoint,
    HandoffError,
    checkpoint_of,
    encode_detail,
    serving_model,
    with_upload,
)
from jupyter_tiers.data.objectstore import DEFAULT_FETCH_IMAGE, parse_object_store
from jupyter_tiers.k8s.fetch import FETCH_SH, add_model_fetch, fetch_command, fetched_model_path
from jupyter_tiers.k8s.render import render_manifests

GOLDEN = Path("/work/shared/facts/k8s-golden/13a-init-container-emptydir.json")
URI = "s3://team-ckpt/jt/ft/42/ckpt-000100/"
STORE = parse_object_store({"endpoint_url": "http://10.0.0.1:9000", "allow_insecure_endpoint": True,
                            "bucket": "team-ckpt", "region": "eu-1",
                            "credentials_secret": "s3-creds"}, "kubernetes")


def pod_spec(objects: list[dict]) -> dict:
    (dep,) = [o for o in objects if o["kind"] == "Deployment"]
    return dep["spec"]["template"]["spec"]


def rendered(model_volume: dict | None = None) -> list[dict]:
    spec = ServeSpec(body="print(1)", name="m", image="python:3.11-slim",
                     model_path=fetched_model_path(URI), model_uri=URI)
    return render_manifests(spec, namespace="ns", model_volume=model_volume)


def test_the_init_container_copies_the_prefix_into_an_emptydir_shaped_as_on_a_real_cluster() -> None:
    pod = pod_spec(add_model_fetch(rendered(), URI, STORE, None))
    (init,) = pod["initContainers"]
    assert init["image"] == DEFAULT_FETCH_IMAGE
    assert init["command"][:2] == ["sh", "-c"] and init["command"][2] == FETCH_SH
    assert init["command"][3:] == ["jt-fetch", URI, "/models/ckpt-000100/",
                                   URI.rstrip("/").rsplit("/", 1)[0] + "/.jt-manifest.json",
                                   "--endpoint-url", "http://10.0.0.1:9000"]
    assert "$" not in "".join(init["command"][3:])  # values are arguments, never script text
    assert init["volumeMounts"] == [{"name": "models", "mountPath": "/models"}]
    env = {e["name"]: e for e in init["env"]}
    assert env["AWS_DEFAULT_REGION"]["value"] == "eu-1"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "s3-creds",
                                                                         "key": "AWS_SECRET_ACCESS_KEY"}
    assert env["AWS_SESSION_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
    assert {"name": "models", "emptyDir": {}} in pod["volumes"]
    (server,) = pod["containers"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in server["volumeMounts"]
    server_env = {e["name"]: e.get("value") for e in server["env"]}
    assert server_env["JT_MODEL_PATH"] == "/models/ckpt-000100" and server_env["JT_MODEL_DIR"] == "/models"
    # The same keys and shapes as the pod a real kube-apiserver 1.28 accepted (golden 13a).
    golden = json.loads(GOLDEN.read_text())["steps"][0]["request"]["body"]["spec"]
    g_init, g_server = golden["initContainers"][0], golden["containers"][0]
    assert {"name", "image", "command", "volumeMounts"} <= set(init) and set(g_init) - set(init) <= {
        "imagePullPolicy"}
    assert g_init["volumeMounts"][0].keys() == init["volumeMounts"][0].keys()
    assert g_server["volumeMounts"][0].keys() == server["volumeMounts"][-1].keys()
    assert {"emptyDir": {}, "name": "models"} in golden["volumes"]


def test_an_object_is_copied_alone_and_the_profiles_fetch_image_is_used() -> None:
    assert fetch_command("s3://b-1/m/model.pt", None)[3:] == ["jt-fetch", "s3://b-1/m/model.pt",
                                                               "/models/model.pt", "s3://b-1/m/.jt-manifest.json"]
    pod = pod_spec(add_model_fetch(rendered(), "s3://b-1/m/model.pt", None, "registry.local/fetch:1"))
    assert pod["initContainers"][0]["image"] == "registry.local/fetch:1"
    assert "env" not in pod["initContainers"][0]  # no Secret: the node's or the pod's own identity


def test_a_model_volume_and_a_fetch_are_not_mixed_and_bad_uris_are_refused() -> None:
    with pytest.raises(SpecError, match="model_volume is already mounted"):
        add_model_fetch(rendered({"pvc": "models"}), URI, STORE, None)
    for bad in ("s3://team-ckpt", "s3://team-ckpt/", "s3://Team/x", "s3://b-1/a b"):
        with pytest.raises(SpecError):
            add_model_fetch(rendered(), bad, STORE, None)


def ckpt(**kw: object) -> Checkpoint:
    base: dict = dict(job_key="hpc/42", job_id="42", job_name="ft", profile="hpc", tier="slurm",
                      directory="/scratch/ft/42/checkpoints", path="/scratch/ft/42/checkpoints/ckpt-000100")
    return Checkpoint(**{**base, **kw})


def k8s(**settings: object) -> Profile:
    return Profile(name="serving", tier="kubernetes", settings=settings)


def test_serving_model_prefers_shared_storage_then_the_object_store() -> None:
    volume = {"host_path": "/scratch", "path_map": {"/scratch": "/"}}
    store = {"bucket": "team-ckpt", "credentials_secret": "s3-creds"}
    assert serving_model(ckpt(uri=URI), k8s(model_volume=volume, object_store=store)) == (
        "/models/ft/42/checkpoints/ckpt-000100", None)
    assert serving_model(ckpt(uri=URI), k8s(object_store=store)) == ("/models/ckpt-000100", URI)
    local = Profile(name="local", tier="local", settings={"object_store": {"bucket": "team-ckpt"}})
    assert serving_model(ckpt(uri=URI), local) == (None, URI)


def test_serving_model_refusals_name_the_upload_state() -> None:
    store = {"bucket": "team-ckpt"}
    with pytest.raises(HandoffError) as err:
        serving_model(ckpt(), k8s(object_store=store))
    assert "was not uploaded (submit with --checkpoint-to store)" in str(err.value)
    assert "no model_volume" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(HandoffError, match="no model_volume"):
        serving_model(ckpt(uri=URI), k8s())  # no object store: the shared-storage refusal stands
    rec = JobRecord(profile="hpc", tier="slurm", job_id="42", name="ft", state="COMPLETED",
                    detail=with_upload(encode_detail("/scratch/ft/42/checkpoints",
                                                     "/scratch/ft/42/checkpoints/ckpt-000100"),
                                       {"state": "uploading", "uri": URI.rstrip("/"), "sent": 5_000_000,
                                        "total": 10_000_000}))
    pending = checkpoint_of(rec)
    assert pending.uri is None
    with pytest.raises(HandoffError) as err:
        serving_model(pending, k8s(object_store=store))
    assert "not in the object store yet: uploading (s3://team-ckpt/jt/ft/42/ckpt-000100 50% (5.0/10.0 MB))" \
        in str(err.value)
    done = checkpoint_of(JobRecord(profile="hpc", tier="slurm", job_id="42", name="ft", state="COMPLETED",
                                   detail=with_upload(rec.detail, {"state": "done", "uri": URI})))
    assert done.uri == URI


def test_the_default_fetch_image_is_pinned_by_digest() -> None:
    """Issue 26 §4: the image handed the store's credentials cannot be moved under a tag."""
    import re

    assert re.fullmatch(r"amazon/aws-cli:[0-9.]+@sha256:[0-9a-f]{64}", DEFAULT_FETCH_IMAGE)
    assert pod_spec(add_model_fetch(rendered(), URI, STORE, None))["initContainers"][0]["image"] == (
        DEFAULT_FETCH_IMAGE)
