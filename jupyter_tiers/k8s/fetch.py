"""Serving from object storage (pure): an init container that copies the model from S3 into an
``emptyDir`` at /models before the server container starts.

``--model-from`` on a Kubernetes profile with an ``object_store`` and no ``model_volume`` covering
the checkpoint (or ``--model-from s3://BUCKET/KEY``) sets the spec's ``model_uri``; the tier then
passes the rendered objects through :func:`add_model_fetch`. The init container (image: the
profile's ``fetch_image``, default the AWS CLI's) runs ``aws s3 cp`` with argv only (no shell), its
credentials from the profile's ``credentials_secret`` (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, and ``AWS_SESSION_TOKEN`` if the Secret has it). A URI ending in ``/``
is a prefix (a directory checkpoint, copied recursively), any other one object. The shapes follow
a real cluster's (/work/shared/facts/k8s-golden/13a-init-container-emptydir.json).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ..errors import SpecError
from ..handoff import MODEL_DIR, fetched_model_path, model_uri
from ..objectstore import DEFAULT_FETCH_IMAGE, ObjectStore

VOLUME = "models"
FETCH_CONTAINER = "fetch-model"


def fetch_command(uri: str, store: ObjectStore | None) -> list[str]:
    """``aws s3 cp`` of ``uri`` to its place under /models (argv; every word validated)."""
    parsed = model_uri(uri)
    target = fetched_model_path(uri)
    argv = ["aws", "s3", "cp", "--no-progress"]
    if parsed.prefix:
        argv.append("--recursive")
    if store is not None and store.endpoint_url:
        argv += ["--endpoint-url", store.endpoint_url]
    return [*argv, str(parsed), target + ("/" if parsed.prefix else "")]


def fetch_init_container(uri: str, store: ObjectStore | None, image: str | None) -> dict[str, Any]:
    """The init container that copies ``uri`` into the ``models`` emptyDir."""
    env: list[dict[str, Any]] = []
    if store is not None and store.region:
        env.append({"name": "AWS_DEFAULT_REGION", "value": store.region})
    if store is not None and store.credentials_secret:
        for key, optional in (("AWS_ACCESS_KEY_ID", False), ("AWS_SECRET_ACCESS_KEY", False),
                              ("AWS_SESSION_TOKEN", True)):
            ref: dict[str, Any] = {"name": store.credentials_secret, "key": key}
            if optional:
                ref["optional"] = True
            env.append({"name": key, "valueFrom": {"secretKeyRef": ref}})
    container: dict[str, Any] = {
        "name": FETCH_CONTAINER,
        "image": image or DEFAULT_FETCH_IMAGE,
        "command": fetch_command(uri, store),
        "volumeMounts": [{"name": VOLUME, "mountPath": MODEL_DIR}],
    }
    if env:
        container["env"] = env
    return container


def add_model_fetch(objects: Sequence[dict[str, Any]], uri: str, store: ObjectStore | None,
                    image: str | None) -> list[dict[str, Any]]:
    """``objects`` with the Deployment's pods fetching ``uri`` first: an init container, an
    emptyDir ``models`` volume, and the server containers mounting it read-only at /models with
    ``JT_MODEL_DIR``. Raises SpecError when the pods already have a ``models`` volume (a
    ``model_volume``: the profile serves from shared storage, not from the object store)."""
    out = [copy.deepcopy(o) for o in objects]
    for obj in out:
        if obj.get("kind") != "Deployment":
            continue
        pod = obj["spec"]["template"]["spec"]
        volumes = pod.setdefault("volumes", [])
        if any(v.get("name") == VOLUME for v in volumes):
            raise SpecError("model_uri", "the profile's model_volume is already mounted at /models; "
                            "serve from one or the other")
        volumes.append({"name": VOLUME, "emptyDir": {}})
        pod.setdefault("initContainers", []).append(fetch_init_container(uri, store, image))
        for container in pod.get("containers", []):
            container.setdefault("volumeMounts", []).append(
                {"name": VOLUME, "mountPath": MODEL_DIR, "readOnly": True})
            env = container.setdefault("env", [])
            if not any(e.get("name") == "JT_MODEL_DIR" for e in env):
                env.insert(0, {"name": "JT_MODEL_DIR", "value": MODEL_DIR})
    return out
