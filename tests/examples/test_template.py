"""examples/tiers.yaml.template: loads as it is, shows every key, and renders valid jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.api import make_tier
from jupyter_tiers.config import DEFAULT_KEYS, TIER_KEYS, load_file, merge_layers
from jupyter_tiers.errors import SpecError

TEMPLATE = Path(__file__).resolve().parents[2] / "examples" / "tiers.yaml.template"


@pytest.fixture
def cfg():
    return merge_layers([(str(TEMPLATE), load_file(TEMPLATE))])


def test_template_loads_and_has_a_slurm_a_local_and_a_k8s_profile(cfg) -> None:
    tiers = {name: prof.tier for name, prof in cfg.profiles.items()}
    assert tiers["hpc"] == "slurm" and tiers["local"] == "local" and tiers["serving"] == "k8s"
    assert cfg.default_profile == "hpc"


def test_template_slurm_profile_shows_every_key(cfg) -> None:
    raw = load_file(TEMPLATE)["profiles"]["hpc"]
    assert set(TIER_KEYS["slurm"]) <= set(raw), set(TIER_KEYS["slurm"]) - set(raw)
    assert set(DEFAULT_KEYS) <= set(raw["defaults"]), set(DEFAULT_KEYS) - set(raw["defaults"])


@pytest.mark.parametrize("profile", ["hpc", "hpc-debug", "local"])
def test_template_defaults_render_a_valid_job(cfg, profile: str) -> None:
    tier = make_tier(cfg.profile(profile))  # no connection: rendering is pure
    script = tier.render(tier.make_spec("print('hi')\n"))
    assert script.startswith("#!/bin/bash\n")
    if profile == "hpc":
        for text in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=8", "--switches=1@00:10:00",
                     "#SBATCH --mail-type=END,FAIL", "module load cuda/12.4", "--nproc-per-node=8"):
            assert text in script


def test_template_k8s_profile_is_a_clear_not_yet_error(cfg) -> None:
    with pytest.raises(SpecError, match="not available yet"):
        make_tier(cfg.profile("serving"))


def test_template_comment_mentions_the_serving_tier() -> None:
    text = TEMPLATE.read_text()
    assert "serving tier" in text and "coming" in text
