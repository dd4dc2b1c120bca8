"""Layered profile files: system, user, project (or $JUPYTER_TIERS_CONFIG), and their errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.profiles import ConfigError, ProjectFileRefused, load_config, load_file


class Layers:
    """Paths of the three layers inside a tmp dir, with the config module pointed at them."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.system = root / "etc" / "tiers.yaml"
        self.home = root / "home"
        self.user = self.home / ".jupyter" / "tiers.yaml"
        self.project_dir = root / "project"
        self.project = self.project_dir / "tiers.yaml"
        for d in (self.system.parent, self.user.parent, self.project_dir):
            d.mkdir(parents=True)
        monkeypatch.setattr(config, "SYSTEM_PATH", self.system)
        monkeypatch.setattr(config, "USER_PATH", Path("~/.jupyter/tiers.yaml"))
        monkeypatch.setenv("HOME", str(self.home))
        monkeypatch.delenv(config.ENV_VAR, raising=False)
        monkeypatch.setattr(config, "sbatch_here", lambda: False)  # tests that want it say so
        monkeypatch.chdir(self.project_dir)

    @staticmethod
    def write(path: Path, text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path


@pytest.fixture()
def layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layers:
    return Layers(tmp_path, monkeypatch)


SYSTEM = """
profiles:
  hpc:
    tier: slurm
    host: login.cluster.example
    port: 22
    description: the lab cluster
    workdir: /scratch/jt
    setup: ["module load cuda"]
    env: {NCCL_DEBUG: WARN, OMP_NUM_THREADS: 4}
    defaults: {partition: gpu, time: "01:00:00", nodes: 1}
  other:
    tier: slurm
    host: other.example
"""

USER = """
profiles:
  hpc:
    user: alice
    port: 2222
    env: {WANDB_MODE: offline}
    defaults: {time: "04:00:00", gpus-per-node: "a100:4"}
default_profile: hpc
"""

PROJECT = """
profiles:
  hpc:
    env: {NCCL_DEBUG: INFO}
    defaults: {nodes: 2}
    setup: ["module load cuda/12.1", "source venv/bin/activate"]
  dev:
    tier: local
    description: laptop
"""


# --- layering ---------------------------------------------------------------------------------


def test_nothing_configured_gives_builtin_local_default(layers: Layers) -> None:
    cfg = load_config()
    assert cfg.default_profile == "local"
    assert list(cfg.profiles) == ["local"]
    local = cfg.profile()
    assert local.tier == "local"
    assert local.sources == ("built-in",)
    assert cfg.sources == ()


def test_layers_override_key_by_key(layers: Layers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.TRUST_ENV_VAR, "1")  # PROJECT sets setup (tests/hardening: the refusal)
    layers.write(layers.system, SYSTEM)
    layers.write(layers.user, USER)
    layers.write(layers.project, PROJECT)
    cfg = load_config()
    assert cfg.sources == (str(layers.system), str(layers.user), str(layers.project))
    assert cfg.default_profile == "hpc"
    assert set(cfg.profiles) == {"hpc", "other", "dev", "local"}

    hpc = cfg.profile()
    assert hpc.name == "hpc"
    assert hpc.tier == "slurm"
    assert hpc.sources == (str(layers.system), str(layers.user), str(layers.project))
    # settings: later layers override single keys, untouched keys survive
    assert hpc.get("host") == "login.cluster.example"
    assert hpc.get("port") == 2222
    assert hpc.get("user") == "alice"
    assert hpc.get("description") == "the lab cluster"
    assert hpc.workdir == "/scratch/jt"
    # env and defaults are merged key by key (dashes normalised), numbers become strings
    assert dict(hpc.env) == {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "4", "WANDB_MODE": "offline"}
    assert dict(hpc.defaults) == {
        "partition": "gpu",
        "time": "04:00:00",
        "nodes": 2,
        "gpus_per_node": "a100:4",
    }
    # setup is a list: the later layer replaces it
    assert hpc.setup == ("module load cuda/12.1", "source venv/bin/activate")
    # settings hold neither env, defaults, setup nor tier
    assert not {"env", "defaults", "setup", "tier"} & set(hpc.settings)

    other = cfg.profile("other")
    assert other.sources == (str(layers.system),)
    assert other.workdir == "~/jupyter-tiers"
    assert cfg.profile("dev").tier == "local"
    assert cfg.profile("local").sources == ("built-in",)


def test_project_file_can_redefine_local(layers: Layers) -> None:
    layers.write(layers.project, "profiles:\n  local:\n    tier: local\n    env: {OMP_NUM_THREADS: '1'}\n")
    cfg = load_config()
    assert cfg.profile("local").env == {"OMP_NUM_THREADS": "1"}
    assert cfg.profile("local").sources == (str(layers.project),)


def test_env_var_replaces_project_file(layers: Layers, monkeypatch: pytest.MonkeyPatch) -> None:
    layers.write(layers.system, SYSTEM)
    layers.write(layers.project, "profiles:\n  hpc:\n    port: 1111\n")
    custom = layers.write(layers.root / "custom" / "mine.yaml", "profiles:\n  hpc:\n    port: 3333\n")
    monkeypatch.setenv(config.ENV_VAR, str(custom))
    cfg = load_config()
    assert cfg.profile("hpc").get("port") == 3333
    assert str(layers.project) not in cfg.sources
    assert cfg.sources[-1] == str(custom)


def test_explicit_cwd_is_used_for_project_file(layers: Layers) -> None:
    elsewhere = layers.root / "elsewhere"
    layers.write(elsewhere / "tiers.yaml", "profiles:\n  x:\n    tier: local\n")
    assert "x" not in load_config().profiles
    assert "x" in load_config(cwd=elsewhere).profiles


def test_config_paths_order(layers: Layers, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = config.config_paths()
    assert paths == [(layers.system, False), (layers.user, False), (layers.project_dir / "tiers.yaml", False)]
    monkeypatch.setenv(config.ENV_VAR, "~/x.yaml")
    assert config.config_paths()[-1] == (layers.home / "x.yaml", True)


def test_empty_file_is_no_profiles(layers: Layers) -> None:
    layers.write(layers.user, "")
    cfg = load_config()
    assert list(cfg.profiles) == ["local"]
    assert cfg.sources == (str(layers.user),)


# --- errors -----------------------------------------------------------------------------------


def _error(layers: Layers, text: str, path: Path | None = None) -> ConfigError:
    target = layers.write(path or layers.project, text)
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(target) in str(info.value) or info.value.source == str(target)
    return info.value


def test_unknown_key_names_file_key_and_allowed_keys(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    tier: slurm\n    host: h\n    prt: 22\n")
    assert err.source == str(layers.project)
    assert err.key == "profiles.hpc.prt"
    msg = str(err)
    assert msg.startswith(f"{layers.project}: profiles.hpc.prt: unknown key")
    for allowed in ("host", "port", "user", "identity_file", "env", "defaults", "setup"):
        assert allowed in msg
    # a k8s-only key is not offered for a slurm profile
    assert "namespace" not in msg


def test_unknown_default_key(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    tier: local\n    defaults: {gpus: 8}\n")
    assert err.key == "profiles.hpc.defaults.gpus"
    assert "gpus_per_node" in str(err)


def test_key_of_other_tier_rejected_after_merge(layers: Layers) -> None:
    layers.write(layers.system, "profiles:\n  p:\n    tier: local\n")
    err = _error(layers, "profiles:\n  p:\n    host: h\n", layers.user)
    assert err.key == "profiles.p.host"
    assert "local profile" in str(err)


def test_wrong_type(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    tier: slurm\n    host: h\n    port: abc\n")
    assert err.key == "profiles.hpc.port"
    assert "expected an integer" in err.problem
    assert "'abc'" in err.problem


def test_bool_is_not_a_number(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    tier: slurm\n    host: h\n    port: true\n")
    assert err.key == "profiles.hpc.port"


def test_port_out_of_range(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    tier: slurm\n    host: h\n    port: 70000\n")
    assert err.key == "profiles.hpc.port"
    assert "1-65535" in err.problem
    assert "70000" in err.problem


def test_unknown_tier(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    tier: pbs\n")
    assert err.key == "profiles.hpc.tier"
    assert "slurm, local, kubernetes" in err.problem
    assert "'pbs'" in err.problem


def test_missing_tier(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    description: no tier\n")
    assert err.key == "profiles.hpc.tier"
    assert "missing" in err.problem


def test_ssh_keys_of_a_slurm_profile_need_a_host(layers: Layers) -> None:
    """Without host a slurm profile runs Slurm's commands here: an SSH key there is a mistake."""
    for key, value in (("port", "22"), ("user", "al"), ("identity_file", "/k"),
                       ("proxy_jump", "j"), ("connect_timeout", "5")):
        err = _error(layers, f"profiles:\n  hpc:\n    tier: slurm\n    {key}: {value}\n", layers.user)
        assert err.key == f"profiles.hpc.{key}"
        assert "only with host" in err.problem and "this machine" in err.problem


def test_a_slurm_profile_without_host_runs_here(layers: Layers) -> None:
    from jupyter_tiers.slurm.tier import runs_here, transport_for
    from jupyter_tiers.transport.local import LocalTransport
    from jupyter_tiers.transport.ssh import SSHTransport

    layers.write(layers.user, "profiles:\n  here:\n    tier: slurm\n    workdir: /scratch/x\n"
                 "    env: {OTHER: 1}\n  hpc:\n    tier: slurm\n    host: h\n")
    cfg = load_config()
    here, hpc = cfg.profile("here"), cfg.profile("hpc")
    assert runs_here(here) and not runs_here(hpc)
    local = transport_for(here)
    assert isinstance(local, LocalTransport) and "OTHER" not in local.env()
    assert isinstance(transport_for(hpc), SSHTransport)


def test_builtin_cluster_profile_exists_only_with_sbatch(layers: Layers,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    assert "cluster" not in load_config().profiles
    with pytest.raises(ConfigError, match="exists only where sbatch is on PATH"):
        load_config().profile("cluster")
    monkeypatch.setattr(config, "sbatch_here", lambda: True)
    cfg = load_config()
    cluster = cfg.profile("cluster")
    assert cluster.tier == "slurm" and not cluster.get("host") and cluster.sources == ("built-in",)
    assert cfg.default_profile == "local"  # the default stays the local tier


def test_a_file_adds_defaults_to_the_builtin_cluster(layers: Layers,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "sbatch_here", lambda: True)
    layers.write(layers.user, "profiles:\n  cluster:\n    defaults: {partition: gpu}\n")
    cluster = load_config().profile("cluster")
    assert cluster.tier == "slurm" and cluster.defaults == {"partition": "gpu"}


def test_a_project_file_cannot_send_the_builtin_cluster_elsewhere(
        layers: Layers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "sbatch_here", lambda: True)
    layers.write(layers.project, "profiles:\n  cluster:\n    host: evil.example\n")
    with pytest.raises(ProjectFileRefused, match=r"profiles\.cluster\.host"):
        load_config()


def test_host_from_lower_layer_is_enough(layers: Layers) -> None:
    layers.write(layers.system, "profiles:\n  hpc:\n    tier: slurm\n    host: h\n")
    layers.write(layers.user, "profiles:\n  hpc:\n    port: 22\n")
    assert load_config().profile("hpc").get("host") == "h"


def test_missing_file_named_by_env_var(layers: Layers, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = layers.root / "nope.yaml"
    monkeypatch.setenv(config.ENV_VAR, str(missing))
    with pytest.raises(ConfigError) as info:
        load_config()
    assert info.value.source == str(missing)
    assert config.ENV_VAR in str(info.value)
    assert "does not exist" in str(info.value)


def test_invalid_yaml_names_line(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    tier: slurm\n    host: [unclosed\n    port: 22\n")
    assert err.key == "line 5"  # where the unclosed flow sequence is found broken
    assert "not valid YAML" in err.problem


def test_invalid_yaml_exact_line(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  hpc:\n    tier: slurm\n\tbad: tab\n")
    assert err.key == "line 4"


def test_default_profile_naming_nothing(layers: Layers) -> None:
    err = _error(layers, "default_profile: gpu\nprofiles:\n  cpu:\n    tier: local\n")
    assert err.key == "default_profile"
    assert "cpu" in err.problem and "local" in err.problem


def test_setup_entry_with_newline(layers: Layers) -> None:
    err = _error(layers, 'profiles:\n  p:\n    tier: local\n    setup: ["ok", "a\\nb"]\n')
    assert err.key == "profiles.p.setup[1]"


def test_setup_entry_not_text(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  p:\n    tier: local\n    setup: [{a: 1}]\n")
    assert err.key == "profiles.p.setup[0]"


def test_bad_env_name_and_value(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  p:\n    tier: local\n    env: {A-B: x}\n")
    assert err.key == "profiles.p.env.A-B"
    err = _error(layers, "profiles:\n  p:\n    tier: local\n    env: {A: [1]}\n")
    assert err.key == "profiles.p.env.A"
    err = _error(layers, "profiles:\n  p:\n    tier: local\n    env: {A: true}\n")
    assert err.key == "profiles.p.env.A"


def test_bad_profile_name_and_shape(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  'a b':\n    tier: local\n")
    assert err.key == "profiles.a b"
    err = _error(layers, "profiles:\n  p: [1, 2]\n")
    assert err.key == "profiles.p"
    assert "mapping" in err.problem


def test_bad_top_level(layers: Layers) -> None:
    err = _error(layers, "profile:\n  p:\n    tier: local\n")
    assert err.key == "profile"
    assert "allowed: default_profile, profiles" in err.problem
    err = _error(layers, "- a\n- b\n")
    assert err.key == ""
    err = _error(layers, "profiles: [a]\n")
    assert err.key == "profiles"


def test_error_in_user_layer_names_user_file(layers: Layers) -> None:
    layers.write(layers.project, "profiles:\n  p:\n    tier: local\n")
    err = _error(layers, "profiles:\n  q:\n    tier: slurm\n    host: h\n    port: abc\n", layers.user)
    assert err.source == str(layers.user)


def test_load_file_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_file(tmp_path)  # a directory


def test_unknown_profile_lists_known_names(layers: Layers) -> None:
    layers.write(layers.project, "profiles:\n  cpu:\n    tier: local\n  hpc:\n    tier: slurm\n    host: h\n")
    cfg = load_config()
    with pytest.raises(ConfigError) as info:
        cfg.profile("nope")
    err = info.value
    assert err.key == "profiles.nope"
    assert "known profiles: cpu, hpc, local" in err.problem
    assert err.source == str(layers.project)


def test_unknown_profile_without_files(layers: Layers) -> None:
    with pytest.raises(ConfigError) as info:
        load_config().profile("nope")
    assert "no tiers.yaml found" in str(info.value)
    assert "known profiles: local" in str(info.value)


# --- the kubernetes tier --------------------------------------------------------------------------

SERVING = """
profiles:
  serving:
    tier: kubernetes
    namespace: team-llm
    service_type: NodePort
    image_pull_secrets: [regcred]
    model_volume: {pvc: models}
    defaults: {image: "vllm/vllm-openai:v0.6.0", port: 8000, replicas: 2, gpus: 1,
               image_pull_policy: IfNotPresent, node_selector: {pool: gpu},
               tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}
"""


def test_a_kubernetes_profile_takes_serve_defaults(layers: Layers) -> None:
    layers.write(layers.user, SERVING)  # a project file's own kubernetes profile is refused (issue 26)
    prof = load_config().profile("serving")
    assert prof.tier == "kubernetes"
    assert prof.defaults["replicas"] == 2 and prof.get("namespace") == "team-llm"


def test_k8s_is_an_alias_of_kubernetes(layers: Layers) -> None:
    layers.write(layers.user, "profiles:\n  s:\n    tier: k8s\n    namespace: a\n")
    assert load_config().profile("s").tier == "kubernetes"


def test_job_defaults_are_refused_in_a_serving_profile_and_the_other_way_round(layers: Layers) -> None:
    err = _error(layers, "profiles:\n  s:\n    tier: kubernetes\n    defaults: {nodes: 2}\n")
    assert err.key == "profiles.s.defaults.nodes" and "replicas" in err.problem
    err = _error(layers, "profiles:\n  h:\n    tier: slurm\n    host: x\n    defaults: {replicas: 2}\n")
    assert err.key == "profiles.h.defaults.replicas" and "nodes" in err.problem


def test_a_serve_default_is_refused_once_the_tier_is_known_from_another_layer(layers: Layers) -> None:
    layers.write(layers.system, "profiles:\n  s:\n    tier: slurm\n    host: x\n")
    layers.write(layers.project, "profiles:\n  s:\n    defaults: {replicas: 2}\n")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert info.value.key == "profiles.s.defaults.replicas"
    assert info.value.source == str(layers.project)


@pytest.mark.parametrize(
    ("settings", "key", "problem"),
    [
        ("namespace: Team_LLM", "profiles.s.namespace", "DNS-1123"),
        ("service_type: External", "profiles.s.service_type", "ClusterIP, NodePort, LoadBalancer"),
        ("image_pull_secrets: [Bad Name]", "profiles.s.image_pull_secrets[0]", "Secret name"),
        ("model_volume: {pvc: a, nfs: {server: b, path: /c}}", "profiles.s.model_volume", "exactly one"),
        ("model_volume: {claim: models}", "profiles.s.model_volume", "exactly one"),
        ("ingress_class: Nginx_1", "profiles.s.ingress_class", "not an IngressClass name"),
        ("ingress_annotations: {'bad key!': x}", "profiles.s.ingress_annotations", "annotation key"),
        ("ingress_annotations: {a: [1]}", "profiles.s.ingress_annotations", "must be text"),
        ("ingress_annotations: [a]", "profiles.s.ingress_annotations", "expected a mapping"),
    ],
)
def test_bad_kubernetes_settings_name_the_key(layers: Layers, settings: str, key: str, problem: str) -> None:
    err = _error(layers, f"profiles:\n  s:\n    tier: kubernetes\n    {settings}\n")
    assert err.key == key and problem in err.problem


def test_a_bad_serve_default_value_is_blamed_on_the_profile_file(layers: Layers) -> None:
    from jupyter_tiers.api import make_tier

    path = layers.write(layers.user,
                        "profiles:\n  s:\n    tier: kubernetes\n    defaults: {replicas: -1}\n")
    tier = make_tier(load_config().profile("s"))
    with pytest.raises(ConfigError) as info:
        tier.make_spec("print(1)", image="python:3.11-slim")  # type: ignore[attr-defined]
    assert info.value.key == "profiles.s.defaults.replicas" and info.value.source == str(path)
