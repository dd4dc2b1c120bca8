"""The Slurm job the notebook server runs inside: its ids, its sidebar row under the on-cluster
profile, and the refusal to cancel it (actions, ``%tiers cancel``, ``SlurmTier.cancel`` here)."""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.app import ownjob
from jupyter_tiers.batch.jobenv import enclosing_job, refuse_own_job
from jupyter_tiers.config.profiles import Config, merge_layers, validate_profile
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.errors import OwnJob
from jupyter_tiers.faces.server.hub import Hub

SEED = 20261206
JOB = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "c17", "SLURM_JOB_NAME": "ood-jupyter",
       "SLURM_JOB_START_TIME": "1000", "PATH": "/usr/bin"}
TASK = {"SLURM_JOB_ID": "58", "SLURM_ARRAY_JOB_ID": "51", "SLURM_ARRAY_TASK_ID": "7"}
HERE = {"tier": "slurm"}
FAR = {"tier": "slurm", "host": "login.example.org"}


def cfg(profiles: dict[str, dict[str, Any]], default: str | None = None) -> Config:
    layer: dict[str, Any] = {"profiles": {n: validate_profile(n, p, "t") for n, p in profiles.items()}}
    if default:
        layer["default_profile"] = default
    return merge_layers([("t", layer)])


def test_ids_name_the_job_its_raw_id_and_its_array() -> None:
    job = enclosing_job(JOB)
    assert job is not None and job.ids() == {"4242"} and job.start_time == 1000
    task = enclosing_job(TASK)
    assert task is not None and task.job_id == "51_7" and task.ids() == {"51_7", "58", "51"}


def test_refusal_names_the_job_and_how_to_end_it() -> None:
    for ref in ("4242", " 4242 "):
        with pytest.raises(OwnJob, match=r"job 4242 is the Slurm job this notebook runs inside on "
                                         r"node c17: cancelling it would stop this JupyterLab.*portal"):
            refuse_own_job(ref, JOB)
    with pytest.raises(OwnJob, match=r"job 51 \(it holds Slurm job 51_7\)"):
        refuse_own_job("51", TASK)
    refuse_own_job("4243", JOB)  # another job: no error
    refuse_own_job("51_8", TASK)  # another task of the same array
    refuse_own_job("4242", {"PATH": "/usr/bin"})  # outside a job nothing is refused


def test_fuzz_ids_and_refusal_never_crash_and_refuse_only_the_own_ids() -> None:
    rng = random.Random(SEED)
    alphabet = string.digits * 4 + "_+ -x\n;"
    names = ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
             "SLURM_JOB_START_TIME", "SLURMD_NODENAME")
    refused = 0
    for _ in range(3000):
        env = {name: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
               for name in names if rng.random() < 0.7}
        job = enclosing_job(env)
        ref = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        if job is not None and rng.random() < 0.3:
            ref = rng.choice(sorted(job.ids()))
        if job is None:
            refuse_own_job(ref, env)
            continue
        assert all(i and set(i) <= set(string.digits + "_") for i in job.ids())
        if ref.strip() in job.ids():
            with pytest.raises(OwnJob):
                refuse_own_job(ref, env)
            refused += 1
        else:
            refuse_own_job(ref, env)
    assert refused > 100  # the fuzz reached the refusal, not only the passes


def test_own_item_is_under_the_default_local_profile_and_marked() -> None:
    item = ownjob.own_item(JOB, cfg({"here": HERE, "far": FAR}, default="here"), now=1065)
    assert item is not None
    assert item["key"] == "here/4242" and item["own"] is True and item["state"] == "RUNNING"
    assert item["where"] == "c17" and item["name"] == "ood-jupyter" and item["elapsed_s"] == 65
    assert item["started"] == "1970-01-01T00:16:40+00:00" and item["size"] == "this notebook"
    assert item["summary"] == "this notebook runs inside Slurm job 4242 on node c17"
    assert "no Cancel" in item["own_note"]
    # the default is reached over SSH: the first profile that runs here, by name
    other = ownjob.own_item(JOB, cfg({"zz": HERE, "aa": HERE, "far": FAR}, default="far"))
    assert other is not None and other["profile"] == "aa"
    # only SSH profiles (maybe another cluster): no row; outside a job: no row
    assert ownjob.own_item(JOB, cfg({"far": FAR})) is None
    assert ownjob.own_item({"PATH": "/usr/bin"}, cfg({"here": HERE})) is None
    # Slurm before 23.02 gives no start time: no elapsed rather than a made-up one
    old = ownjob.own_item({"SLURM_JOB_ID": "9"}, cfg({"here": HERE}))
    assert old is not None and old["elapsed_s"] is None and old["started"] is None and old["where"] == ""


def test_aged_recomputes_elapsed_from_started_and_leaves_the_row_alone() -> None:
    own = ownjob.own_item(JOB, cfg({"here": HERE}), now=1065)
    assert own is not None and own["elapsed_s"] == 65
    later = ownjob.aged(own, now=4600)
    assert later["elapsed_s"] == 3600 and own["elapsed_s"] == 65
    assert ownjob.aged({**own, "started": None}, now=4600)["elapsed_s"] == 65
    assert ownjob.aged({**own, "started": "not a time"}, now=4600)["elapsed_s"] == 65


def test_with_own_lists_it_first_or_marks_the_registry_row_and_obeys_filters() -> None:
    own = ownjob.own_item(JOB, cfg({"here": HERE}), now=1065)
    assert own is not None
    rows = [{"key": "here/7", "profile": "here", "kind": "job"}]
    assert [i["key"] for i in ownjob.with_own(rows, own)] == ["here/4242", "here/7"]
    assert ownjob.with_own(rows, own, profile="far") == rows
    assert ownjob.with_own(rows, own, kind="service") == rows
    assert ownjob.with_own(rows, own, profile="here", kind="job")[0]["own"] is True
    recorded = [{"key": "here/4242", "profile": "here", "kind": "job", "state": "COMPLETING"}]
    marked = ownjob.with_own(recorded, own)
    assert len(marked) == 1 and marked[0]["own"] is True and marked[0]["state"] == "COMPLETING"
    assert "own" not in recorded[0]  # the caller's rows are not changed


def test_check_cancel_refuses_the_own_job_on_a_local_profile_only(tmp_path: Path) -> None:
    config = cfg({"here": HERE, "far": FAR}, default="here")
    reg = Registry(tmp_path / "r.sqlite")
    for ref in ("here/4242", "4242"):
        with pytest.raises(OwnJob, match="runs inside"):
            ownjob.check_cancel(ref, JOB, config, reg)
    ownjob.check_cancel("far/4242", JOB, config, reg)  # another cluster's job 4242
    ownjob.check_cancel("here/4243", JOB, config, reg)
    ownjob.check_cancel("here/4242", {}, config, reg)
    # a bare id the registry knows under the SSH profile is that cluster's job
    reg.add(JobRecord(profile="far", tier="slurm", job_id="4242", name="t", jobdir="/x"))
    ownjob.check_cancel("4242", JOB, config, reg)
    with pytest.raises(OwnJob):
        ownjob.check_cancel("here/51", TASK, config, reg)  # the array holding this task
    with pytest.raises(OwnJob):
        ownjob.check_cancel("here/58", TASK, config, reg)  # the task's raw id


def test_slurm_tier_cancel_on_this_machine_refuses_before_scancel(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    from jupyter_tiers.slurm.tier import SlurmTier
    from jupyter_tiers.transport.exchange import CommandResult
    from jupyter_tiers.transport.local import LocalTransport

    ran: list[list[str]] = []

    class Recording(LocalTransport):
        def run(self, argv: Any, **kwargs: Any) -> CommandResult:  # type: ignore[override]
            ran.append(list(argv))
            return CommandResult(argv=tuple(argv), exit_status=0, stdout=b"", stderr=b"")

    tier = SlurmTier(cfg({"here": HERE}).profile("here"), Registry(tmp_path / "r.sqlite"),
                     transport=Recording())
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    with pytest.raises(OwnJob, match="job 4242 is the Slurm job this notebook runs inside"):
        tier.cancel(JobRecord(profile="here", tier="slurm", job_id="4242", name="t", jobdir="/x"))
    assert ran == []
    tier.cancel(JobRecord(profile="here", tier="slurm", job_id="4243", name="t", jobdir="/x"))
    assert len(ran) == 1 and "4243" in " ".join(ran[0])


def test_tiers_cancel_is_a_usage_error_naming_the_own_job(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    from jupyter_tiers.config import profiles
    from jupyter_tiers.faces import tiers_command

    monkeypatch.setattr(profiles, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(profiles, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    (tmp_path / "tiers.yaml").write_text("default_profile: here\nprofiles:\n  here: {tier: slurm}\n")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tmp_path / "tiers.yaml"))
    monkeypatch.setenv("JUPYTER_TIERS_REGISTRY", str(tmp_path / "r.sqlite"))
    for name, value in JOB.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(OwnJob, match="job 4242 is the Slurm job this notebook runs inside"):
        tiers_command.run(["cancel", "4242"])
    with pytest.raises(OwnJob):
        tiers_command.run(["cancel", "here/4242"])


def test_hub_lists_the_own_row_first_reads_it_once_and_never_watches_it(tmp_path: Path) -> None:
    calls = []

    def own() -> dict[str, Any] | None:
        calls.append(1)
        return ownjob.own_item(JOB, cfg({"here": HERE}), now=1065)

    reg = Registry(tmp_path / "r.sqlite")
    reg.add(JobRecord(profile="here", tier="slurm", job_id="7", name="t", jobdir="/x"))
    hub = Hub(records=reg.list, own=own)
    try:
        items, _errors, rev = hub.listing()
        assert [i["key"] for i in items] == ["here/4242", "here/7"] and items[0]["own"] is True
        assert "own" not in items[1] and items[0]["rev"] <= rev
        hub.listing()
        again = hub.own_item()
        assert again is not None and again["key"] == items[0]["key"] and len(calls) == 1  # read once
        assert again["elapsed_s"] >= items[0]["elapsed_s"]  # as of each read, from its start
        assert hub.watched() == []
    finally:
        hub.stop()


def test_hub_marks_a_registry_row_of_the_own_job_instead_of_adding_one(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r.sqlite")
    reg.add(JobRecord(profile="here", tier="slurm", job_id="4242", name="lab", jobdir="/x",
                      state="RUNNING"))
    hub = Hub(records=reg.list, own=lambda: ownjob.own_item(JOB, cfg({"here": HERE}), now=1065))
    try:
        items, _errors, _rev = hub.listing()
        assert [i["key"] for i in items] == ["here/4242"]
        assert items[0]["own"] is True and items[0]["name"] == "lab"  # the registry's row, marked
    finally:
        hub.stop()


def test_hub_without_an_own_job_lists_only_the_registry(tmp_path: Path) -> None:
    def broken() -> dict[str, Any] | None:
        raise RuntimeError("config exploded")

    hub = Hub(records=Registry(tmp_path / "r.sqlite").list, own=broken)
    try:
        assert hub.listing()[0] == [] and hub.own_item() is None
    finally:
        hub.stop()
