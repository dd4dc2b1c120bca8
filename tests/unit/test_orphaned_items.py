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


def test_tiers_help_lists_every_verb_and_no_flag_is_abbreviated() -> None:
    """Issue 41 item 16: ``%tiers?`` listed neither doctor, promote nor rollback; ``%tiers doctor
    -p P`` was refused while history and login take -p; ``--node 2`` was taken as ``--nodes``."""
    from IPython.core.error import UsageError

    from jupyter_tiers.faces.magics import TiersMagics, _parse

    doc = TiersMagics.tiers.__doc__ or ""
    for verb in tiers_command.build_parser()._subparsers._group_actions[0].choices:  # type: ignore[union-attr]
        assert f"%tiers {verb}" in doc or f"| {verb} ID" in doc, verb
    args = tiers_command.build_parser().parse_args(["doctor", "-p", "hpc", "-p", "box"])
    assert args.named == ["hpc", "box"]
    with pytest.raises(tiers_command.CommandUsage):
        tiers_command.build_parser().parse_args(["jobs", "--lim", "5"])
    with pytest.raises(UsageError, match="--node"):
        _parse(TiersMagics.slurm_train.parser, ["--node", "2"])


def test_the_sidebars_hub_orphans_the_rows_of_a_removed_profile(registry: Registry) -> None:
    """The sidebar's rows come from the server's hub: a profile removed while it runs turns its
    rows UNKNOWN at the next scan (no tier is asked for them), and back when it returns."""
    from jupyter_tiers.faces.server.hub import Hub

    removed = {"cp"}
    asked: list[str] = []

    def connect(profile: str, kind: WorkKind) -> object:
        asked.append(profile)
        raise TiersError("not in this test")

    hub = Hub(scan_interval=3600, records=registry.list, connect=connect,  # type: ignore[arg-type]
              gone=lambda profiles: profiles & removed)
    hub.scan()
    rows = {i["id"]: i for i in hub.listing()[0]}
    assert rows["llama-svc"]["state"] == "UNKNOWN" and rows["llama-svc"]["orphan"] is True
    assert not rows["local-7"]["orphan"]
    removed.clear()  # the profile is back (renamed back): the recorded state again
    hub.scan()
    rows = {i["id"]: i for i in hub.listing()[0]}
    assert rows["llama-svc"]["state"] == "READY" and not rows["llama-svc"]["orphan"]
    assert "cp" not in asked
