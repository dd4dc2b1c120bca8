"""The README's profile example is a valid tiers.yaml that renders a job."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.slurm.tier import SlurmTier

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# Where the example lives once README is the front door (docs/_tools/front_door.py moves it).
PROFILES_PAGE = ROOT / "docs" / "reference" / "profiles.md"


def test_readme_profile_example_loads_and_renders(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [b for path in (PROFILES_PAGE, README)
              for b in re.findall(r"```yaml\n(.*?)```", path.read_text(), re.S)]
    example = next(b for b in blocks if "profiles:" in b)
    path = tmp_path / "tiers.yaml"
    path.write_text(example)
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    monkeypatch.setattr("jupyter_tiers.config.profiles.SYSTEM_PATH", tmp_path / "none.yaml")
    monkeypatch.setattr("jupyter_tiers.config.profiles.USER_PATH", tmp_path / "none2.yaml")
    cfg = load_config()
    assert cfg.default_profile == "hpc" and cfg.profile("laptop").tier == "local"
    tier = SlurmTier(cfg.profile("hpc"))  # rendering needs no connection
    script = tier.render(tier.make_spec("print(1)", nodes=2))
    assert "#SBATCH --partition=gpu" in script and "#SBATCH --gpus-per-node=8" in script
    assert "module load cuda/12.4" in script and "torchrun" in script
