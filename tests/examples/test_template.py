"""examples/tiers.yaml.template: loads as it is, shows every key, and renders valid jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.api import make_tier
from jupyter_tiers.config.profiles import TIER_KEYS, default_keys, load_file, merge_layers

TEMPLATE = Path(__file__).resolve().parents[2] / "examples" / "tiers.yaml.template"


@pytest.fixture
def cfg():
    return merge_layers([(str(TEMPLATE), load_file(TEMPLATE))])


def test_template_loads_and_has_a_slurm_a_local_and_a_k8s_profile(cfg) -> None:
    tiers = {name: prof.tier for name, prof in cfg.profiles.items()}
    assert tiers["hpc"] == "slurm" and tiers["local"] == "local" and tiers["serving"] == "kubernetes"
    assert cfg.default_profile == "hpc"


def test_template_slurm_profile_shows_every_key(cfg) -> None:
    raw = load_file(TEMPLATE)["profiles"]["hpc"]
    assert set(TIER_KEYS["slurm"]) <= set(raw), set(TIER_KEYS["slurm"]) - set(raw)
    keys = default_keys("slurm")
    assert set(keys) <= set(raw["defaults"]), set(keys) - set(raw["defaults"])


def test_template_serving_profile_shows_every_key(cfg) -> None:
    raw = load_file(TEMPLATE)["profiles"]["serving"]
    missing = set(TIER_KEYS["kubernetes"]) - {"setup", "workdir"} - set(raw)
    assert not missing, missing
    keys = default_keys("kubernetes")
    assert set(keys) <= set(raw["defaults"]), set(keys) - set(raw["defaults"])


@pytest.mark.parametrize("profile", ["hpc", "hpc-debug", "local"])
def test_template_defaults_render_a_valid_job(cfg, profile: str) -> None:
    tier = make_tier(cfg.profile(profile))  # no connection: rendering is pure
    script = tier.render(tier.make_spec("print('hi')\n"))
    assert script.startswith("#!/bin/bash\n")
    if profile == "hpc":
        for text in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=8", "--switches=1@00:10:00",
                     "#SBATCH --mail-type=END,FAIL", "module load cuda/12.4", "--nproc-per-node=8"):
            assert text in script


def test_template_serving_defaults_render_valid_manifests(cfg) -> None:
    tier = make_tier(cfg.profile("serving"))  # no connection: rendering is pure
    spec = tier.make_spec("vllm serve /models/llama --port 8000\n", shell=True, name="llama-svc")
    assert (spec.replicas, spec.gpus, spec.autoscale) == (1, 1, (1, 4, 80))
    text = tier.render(spec)
    for piece in ("kind: Deployment", "nvidia.com/gpu: '1'", "path: /health", "claimName: models",
                  "kind: HorizontalPodAutoscaler", "name: hf-token", "namespace: alice"):
        assert piece in text, piece


def test_template_profiles_hand_a_checkpoint_over(cfg) -> None:
    """A checkpoint under the hpc profile's checkpoint_dir is visible to the serving profile's
    pods (through model_volume.path_map) and to the local profile (through its path_map)."""
    from jupyter_tiers.data.handoff import Checkpoint, serving_model_path

    directory = cfg.profile("hpc").defaults["checkpoint_dir"]
    ckpt = Checkpoint(job_key="hpc/42", job_id="42", job_name="ft", profile="hpc", tier="slurm",
                      directory=directory, path=f"{directory}/ckpt-000100.pt")
    assert serving_model_path(ckpt, cfg.profile("serving")) == "/models/alice/checkpoints/ckpt-000100.pt"
    assert serving_model_path(ckpt, cfg.profile("local")) == (
        "/mnt/cluster-scratch/alice/checkpoints/ckpt-000100.pt")
