"""``connect(profile, kind)``: a local profile has a training tier and a serving tier; the other
profiles have one tier for both kinds; a registry record's kind picks the tier that runs it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers import api
from jupyter_tiers import connect as public_connect
from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import WorkKind
from jupyter_tiers.local.serve_tier import LocalServeTier
from jupyter_tiers.local.tier import LocalTier

YAML = """\
profiles:
  laptop: {tier: local, defaults: {nodes: 2, python: python3}}
  far: {tier: slurm, host: 192.0.2.1, user: nobody}
  serving: {tier: kubernetes, namespace: ns}
"""


@pytest.fixture(autouse=True)
def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "none.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "none.yaml")
    path = tmp_path / "tiers.yaml"
    path.write_text(YAML)
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    api.close_all()
    yield
    api.close_all()


def test_a_local_profile_has_a_tier_for_each_kind() -> None:
    batch, serve = api.connect("laptop"), api.connect("laptop", kind=WorkKind.SERVICE)
    assert isinstance(batch, LocalTier) and isinstance(serve, LocalServeTier)
    assert api.connect("laptop", kind="job") is batch and api.connect("laptop", kind="service") is serve
    # the words from before WorkKind still work (user code)
    assert api.connect("laptop", kind="batch") is batch and api.connect("laptop", kind="serve") is serve
    assert public_connect("laptop", kind=WorkKind.SERVICE) is serve  # cached: one per profile and kind
    assert public_connect("laptop", kind="serve") is serve
    assert isinstance(api.connect(None, kind="serve"), LocalServeTier)  # the built-in local profile


def test_other_profiles_have_one_tier_for_both_kinds() -> None:
    assert api.connect("far", kind="serve") is api.connect("far")
    assert api.connect("serving", kind="serve") is api.connect("serving", kind="batch")


def test_a_bad_kind_names_what_is_allowed() -> None:
    with pytest.raises(SpecError) as err:
        api.connect("laptop", kind="train")
    assert err.value.field == "kind" and "use job or service" in err.value.problem


def test_a_record_gets_the_tier_that_runs_it_and_its_handle() -> None:
    svc = JobRecord(profile="laptop", tier="local", job_id="web", name="web", kind="service",
                    state="READY", submitted_at=0.0, spec={}, script="")
    job = JobRecord(profile="laptop", tier="local", job_id="3", name="t", kind="job", state="RUNNING",
                    submitted_at=0.0, spec={}, script="")
    assert isinstance(api.tier_for(svc), LocalServeTier) and isinstance(api.tier_for(job), LocalTier)
    # a service asked of the local training tier is handled by the serving tier
    handle = api.connect("laptop").handle(svc)
    assert handle.kind is WorkKind.SERVICE and isinstance(handle.tier, LocalServeTier)
    assert api.connect("laptop", kind="serve").handle(job).tier is api.connect("laptop")


def test_serving_keeps_only_the_serving_defaults_of_a_local_profile() -> None:
    spec = api.connect("laptop", kind="serve").make_spec("print(1)")  # type: ignore[attr-defined]
    assert spec.python == "python3" and not hasattr(spec, "nodes")
