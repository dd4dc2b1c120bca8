"""Issue 41 item 3: a service whose profile was removed or renamed (its namespace gone too) stayed
``READY 2/2`` in the list with a ticking age and Scale/Restart/Delete. Nobody can check it: it
reads UNKNOWN saying why, offers only Forget, and Forget drops it from the registry (and nothing
whose profile still exists)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.app import actions
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import WorkKind
from jupyter_tiers.faces import tiers_command
from tests import helpers


@pytest.fixture()
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Registry:
    helpers.isolate_tiers(tmp_path, monkeypatch)
    reg = Registry()
    reg.add(JobRecord(profile="cp", tier="kubernetes", job_id="llama-svc", name="llama-svc",
                      state="READY", kind=WorkKind.SERVICE, detail="2/2"))
    reg.add(JobRecord(profile="cp", tier="slurm", job_id="41", name="old", state="COMPLETED"))
    reg.add(JobRecord(profile="local", tier="local", job_id="local-7", name="mine", state="RUNNING"))
    return reg


def test_a_service_of_a_removed_profile_reads_unknown_with_only_forget(registry: Registry) -> None:
    listing = actions.list_items(refresh=True, registry=registry)
    by_id = {i.id: i for i in listing.items}
    svc = by_id["llama-svc"]
    assert (svc.state, svc.orphan, svc.elapsed_s) == ("UNKNOWN", True, None)
    assert svc.reason == "profile 'cp' no longer exists (removed or renamed in tiers.yaml)"
    assert "%tiers forget llama-svc" in svc.summary
    assert by_id["41"].state == "COMPLETED" and by_id["41"].orphan  # a final state stays
    assert not by_id["local-7"].orphan
    assert not [e for e in listing.errors if e.profile == "cp"]  # nobody was asked: no red line


def test_forget_drops_only_what_nothing_can_check(registry: Registry,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TiersError, match="its profile 'local' exists"):
        actions.forget("local-7")
    tiers_command.run(["forget", "llama-svc"])
    assert "forgot service llama-svc of the removed profile 'cp'" in capsys.readouterr().out
    assert sorted(r.job_id for r in registry.list()) == ["41", "local-7"]
