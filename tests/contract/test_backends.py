"""The backend table of the contract suites is whole: every backend of an interface declares the
same capabilities, and every backend's environment is a known marker."""

from __future__ import annotations

from tests import conftest as lanes
from tests.contract.conftest import BATCH_MAKERS, CAPABILITIES, SERVE_MAKERS, backend_params


def test_every_backend_declares_every_capability_of_its_interface() -> None:
    assert set(CAPABILITIES) == set(lanes.BACKEND_ENVIRONMENTS)
    for interface in ("batch", "serve"):
        names = [set(caps) for key, caps in CAPABILITIES.items() if key.startswith(f"{interface}/")]
        assert len(names) >= 2 and all(n == names[0] for n in names), interface


def test_every_backend_has_a_maker_and_a_known_environment() -> None:
    assert {f"batch/{n}" for n in BATCH_MAKERS} | {f"serve/{n}" for n in SERVE_MAKERS} == set(CAPABILITIES)
    assert {e for e in lanes.BACKEND_ENVIRONMENTS.values() if e} <= set(lanes.ENVIRONMENTS)
    marks = {p.values[0]: [m.name for m in p.marks] for p in backend_params("batch")}
    assert marks == {"slurm": [], "slurm_here": ["slurm"], "local": ["local_procs"]}
