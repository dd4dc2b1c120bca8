"""Pure: what a local service's plan is — which ServeSpec options only mean something on a
cluster (accepted, reported as not applied), which are refused, and the plan ``--dry-run`` shows."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

from ..core.errors import SpecError
from ..core.model import ServeSpec
from ..spec.options import SERVE_OPTIONS, profile_keys
from ..spec.servespec import validate_serve_spec
from . import serve_supervisor as ssv

MAX_REPLICAS = 64  # every replica is a process on this machine
PORT_TOKEN = "{port}"

# ServeSpec fields that only mean something on a cluster: accepted, shown as not applied.
NOT_APPLIED = ("image", "gpus", "cpu", "memory", "shm_size", "secret_env", "autoscale", "image_pull_policy",
               "node_selector", "tolerations", "patch", "sync", "service_type")
SERVE_DEFAULTS = frozenset(profile_keys(SERVE_OPTIONS))


def not_applied(spec: ServeSpec) -> list[str]:
    """``field=value`` of every cluster-only option the spec sets (pure)."""
    out = []
    for name in NOT_APPLIED:
        value = getattr(spec, name)
        if value in (None, 0, (), ""):
            continue
        if name == "secret_env":
            value = ",".join(k for k, _ in value)
        elif name == "node_selector":
            value = ",".join(f"{k}={v}" for k, v in value)
        elif name == "autoscale":
            value = ":".join(str(v) for v in value)
        elif name == "tolerations":
            value = f"{len(value)} toleration{'s' if len(value) != 1 else ''}"
        elif name == "patch":
            value = "(a patch)"
        elif name == "sync":  # the replicas run on this machine; nothing is copied for them
            value = ",".join(value)
        out.append(f"{name}={value}")
    if spec.strategy != "rolling":
        out.append(f"strategy={spec.strategy} (rolled one replica at a time)")
    return out


def note_for(ignored: Sequence[str]) -> str | None:
    """The status message about ignored options, or None."""
    if not ignored:
        return None
    return "not applied on the local tier: " + ", ".join(ignored)


def check_local(spec: ServeSpec) -> None:
    """validate_serve_spec plus the local limits."""
    # No image runs locally; one given is still checked, so the cell also works on a cluster.
    validate_serve_spec(replace(spec, image=spec.image or "local") if isinstance(spec, ServeSpec) else spec)
    if spec.name.isdigit():
        raise SpecError("name", f"{spec.name!r}: a local service name needs a letter (job ids are numbers)")
    if spec.replicas > MAX_REPLICAS:
        raise SpecError("replicas", f"{spec.replicas}: a local service runs at most {MAX_REPLICAS} "
                        "replicas on this machine")
    # Refused, not ignored: a route that silently does not exist is worse than none.
    for name in ("ingress", "tls_secret"):
        if getattr(spec, name):
            raise SpecError(name, "Kubernetes only: an Ingress routes a cluster's traffic; a local service "
                            "is reached at its loopback endpoint (use a kubernetes profile)")


def revision_of(template: str, restarted_at: str) -> str:
    """The pod-template hash: what a replica runs and the last restart's stamp (so an unchanged
    cell re-run after a restart changes nothing, as with ``kubectl rollout restart``)."""
    return hashlib.sha256(f"{template}/{restarted_at}".encode()).hexdigest()[:10]


def shell_body(body: str) -> str:
    """A ``--shell`` body as run locally: ``{port}`` becomes the replica's ``${PORT}``."""
    return body.replace(PORT_TOKEN, "${PORT}")


def render_plan(spec: ServeSpec, setup: Sequence[str] = ()) -> str:
    """What would run, as text (the ``--dry-run`` output; no env values)."""
    check_local(spec)
    program = ("/bin/sh code/<revision>/command.sh" if spec.shell
               else f"{spec.python} code/<revision>/main.py")
    probe = f"HTTP GET {spec.readiness} (200-399)" if spec.readiness else "TCP connect"
    s = "s" if spec.replicas != 1 else ""
    lines = [
        f"# jupyter-tiers local service {spec.name!r}: {spec.replicas} replica{s}, each a local process",
        f"#   {program}",
        "# in its own process group under a detached supervisor, with its own free loopback port in",
        "# PORT and JT_PORT" + (" ({port} in the command line)" if spec.shell else "")
        + "; the body must listen on it.",
        f"# Readiness: {probe} on the replica's port every {ssv.PROBE_PERIOD_S:g} s.",
        "# Crash: restarted with back-off 10s, 20s, 40s ... 5m (CrashLoopBackOff).",
        f"# Endpoint: http://127.0.0.1:{spec.port} (or a free port if taken), relayed round-robin to"
        " the ready replicas.",
        "# Rolling update and restart: one new replica ready before an old one goes.",
    ]
    if spec.model_path is not None:
        source = f" (from job {spec.model_source})" if spec.model_source else ""
        lines.append(f"# Model{source}: {spec.model_path}, read in place; also in JT_MODEL_PATH.")
    if spec.env:
        lines.append(f"# env (values in env.json, mode 600, not shown): {', '.join(k for k, _ in spec.env)}")
    if setup:
        lines += ["# setup from the profile, before the body:", *(f"#   {line}" for line in setup)]
    ignored = not_applied(spec)
    if ignored:
        lines.append("# Not applied locally: " + ", ".join(ignored))
    lines += ["", shell_body(spec.body) if spec.shell else spec.body]
    return "\n".join(lines).rstrip("\n") + "\n"


