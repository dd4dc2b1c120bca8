"""The tiers' optional capabilities are declared methods with defaults (no attribute probes): an
array is cancelled task by task unless the tier cancels it at once, a tier that cannot list task
checkpoints or log in says so, and the public tier cache the server reads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from jupyter_tiers import api
from jupyter_tiers.app import task_handoff
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.errors import Unsupported
from jupyter_tiers.core.model import WorkKind
from jupyter_tiers.data.handoff import HandoffError
from jupyter_tiers.engine.tier import BatchTier, Tier
from jupyter_tiers.faces import tiers_command
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import isolate_tiers, local_profile


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    isolate_tiers(tmp_path, monkeypatch)
    api.close_all()
    yield
    api.close_all()


def _record(job_id: str) -> JobRecord:
    return JobRecord(profile="local", tier="local", job_id=job_id, name="sweep", submitted_at=0.0)


class _Cancelling(LocalTier):
    def __init__(self, workdir: Path) -> None:
        super().__init__(local_profile(workdir))
        self.cancelled: list[str] = []

    def cancel(self, record: JobRecord) -> None:
        self.cancelled.append(record.job_id)


def test_an_array_is_cancelled_task_by_task_by_default(tmp_path: Path) -> None:
    tier = _Cancelling(tmp_path)
    tasks: Sequence[JobRecord] = [_record("7_0"), _record("7_1"), _record("7_2")]
    tier.cancel_array(_record("7"), tasks)
    assert tier.cancelled == ["7_0", "7_1", "7_2"]


def test_task_checkpoints_unsupported_is_a_handoff_refusal(tmp_path: Path) -> None:
    class NoListing(_Cancelling):
        task_checkpoints = BatchTier.task_checkpoints  # the declared default

    tier = NoListing(tmp_path)
    with pytest.raises(Unsupported, match="cannot list an array's task checkpoints"):
        tier.task_checkpoints(_record("7"))
    with pytest.raises(HandoffError, match=r"^--model-from 7: the local tier cannot list"):
        task_handoff._task_checkpoints(tier, _record("7"), "7", 0)


def test_login_is_refused_for_a_profile_without_ssh() -> None:
    with pytest.raises(Unsupported, match="local is a local profile; only Slurm profiles log in"):
        api.connect("local").login()
    with pytest.raises(tiers_command.CommandUsage, match=r"^%tiers login: local is a local profile"):
        tiers_command.run(["login", "-p", "local"])


def test_the_public_tier_cache_and_scheduler_query_count() -> None:
    batch, serve = api.connect("local"), api.connect("local", kind=WorkKind.SERVICE)
    cached = api.cached_tiers()
    assert cached == {("local", WorkKind.JOB): batch, ("local", WorkKind.SERVICE): serve}
    cached.clear()  # a snapshot: the cache itself is untouched
    assert api.cached_tiers()[("local", WorkKind.JOB)] is batch
    assert isinstance(batch, BatchTier) and batch.scheduler_queries == 0  # no watcher started yet


def test_a_tier_made_without_the_api_keeps_a_record_of_the_other_kind(tmp_path: Path) -> None:
    """Tier.sibling is how a local profile's batch tier hands a service to its serving tier;
    api.make_tier sets it, a tier constructed directly has none."""
    direct = LocalTier(local_profile(tmp_path))
    assert direct.sibling is None
    made = api.make_tier(local_profile(tmp_path))
    assert made.sibling is api.tier_for
    assert Tier.sibling is None


def test_typed_entry_points(tmp_path: Path) -> None:
    import jupyter_tiers
    from jupyter_tiers.core.errors import SpecError
    from jupyter_tiers.engine.tier import ServeTier

    (tmp_path / "tiers.yaml").write_text("profiles:\n  far: {tier: slurm, host: 192.0.2.1, user: nobody}\n")
    batch = jupyter_tiers.connect_batch("local")
    assert isinstance(batch, BatchTier) and batch is api.connect("local")
    serve = jupyter_tiers.connect_serve("local")
    assert isinstance(serve, ServeTier) and serve is api.connect("local", kind=WorkKind.SERVICE)
    with pytest.raises(SpecError, match="'far' is a slurm profile; services run on a kubernetes or local"):
        api.connect_serve("far")


def test_each_tier_names_its_backend_and_kind_is_its_deprecated_alias(tmp_path: Path) -> None:
    from jupyter_tiers.k8s.tier import K8sTier
    from jupyter_tiers.local.serve_tier import LocalServeTier
    from jupyter_tiers.slurm.tier import SlurmTier

    # The values are what a profile's ``tier:`` says and a registry record's ``tier`` holds.
    assert [t.backend for t in (SlurmTier, K8sTier, LocalTier, LocalServeTier)] == [
        "slurm", "kubernetes", "local", "local"]
    tier = LocalTier(local_profile(tmp_path))
    assert tier.kind == tier.backend == "local"
    assert isinstance(Tier.__dict__["kind"], property) and Tier.__dict__["kind"].fset is None
