"""Issue 42: a /dev/shm that fits model servers. ``--shm-size`` (and a profile's ``shm_size``)
mounts a memory-backed emptyDir at /dev/shm with that sizeLimit; every pod gets one by default
(1Gi, or half of ``--memory`` below 2Gi); ``--shm-size 0`` leaves the runtime's 64 MiB. The
parser's answer to anything else is one short error naming what was wrong and what is allowed.
"""

from __future__ import annotations

import copy
import random
import re
import shlex
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from IPython.core.error import UsageError

from jupyter_tiers.config.project_trust import RESOURCE, rule
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import ServeSpec
from jupyter_tiers.k8s.render import render_manifests
from jupyter_tiers.spec.servespec import memory_bytes, parse_shm_size, shm_size_of, validate_serve_spec
from tests.unit.serve_shell import Shell, serve_shell
from tests.unit.test_k8s_render import openapi_errors

__all__ = ["serve_shell"]  # the fixture

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261242
FUZZ_WORDS = 3000


def _spec(**kw: Any) -> ServeSpec:
    return ServeSpec(body="vllm serve /models/tiny --port {port}", name="llm",
                     image="vllm/vllm-openai:v0.6.0", shell=True, **kw)


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def _shm(pod: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The dshm volume and the container's mounts of it."""
    volume = next((v for v in pod.get("volumes", []) if v["name"] == "dshm"), None)
    mounts = [m for m in pod["containers"][0].get("volumeMounts", []) if m["name"] == "dshm"]
    return volume, mounts


# --- the parser ------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "kept"), [
    ("1Gi", "1Gi"), ("512Mi", "512Mi"), (" 2G ", "2G"), ("1.5Gi", "1.5Gi"), ("1Ti", "1Ti"), ("1Mi", "1Mi"),
    ("0", "0"), (0, "0"), ("00", "0"), ("0.0", "0"), ("0Mi", "0"),
])
def test_sizes_are_kept_as_given_and_zero_means_the_runtimes_own(given: Any, kept: str) -> None:
    assert parse_shm_size(given) == kept


@pytest.mark.parametrize(("given", "says"), [
    ("64", "'64' has no unit"),
    (1024, "'1024' has no unit"),
    ("1.5", "'1.5' has no unit"),
    ("1GB", "'1GB' is not a size"),
    ("1gi", "'1gi' is not a size"),
    ("-1Gi", "'-1Gi' is not a size"),
    ("1e9", "'1e9' is not a size"),
    ("", "'' is not a size"),
    ("big", "'big' is not a size"),
    ("512Ki", "'512Ki' is below 1Mi"),
    ("2Ti", "'2Ti' is over 1Ti"),
    ("99999999999999999999Gi", "is over 1Ti"),
    (True, "got bool"),
    (1.5, "got float"),
])
def test_bad_sizes_are_one_short_error_naming_what_is_allowed(given: Any, says: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_shm_size(given)
    assert err.value.field == "shm_size"
    assert says in err.value.problem
    assert len(err.value.problem) < 200
    assert "1Gi" in err.value.problem and "0 for the container runtime's own /dev/shm" in err.value.problem


def test_memory_quantities_are_read_as_kubernetes_reads_them() -> None:
    assert memory_bytes("512Mi") == 512 << 20
    assert memory_bytes("1.5Gi") == 3 << 29
    assert memory_bytes("2G") == 2_000_000_000
    assert memory_bytes("0.5k") == 500
    assert memory_bytes("0.0001k") == 1  # rounded up, as the API server does
    assert memory_bytes("512") is None and memory_bytes("1GB") is None
    assert memory_bytes("1" * 50 + "Gi") is None


def test_more_than_the_pods_memory_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        validate_serve_spec(_spec(memory="2Gi", shm_size="4Gi"))
    assert err.value.field == "shm_size"
    assert "4Gi is more than --memory 2Gi" in err.value.problem
    validate_serve_spec(_spec(memory="2Gi", shm_size="2Gi"))
    validate_serve_spec(_spec(memory="2Gi", shm_size="0"))


@pytest.mark.parametrize(("memory", "shm", "limit"), [
    (None, None, "1Gi"),
    ("16Gi", None, "1Gi"),
    ("2Gi", None, "1Gi"),
    ("512Mi", None, "256Mi"),
    ("1G", None, "476Mi"),
    ("1Mi", None, "1Mi"),
    ("16Gi", "8Gi", "8Gi"),
    (None, "0", None),
])
def test_the_default_is_1gi_or_half_the_pods_memory(memory: str | None, shm: str | None,
                                                      limit: str | None) -> None:
    assert shm_size_of(_spec(memory=memory, shm_size=shm)) == limit


# --- rendering -------------------------------------------------------------------------------


def test_every_pod_gets_a_memory_backed_dev_shm_by_default() -> None:
    volume, mounts = _shm(_pod(render_manifests(_spec(), namespace="team")))
    assert volume == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
    assert mounts == [{"name": "dshm", "mountPath": "/dev/shm"}]


def test_shm_size_sets_the_limit_and_zero_leaves_the_runtimes_dev_shm() -> None:
    volume, _ = _shm(_pod(render_manifests(_spec(shm_size="8Gi", memory="32Gi"), namespace="team")))
    assert volume is not None and volume["emptyDir"]["sizeLimit"] == "8Gi"
    volume, mounts = _shm(_pod(render_manifests(_spec(shm_size="0"), namespace="team")))
    assert volume is None and mounts == []


def test_the_volume_passes_the_clients_openapi_models() -> None:
    """Field names and types as the kubernetes client's models declare them (V1EmptyDirVolumeSource:
    medium, sizeLimit)."""
    deployment = next(o for o in render_manifests(_spec(shm_size="2Gi"), namespace="team")
                      if o["kind"] == "Deployment")
    assert openapi_errors(deployment) == []
    bad = copy.deepcopy(deployment)
    _shm(_pod([bad]))[0]["emptyDir"]["size_limit"] = "2Gi"  # type: ignore[index]
    assert openapi_errors(bad)


# --- the magic and the README ----------------------------------------------------------------


def _dry_run(shell: Shell, line: str, body: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    shell.run_cell_magic("k8s_serve", line + " --dry-run", body)
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    return _pod(docs)


def test_readmes_vllm_example_rendered_by_dry_run_has_the_dev_shm_volume(
        serve_shell: Shell, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's %%k8s_serve cell, as a user copies it (on the test's profile; its --model-from
    needs a training job, so {model_path} stays as written)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line, body = re.search(r"^%%k8s_serve (.*)\n(vllm serve .*)$", readme, re.M).groups()  # type: ignore[union-attr]
    line = re.sub(r"--profile \S+", "--profile k", line)
    line = re.sub(r"--model-from \S+", "", line)
    pod = _dry_run(serve_shell, line, body, capsys)
    volume, mounts = _shm(pod)
    assert volume == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
    assert mounts == [{"name": "dshm", "mountPath": "/dev/shm"}]


def test_the_howtos_vllm_example_has_what_vllm_needs(serve_shell: Shell,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """docs/howto/serving-k8s.md's vLLM cell: memory, /dev/shm, readiness on /health, and a
    startup window longer than a first start."""
    page = (ROOT / "docs" / "howto" / "serving-k8s.md").read_text(encoding="utf-8")
    line, body = re.search(r"^%%k8s_serve (.*--shm-size.*)\n((?:.*\n)*?)```", page, re.M).groups()  # type: ignore[union-attr]
    line = re.sub(r"--profile \S+", "--profile k", line)
    pod = _dry_run(serve_shell, line, body, capsys)
    container = pod["containers"][0]
    volume, mounts = _shm(pod)
    assert volume is not None and memory_bytes(volume["emptyDir"]["sizeLimit"]) == 2 << 30
    assert mounts == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert container["resources"]["limits"]["memory"] == "8Gi"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600  # a first start: minutes
    assert "vllm serve" in body and "{port}" in body


@pytest.mark.parametrize(("line", "says"), [
    ("--shm-size 64", "--shm-size: '64' has no unit; give one:"),
    ("--shm-size 4Gi --memory 2Gi", "--shm-size: 4Gi is more than --memory 2Gi"),
    ("--shm-size 5Ti", "--shm-size: '5Ti' is over 1Ti"),
])
def test_the_magic_refuses_a_bad_size_with_one_usage_line(serve_shell: Shell, line: str, says: str) -> None:
    with pytest.raises(UsageError) as err:
        serve_shell.run_cell_magic("k8s_serve", f"--name web {line} --shell --dry-run", "vllm serve x")
    assert str(err.value).startswith(says)
    assert "\n" not in str(err.value)


def test_a_project_file_may_set_shm_size_on_a_trusted_profile() -> None:
    row = rule("defaults.shm_size")
    assert row.on_trusted and row.on_own and row.decides == RESOURCE


def test_fuzzed_sizes_give_a_size_or_one_short_error(serve_shell: Shell,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Seeded: random words, and words made of a size's own characters, through the parser and
    (every tenth) through the magic: a kept size that parses to itself and renders, or one short
    SpecError / UsageError about --shm-size; never a traceback."""
    rng = random.Random(SEED)
    alphabet = string.digits + ".KMGTPEikmgB -+e" + "\x00\u00bd\u0663\U0001d7d9"
    kept = refused = 0
    for n in range(FUZZ_WORDS):
        if rng.random() < 0.3:
            word: Any = rng.choice(["", "0", "1Gi", "64Mi", "2Ti", str(rng.randint(0, 10**12)), "0.5Mi",
                                    rng.randint(-5, 10**9), "1" * rng.randint(1, 60) + "Mi"])
        else:
            word = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        try:
            size = parse_shm_size(word)
        except SpecError as exc:
            refused += 1
            assert exc.field == "shm_size" and len(exc.problem) < 200, (word, exc.problem)
            size = None
        else:
            kept += 1
            assert parse_shm_size(size) == size
            assert size == "0" or SHM_BOUNDS[0] <= (memory_bytes(size) or 0) <= SHM_BOUNDS[1]
            _shm(_pod(render_manifests(_spec(shm_size=size), namespace="team")))
        if n % 10 == 0 and isinstance(word, str) and word.strip() and "\x00" not in word:
            line = f"--name web --shell --shm-size={shlex.quote(word)} --dry-run"
            try:
                serve_shell.run_cell_magic("k8s_serve", line, "vllm serve x --port {port}")
            except UsageError as exc:
                assert size is None, (word, str(exc))
                assert str(exc).startswith("--shm-size") and "\n" not in str(exc), (word, str(exc))
            else:
                assert size is not None, word
            capsys.readouterr()
    assert kept > 100 and refused > 100


SHM_BOUNDS = (1 << 20, 1 << 40)
