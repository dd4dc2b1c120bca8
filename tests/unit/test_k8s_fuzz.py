"""Seeded fuzz of ``%%k8s_serve`` and ``%tiers`` lines: whatever is typed, the answer is a
rendered dry run or one short UsageError, never a traceback, no env value ever shows, and no line
setting a reserved name (PORT, JT_*, KUBERNETES_*) renders.

Every serve line carries ``--dry-run`` (or ``--delete`` of a name the empty registry does not
know) against a kubernetes profile whose API port is closed, so nothing is applied anywhere.
"""

from __future__ import annotations

import base64
import random
import re
import shlex
from typing import Any

import pytest
from IPython.core.error import UsageError

from tests.helpers import check_fuzz_answer, fuzz_tiers_line, fuzz_word
from tests.unit.serve_shell import PROFILE_SECRET, Shell, serve_shell

__all__ = ["serve_shell"]  # the fixture

SEED = 20261202
LINES = 2500
# Env values: given with --env (always as its quoted value), in the profile, and in the kernel's
# environment (read by a bare --env FUZZ_KERNEL_TOKEN). None may appear in an error or the output,
# plain or base64 (a Secret's data).
SECRET = "tok-Fz8SECRET"
KERNEL_SECRET = "kern-Q2wSECRET"
SECRETS = tuple(
    form for value in (SECRET, KERNEL_SECRET, PROFILE_SECRET)
    for form in (value, base64.b64encode(value.encode()).decode())
)
ENV_VALUES = [f"TOKEN={SECRET}", f"={SECRET}", f"TOKEN:{SECRET}", f"JT_TOKEN={SECRET}", f"A B={SECRET}",
              "FUZZ_KERNEL_TOKEN", "=FUZZ_KERNEL_TOKEN", f"PORT={SECRET}",
              f"KUBERNETES_SERVICE_HOST={SECRET}", f"PATH={SECRET}"]
# Names serving reserves on every tier (PATH is not reserved: an image may need it changed).
RESERVED_ENV = re.compile(r"(?:--env|-e) '?(?:PORT|JT_\w*|KUBERNETES_\w*)=")

SERVE_OPTIONS = [
    "--name", "-n", "--image", "--replicas", "-r", "--gpus", "--cpu", "--memory", "--port", "--env", "-e",
    "--secret-env", "--readiness", "--autoscale", "--strategy", "--python", "--image-pull-policy",
    "--node-selector", "--patch", "--out", "--profile", "-p", "--toleration", "--canary", "--bogus", "-x",
    "--ingress", "--tls-secret", "--service-type",
]
FLAGS = ["--shell", "--text", "--wait", "-h", "--"]
VALUES = [
    "", "x", "web", "Web", "a" * 60, "-1", "0", "1", "3", "10", "99", "100", "65536", "1e20",
    "99999999999999999999", "1.5",
    "500m", "0.0001", "4Gi", "1e9", "ÜBER", "\udcff", "\u202e", "\x00", "--", "-", "=", "a=b", "K=V",
    "JT_X=1", "KUBERNETES_PORT=1", "a b", "/health", "/a b", "1:4", "2:8:70", "9:1", "1:2:0", "rolling",
    "bluegreen", "Always", "python3", "py;rm -rf /", "../x", "$(id)", "`id`", "'", '"', "\\", "\t",
    "vllm/vllm-openai:v0.6.0", "HF=hf/token", "HF=../b/c", "disk=ssd", "k", "local", "nope",
    "good", "bad", "notdict", "circular", "unknown_kind", "__builtins__", "class", "None",
    "PATH", "NOT_SET_ANYWHERE_XYZ", "FUZZ_KERNEL_TOKEN",
    "models.lab.example/llama", "*.lab.example", "a.example//x", "10.0.0.1", "https://a.example",
    "a.example:80", "NodePort", "LoadBalancer", "models-tls",
]
BODIES = ["print('hi')\n", "", "   \n", "\udcff\n", "x = 1\n" * 3, "\x00\n", "vllm serve /models/x\n"]


def _notebook_variables() -> dict[str, Any]:
    circular: dict[str, Any] = {}
    circular["Deployment"] = circular
    return {
        "good": {"Deployment": {"metadata": {"labels": {"team": "a"}}}},
        "bad": {"Deployment": {"metadata": None}},
        "notdict": [1, 2],
        "circular": circular,
        "unknown_kind": {"Pod": {"spec": {}}},
    }


def _serve_line(rng: random.Random) -> str:
    groups = ["--delete --name never-made"] if rng.random() < 0.05 else ["--dry-run"]
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.1:
            groups.append(f"{rng.choice(['--env', '-e'])} {shlex.quote(rng.choice(ENV_VALUES))}")
        elif roll < 0.2:
            groups.append(rng.choice(FLAGS))
        elif roll < 0.3:
            groups.append(f"{rng.choice(SERVE_OPTIONS)}={fuzz_word(rng, VALUES)}")
        else:
            groups.append(f"{rng.choice(SERVE_OPTIONS)} {fuzz_word(rng, VALUES)}")
    rng.shuffle(groups)
    if "--dry-run" not in groups and not any(g.startswith("--delete") for g in groups):
        groups.insert(0, "--dry-run")
    return " ".join(groups)


def test_fuzz_k8s_serve_and_tiers_lines_give_only_usage_errors(
        serve_shell: Shell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUZZ_KERNEL_TOKEN", KERNEL_SECRET)
    serve_shell.user_ns.update(_notebook_variables())
    rng = random.Random(SEED)
    rendered = 0
    for i in range(LINES):
        if rng.random() < 0.8:
            line, body = _serve_line(rng), rng.choice(BODIES)
            what = f"line {i}: %%k8s_serve {line!r} with body {body!r}"
            try:
                serve_shell.run_cell_magic("k8s_serve", line, body)
                exc = None
            except BaseException as caught:
                exc = caught
            if exc is not None and isinstance(exc, UsageError):
                assert "\n" not in str(exc), f"{what}: the error is not one line: {exc}"
        else:
            line = fuzz_tiers_line(rng, VALUES)
            what = f"line {i}: %tiers {line!r}"
            try:
                serve_shell.run_line_magic("tiers", line)
                exc = None
            except BaseException as caught:
                exc = caught
        printed = capsys.readouterr()
        check_fuzz_answer(what, exc, printed.out + printed.err, SECRETS, SECRETS[2:])
        rendered += exc is None and "kind: Deployment" in printed.out
        assert not (exc is None and "kind: Deployment" in printed.out and RESERVED_ENV.search(line)), \
            f"{what}: rendered with a reserved env name"
    assert rendered > LINES // 50, "the fuzz should also reach some successful renders"
    assert serve_shell.user_ns.get("__builtins__") is None


def test_fuzz_dry_run_values(serve_shell: Shell, capsys: pytest.CaptureFixture[str]) -> None:
    """``--dry-run[=client|server]``: only those two values pass the parser; anything else is a
    one-line UsageError naming both, whatever the bytes. ``server`` against this profile (its API
    port is closed) is the usual one-line unreachable error, never a traceback."""
    rng = random.Random(SEED + 1)
    words = [*VALUES, "client", "server", "Server", "SERVER", "none", "all", "All", "server ",
             "client,server", "true", "1"]
    for i in range(400):
        value = fuzz_word(rng, words)
        form = rng.choice([f"--dry-run={shlex.quote(value)}", f"--dry-run {shlex.quote(value)}"])
        line = f"--name web {form}"
        what = f"line {i}: %%k8s_serve {line!r}"
        try:
            serve_shell.run_cell_magic("k8s_serve", line, "print('hi')\n")
            exc = None
        except BaseException as caught:
            exc = caught
        printed = capsys.readouterr()
        if value == "client":
            assert exc is None and "kind: Deployment" in printed.out, what
            continue
        assert isinstance(exc, UsageError), f"{what}: {exc!r}"
        message = str(exc)
        assert "\n" not in message and "Traceback" not in printed.out + printed.err, what
        if value == "server":
            assert "did not answer" in message or "unreachable" in message.lower(), f"{what}: {message}"
        elif not value.startswith("-"):  # a word such as --name is taken as the next option
            assert "is not a dry-run mode" in message and "--dry-run=server" in message, f"{what}: {message}"


def test_dry_run_mode_parser() -> None:
    import argparse

    from jupyter_tiers.faces.magics import dry_run_mode

    assert dry_run_mode("client") == "client" and dry_run_mode("server") == "server"
    rng = random.Random(SEED + 2)
    for _ in range(2000):
        value = "".join(rng.choice("clientserv-=All \x00\u202e\udcff\n") for _ in range(rng.randint(0, 12)))
        if value in ("client", "server"):
            continue
        with pytest.raises(argparse.ArgumentTypeError) as err:
            dry_run_mode(value)
        assert "is not a dry-run mode" in str(err.value) and "\n" not in str(err.value).replace("\\n", "")
    with pytest.raises(argparse.ArgumentTypeError, match=r"…"):
        dry_run_mode("x" * 500)


INGRESS_ALPHABET = "ab-.*/:_%2fF9Z~ \x00\u202e"


def test_fuzz_ingress_rules_agree_with_the_api_server() -> None:
    """``--ingress HOST[/PATH]``: every value is either a (host, path) the API server's own
    Ingress validation accepts (the emulator's admission, which follows golden 13c) or a one-line
    SpecError for ``ingress``; never anything else. Seeded."""
    from jupyter_tiers.core.errors import SpecError
    from jupyter_tiers.spec.servespec import parse_ingress
    from tests.k8s_emulator.admission import _ingress_causes

    rng = random.Random(SEED + 3)
    accepted = refused = 0
    samples = ["models.lab.example/llama", "*.lab.example", "a.b/c/d", "x" * 64 + ".a", "a/./b", "a/b/."]
    for i in range(5000):
        if i < len(samples):
            text = samples[i]
        else:
            text = "".join(rng.choice(INGRESS_ALPHABET) for _ in range(rng.randint(0, 16)))
        try:
            host, path = parse_ingress(text)
        except SpecError as exc:
            assert exc.field == "ingress" and "\n" not in exc.problem.replace("\\n", ""), text
            refused += 1
            continue
        accepted += 1
        spec = {"rules": [{"host": host, "http": {"paths": [{"path": path, "pathType": "Prefix"}]}}],
                "tls": [{"hosts": [host]}]}
        assert _ingress_causes(spec) == [], (text, _ingress_causes(spec))
        assert path.startswith("/") and not host.endswith(".")
    assert accepted > 100 and refused > 1000, (accepted, refused)


def test_fuzz_ingress_profile_values() -> None:
    """The profile's ``ingress_class`` and ``ingress_annotations``: a valid value comes back as
    Kubernetes takes it (annotation values as text), anything else is a SpecError naming the key."""
    from jupyter_tiers.core.errors import SpecError
    from jupyter_tiers.spec.servespec import check_ingress_annotations, check_ingress_class

    rng = random.Random(SEED + 4)
    values: list[Any] = ["nginx", "traefik", "", "Nginx", "a" * 300, 1, None, True, ["nginx"], {"a": 1},
                         "nginx.ingress.kubernetes.io/proxy-body-size", "-x", "a b", "\x00", 1.5]
    keys = [v for v in values if not isinstance(v, (list, dict))]
    entrypoints = "traefik.ingress.kubernetes.io/router.entrypoints"
    for _ in range(2000):
        value = rng.choice(values)
        try:
            assert check_ingress_class(value) == value
        except SpecError as exc:
            assert exc.field == "ingress_class"
        mapping = {rng.choice(keys) if rng.random() < 0.5 else entrypoints: rng.choice(values)
                   for _ in range(rng.randint(0, 3))}
        try:
            got = check_ingress_annotations(mapping)
        except SpecError as exc:
            assert exc.field == "ingress_annotations"
            continue
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in got.items())
    with pytest.raises(SpecError, match="must be a mapping"):
        check_ingress_annotations(["a"])
    assert check_ingress_annotations({"a/b": True, "c": 2}) == {"a/b": "true", "c": "2"}
