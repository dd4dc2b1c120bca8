"""Issue 21 section 1, the object store on a Kubernetes profile against the emulator: the
``credentials_secret`` is checked for existence only (its values are never decoded), a missing
one is a FAIL with the kubectl command that creates it."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.doctor import run_doctor
from jupyter_tiers.doctor.model import Status
from jupyter_tiers.doctor.render import render_text
from tests.k8s.conftest import profile_settings, write_tiers_yaml
from tests.k8s_emulator.emulator import Emulator

VALUE = "sk-NEVER-SHOWN-42"


def test_the_credentials_secret_exists_or_is_a_fail(emulator: Emulator, k8s_namespace: str,
                                                   isolated: Path) -> None:
    api = k8s_config.new_client_from_config(str(emulator.kubeconfig_path))
    k8s.CoreV1Api(api).create_namespaced_secret(k8s_namespace, {
        "metadata": {"name": "s3-creds"}, "stringData": {"AWS_ACCESS_KEY_ID": "AKIA-x",
                                                        "AWS_SECRET_ACCESS_KEY": VALUE}})
    store = {"bucket": "jt-models", "endpoint_url": "http://minio.lab:9000", "allow_insecure_endpoint": True}
    write_tiers_yaml(isolated, {
        "there": {"tier": "kubernetes", **profile_settings(emulator, k8s_namespace),
                  "object_store": {**store, "credentials_secret": "s3-creds"}},
        "gone": {"tier": "kubernetes", **profile_settings(emulator, k8s_namespace),
                 "object_store": {**store, "credentials_secret": "no-such-creds"}}}, default="there")
    report = run_doctor(load_config(), ["there", "gone"])
    text = render_text(report)
    there = {c.name: c for c in report.profiles[0].checks}
    gone = {c.name: c for c in report.profiles[1].checks}
    assert there["s3 secret"].status is Status.OK, text
    assert f"s3-creds exists in {k8s_namespace} (its values were not read)" in there["s3 secret"].detail
    assert "reaches http://minio.lab:9000 from the pods" in there["s3 credentials"].detail
    assert gone["s3 secret"].status is Status.FAIL
    assert f"kubectl -n {k8s_namespace} create secret generic no-such-creds" in gone["s3 secret"].fix
    assert VALUE not in text and "AKIA-x" not in text
