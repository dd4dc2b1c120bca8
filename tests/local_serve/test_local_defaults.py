"""A local profile's defaults carry the serving keys that mean something on this machine
(replicas, port, readiness) beside the training ones; each tier takes its own, and a cluster-only
serving key is refused in the profile file, naming the key and what is allowed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.profiles import ConfigError, load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.local.serve_tier import LocalServeTier
from jupyter_tiers.local.tier import LocalTier

PROFILE = """\
profiles:
  mine:
    tier: local
    workdir: {workdir}
    defaults: {{nodes: 2, time: "00:05:00", python: python3, replicas: 2, port: 8123, readiness: /healthz}}
"""


def _load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> config.Config:
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user.yaml")
    path = tmp_path / "tiers.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.setenv(config.ENV_VAR, str(path))
    return load_config()


def test_serving_and_training_defaults_each_reach_their_tier(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    profile = _load(tmp_path, monkeypatch, PROFILE.format(workdir=tmp_path / "jobs")).profile("mine")
    registry = Registry(tmp_path / "r.sqlite")
    serve = LocalServeTier(profile, registry).make_spec("print(1)\n", name="svc")
    assert (serve.replicas, serve.port, serve.readiness, serve.python) == (2, 8123, "/healthz", "python3")
    job = LocalTier(profile, registry).make_spec("print(1)\n", name="job")
    assert (job.nodes, job.time, job.python) == (2, "00:05:00", "python3")
    # The magic's options still win over the profile's defaults.
    assert LocalServeTier(profile, registry).make_spec("print(1)\n", name="svc", replicas=1).replicas == 1


@pytest.mark.parametrize("key", ["image", "gpus", "autoscale", "node_selector"])
def test_cluster_only_serving_keys_are_refused_in_a_local_profile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    text = f"profiles:\n  mine:\n    tier: local\n    defaults: {{{key}: x}}\n"
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, monkeypatch, text)
    message = str(err.value)
    assert f"profiles.mine.defaults.{key}" in message and "unknown key" in message
    assert "replicas" in message and "readiness" in message and "nodes" in message  # what is allowed
