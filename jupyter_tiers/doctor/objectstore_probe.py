"""The doctor's I/O on a profile's ``object_store``: run the check program
(doctor/s3_check_script.py) where the profile's uploads run, with the credentials they use:
on a Slurm profile on the login node over SSH (no one-time code asked: a 2FA host reuses this
process's connection from ``%tiers login``), on a local profile on this machine; the kernel's
AWS_* credentials, when the profile says ``kernel``, only on the program's stdin. On a
Kubernetes profile it asks only whether the ``credentials_secret`` exists (metadata; its values
are never decoded)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..api import cached
from ..config.profiles import Profile
from ..core.errors import ApiError, ApiUnreachable, ConfigError
from ..data.objectstore import ObjectStore, kernel_credentials, parse_object_store
from ..k8s.client import KubeClient
from ..slurm import tier as slurm_tier  # transport_for looked up at call time (tests patch it)
from ..slurm.commands import upload_argv
from ..slurm.tier import SlurmTier
from ..transport.errors import TransportError
from ..transport.prompt import refusing_prompter
from ..transport.ssh import SSHTransport
from .model import Check, fail
from .objectstore_checks import S3Probe, mode_text, secret_check, store_checks

TIMEOUT = 120.0
_METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


def script_source() -> str:
    return (Path(__file__).parent / "s3_check_script.py").read_text()


def request(store: ObjectStore, env: Mapping[str, str]) -> tuple[bytes, list[str]]:
    """The program's stdin line and the credential values in it (scrubbed from its output);
    ValueError naming what the kernel lacks (never a value)."""
    req: dict[str, Any] = {"bucket": store.bucket, "prefix": store.prefix, "endpoint_url": store.endpoint_url,
                           "region": store.region, "mode": store.credentials}
    secrets: list[str] = []
    if store.credentials == "kernel":
        req["credentials"] = kernel_credentials(env)
        # Scrubbed from the output as a second guard (the program never echoes its request);
        # only values long enough that replacing them cannot garble other text (AWS: 20 and 40).
        secrets = [v for v in req["credentials"].values() if len(v) >= 8]
    return (json.dumps(req) + "\n").encode(), secrets


def _scrub(text: str, secrets: list[str]) -> str:
    for value in secrets:
        text = text.replace(value, "***")
    return text


def _python(profile: Profile) -> str:
    return str(profile.defaults.get("python") or "python3")


def _run_remote(profile: Profile, data: bytes) -> tuple[str, str]:
    """(output, error) of the program on the login node."""
    tier = cached(profile)
    live = tier.opened_transport if isinstance(tier, SlurmTier) else None
    transport = live if live is not None and live.connected else slurm_tier.transport_for(profile)
    fresh = transport is not live
    if fresh and isinstance(transport, SSHTransport):  # local commands: nothing to retry or ask
        transport.retries = 0
        transport.prompter = refusing_prompter("the doctor asks no one-time code; run %tiers login first")
    try:
        result = transport.run(upload_argv(_python(profile), script_source()), stdin=data,
                               timeout=TIMEOUT, check=False)
    except TransportError as exc:
        return "", f"the login node was not reached: {str(exc)[:200]}"
    finally:
        if fresh:
            transport.close()
    return result.text(), ""


def _run_local(profile: Profile, data: bytes) -> tuple[str, str]:
    python = os.path.expanduser(_python(profile))
    try:
        run = subprocess.run([python, "-c", script_source()], input=data, capture_output=True,
                             timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"{python} did not run: {str(exc)[:200]}"
    out = run.stdout.decode("utf-8", "replace")
    if run.returncode != 0 and "@@jt-s3check" not in out:
        last = (run.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        out += f"\n{last[:200]}"
    return out, ""


def probe(profile: Profile, store: ObjectStore, env: Mapping[str, str] | None = None) -> S3Probe:
    """Run the check where ``profile``'s uploads run."""
    where = "the login node" if profile.tier == "slurm" else "this machine"
    if profile.project_defined:  # never a project file's interpreter, never the kernel's keys
        return S3Probe(where, store.credentials, error="not run: the profile is defined by a project "
                       "tiers.yaml (it may have come with a cloned repository)")
    try:
        data, secrets = request(store, os.environ if env is None else env)
    except ValueError as exc:
        return S3Probe(where, store.credentials, error=f"{exc}; uploads use {mode_text('kernel', where)}")
    output, error = (_run_remote if profile.tier == "slurm" else _run_local)(profile, data)
    if error:
        return S3Probe(where, store.credentials, error=_scrub(error, secrets))
    return S3Probe(where, store.credentials, output=_scrub(output, secrets))


def secret_status(profile: Profile, name: str) -> tuple[str, int, str]:
    """(namespace, HTTP status, error) of reading Secret ``name``'s metadata: the response's
    body is released unread (a server that ignores the metadata-only request still sends the
    values; they are never decoded)."""
    client = KubeClient(profile.settings, profile=profile.name, source=", ".join(profile.sources))
    try:
        api = client.api
    except ConfigError as exc:
        return str(profile.get("namespace") or "default"), 0, str(exc)[:200]
    from kubernetes import client as k8s

    namespace = str(profile.get("namespace") or client.default_namespace)
    core = k8s.CoreV1Api(api)
    try:
        # The stubs lack the *_with_http_info variants the client has (status without the body).
        read = core.read_namespaced_secret_with_http_info  # type: ignore[attr-defined]
        response = client.call(read, name, namespace,
                               _preload_content=False, _headers={"Accept": _METADATA_ONLY},
                               verb="get", resource="secrets", namespace=namespace)
    except ApiError as exc:
        return namespace, int(getattr(exc, "status", 0) or 0), str(exc)[:200]
    except ApiUnreachable as exc:
        return namespace, 0, str(exc)[:200]
    raw = response[0] if isinstance(response, tuple) else response
    status = int(getattr(raw, "status", 200) or 200)
    release = getattr(raw, "release_conn", None)
    if callable(release):
        release()
    return namespace, status, ""


def object_store_checks(profile: Profile) -> list[Check]:
    """The doctor's object-store lines for ``profile`` (registered in doctor.SECTION_CHECKS)."""
    try:
        store = parse_object_store(profile.get("object_store"), profile.tier)
    except ValueError as exc:
        sub, message = exc.args[0]
        return [fail("s3 config", f"object_store.{sub}: {message}", "fix the profile's object_store")]
    if profile.tier == "kubernetes":
        namespace, status, error = (str(profile.get("namespace") or "default"), 200, "")
        if store.credentials_secret:
            namespace, status, error = secret_status(profile, store.credentials_secret)
        return secret_check(store, namespace, status, error)
    return store_checks(probe(profile, store), store)
