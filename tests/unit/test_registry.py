"""The sqlite job registry: lookups, ordering, updates, sharing between processes, no secrets."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from jupyter_tiers.config import registry as registry_mod
from jupyter_tiers.config.registry import JobRecord, Registry, spec_for_record
from jupyter_tiers.core.errors import JobNotFound
from jupyter_tiers.core.model import JobSpec, WorkKind
from jupyter_tiers.slurm.render import render_sbatch


def _record(job_id: str, *, profile: str = "hpc", name: str = "train", at: float = 1000.0,
            spec: JobSpec | None = None, **kw: object) -> JobRecord:
    spec = spec or JobSpec(script="print(1)", name=name)
    return JobRecord(
        profile=profile,
        tier="slurm",
        job_id=job_id,
        name=name,
        jobdir=f"~/jupyter-tiers/{name}-{job_id}",
        world_size=spec.world_size,
        submitted_at=at,
        spec=spec_for_record(spec),
        script=render_sbatch(spec),
        updated_at=at,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture()
def reg(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "sub" / "registry.sqlite")


def test_add_and_get_by_key_round_trips(reg: Registry) -> None:
    rec = _record("101", nodelist="node[1-2]", state="RUNNING")
    reg.add(rec)
    got = reg.get("hpc/101")
    # the spec goes through JSON: tuples come back as lists
    assert got == replace(rec, spec=json.loads(json.dumps(rec.spec)))
    assert got.spec["sbatch_options"] == [] and got.spec["nodes"] == 1
    assert got.key == "hpc/101"
    assert reg.path.exists()


def test_get_by_bare_id_newest_and_by_profile(reg: Registry) -> None:
    reg.add(_record("7", profile="a", at=1.0))
    reg.add(_record("7", profile="b", at=2.0))
    reg.add(_record("8", profile="a", at=3.0))
    assert reg.get("7").profile == "b"  # newest of the two clusters
    assert reg.get("7", profile="a").profile == "a"
    assert reg.get("a/7").profile == "a"
    with pytest.raises(JobNotFound, match="'9'"):
        reg.get("9")
    with pytest.raises(JobNotFound):
        reg.get("8", profile="b")
    with pytest.raises(JobNotFound):
        reg.get("c/7")


def test_add_same_key_replaces(reg: Registry) -> None:
    reg.add(_record("5", name="first"))
    reg.add(_record("5", name="second"))
    assert [r.name for r in reg.list()] == ["second"]


def test_find_by_name_newest(reg: Registry) -> None:
    reg.add(_record("1", name="train", at=10.0))
    reg.add(_record("3", name="train", at=30.0))
    reg.add(_record("2", name="train", at=20.0))
    reg.add(_record("4", name="train", profile="other", at=40.0))
    reg.add(_record("5", name="eval", at=50.0))
    found = reg.find_by_name("hpc", "train")
    assert found is not None and found.job_id == "3"
    assert reg.find_by_name("other", "train").job_id == "4"  # type: ignore[union-attr]
    assert reg.find_by_name("hpc", "nope") is None
    assert reg.find_by_name("nope", "train") is None


def test_list_newest_first_with_limit_and_profile(reg: Registry) -> None:
    for i, at in enumerate([5.0, 1.0, 4.0, 2.0, 3.0]):
        reg.add(_record(str(i), profile="hpc" if i % 2 == 0 else "k", at=at))
    assert [r.job_id for r in reg.list()] == ["0", "2", "4", "3", "1"]
    assert [r.job_id for r in reg.list(limit=2)] == ["0", "2"]
    assert [r.job_id for r in reg.list(profile="k")] == ["3", "1"]
    assert [r.job_id for r in reg.list(limit=1, profile="hpc")] == ["0"]
    assert reg.list(profile="none") == []


def test_update_state_keeps_nodelist_unless_given(reg: Registry) -> None:
    reg.add(_record("11", at=100.0))
    reg.update("hpc/11", state="RUNNING", nodelist="node[1-2]")
    got = reg.get("hpc/11")
    assert (got.state, got.nodelist) == ("RUNNING", "node[1-2]")
    assert got.updated_at > 100.0
    reg.update("hpc/11", state="COMPLETED")
    got = reg.get("hpc/11")
    assert (got.state, got.nodelist) == ("COMPLETED", "node[1-2]")
    assert got.submitted_at == 100.0
    reg.update("hpc/404", state="FAILED")  # unknown key: nothing happens
    assert len(reg.list()) == 1


def test_second_registry_object_sees_records(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    first = Registry(path)
    first.add(_record("21", at=1.0))
    second = Registry(path)  # as a new process would open it
    assert second.get("hpc/21") == first.get("hpc/21")
    second.add(_record("22", at=2.0))
    second.update("hpc/21", state="FAILED")
    assert [r.job_id for r in first.list()] == ["22", "21"]
    assert first.get("21").state == "FAILED"


def test_default_path_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "env" / "reg.sqlite"
    monkeypatch.setenv(registry_mod.ENV_VAR, str(target))
    assert registry_mod.default_path() == target
    reg = Registry()
    reg.add(_record("1"))
    assert target.exists()


def test_spec_for_record_drops_env_values_script_and_metadata() -> None:
    spec = JobSpec(
        script="SECRET_IN_CELL = 1",
        env=(("API_KEY", "value-1"), ("OTHER", "value-2")),
        metadata=(("cell", "x"),),
        setup=("module load x",),
        nodes=2,
    )
    data = spec_for_record(spec)
    assert data["env"] == [["API_KEY", None], ["OTHER", None]]
    assert "script" not in data
    assert "metadata" not in data
    assert data["nodes"] == 2
    assert data["setup"] == ("module load x",)
    assert "value-1" not in repr(data) and "value-2" not in repr(data)


def test_secret_never_reaches_the_database_file(tmp_path: Path) -> None:
    secret = "hunter2-Sup3r-S3cret-token-xyzzy"
    spec = JobSpec(
        script="print('hi')",
        name="secretive",
        env=(("WANDB_API_KEY", secret), ("HF_TOKEN", secret[::-1])),
    )
    path = tmp_path / "r.sqlite"
    reg = Registry(path)
    rec = _record("31", name="secretive", spec=spec)
    reg.add(rec)
    reg.update(rec.key, state="RUNNING", nodelist="node1")
    stored = reg.get(rec.key)
    assert stored.spec["env"] == [["WANDB_API_KEY", None], ["HF_TOKEN", None]]
    assert secret not in stored.script
    for file in tmp_path.iterdir():  # the database plus any journal sqlite left behind
        blob = file.read_bytes()
        assert secret.encode() not in blob, file.name
        assert secret[::-1].encode() not in blob, file.name
    assert b"WANDB_API_KEY" in path.read_bytes()  # the names are kept


# --- layout versions ----------------------------------------------------------------------------

V0_FILE = Path(__file__).parent / "data" / "registry-v0.sqlite"  # written by the jobs-only registry


def test_a_registry_written_by_the_first_layout_is_migrated_in_place(tmp_path: Path) -> None:
    import shutil
    import sqlite3

    from jupyter_tiers.config.registry import SCHEMA_VERSION

    path = tmp_path / "registry.sqlite"
    shutil.copy(V0_FILE, path)
    reg = Registry(path)
    jobs = reg.list()
    assert [(r.key, r.kind, r.state, r.world_size) for r in jobs] == [
        ("local/7", "job", "COMPLETED", 2), ("hpc/41", "job", "FAILED", 16)]
    old = reg.get("hpc/41")
    assert old.jobdir == "/home/a/jupyter-tiers/llama-ft/x" and old.nodelist == "node[1-2]"
    assert old.spec["env"] == [["WANDB_API_KEY", None]]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # A service (no job directory, no ranks) now fits beside the old jobs, and opening again
    # does not migrate twice.
    reg.add(JobRecord(profile="serving", tier="kubernetes", job_id="llama-svc", name="llama-svc",
                      kind="service", state="READY", detail="2/2 ready"))
    again = Registry(path)
    assert [r.kind for r in again.list()] == [WorkKind.SERVICE, WorkKind.JOB, WorkKind.JOB]
    assert all(type(r.kind) is WorkKind for r in again.list())  # old rows read as the enum too
    assert [r.key for r in again.list(kind=WorkKind.SERVICE)] == ["serving/llama-svc"]
    assert again.get("serving/llama-svc").jobdir == ""


def test_a_registry_from_a_newer_version_is_refused_clearly(tmp_path: Path) -> None:
    import sqlite3

    from jupyter_tiers.core.errors import TiersError

    path = tmp_path / "registry.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(TiersError, match="newer jupyter-tiers"):
        Registry(path)


# --- a damaged or locked file (found by the chaos harness: sqlite's traceback reached the user,
# and a garbled page listed the other records with some silently missing) ------------------------
def test_a_damaged_registry_is_one_line_naming_it_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "registry.sqlite"
    reg = Registry(path)
    for i in range(200):
        reg.add(_record(str(i), at=1000.0 + i))
    with open(path, "r+b") as f:  # garble one b-tree page in the middle
        f.seek(4096 * 3)
        f.write(b"\xff" * 4096)
    before = path.read_bytes()
    with pytest.raises(registry_mod.RegistryError) as err:
        Registry(path).list()
    text = str(err.value)
    assert "\n" not in text and str(path) in text and "damaged" in text and ".recover" in text
    assert path.read_bytes() == before


def test_registry_problem_words() -> None:
    import sqlite3

    path = Path("/r.sqlite")
    locked = registry_mod.registry_problem(path, sqlite3.OperationalError("database is locked"))
    assert "stayed locked" in locked and "try again" in locked
    bad = registry_mod.registry_problem(path, sqlite3.DatabaseError("*** in database main ***\nPage 3: x"))
    assert "\n" not in bad and "damaged (Page 3: x)" in bad


def test_a_record_kind_is_a_work_kind_stored_as_its_plain_text(reg: Registry, tmp_path: Path) -> None:
    import sqlite3

    rec = JobRecord(profile="serving", tier="kubernetes", job_id="web", name="web", kind="service")
    assert rec.kind is WorkKind.SERVICE and rec.kind == "service" and f"{rec.kind}" == "service"
    assert JobRecord(profile="p", tier="slurm", job_id="1", name="t").kind is WorkKind.JOB
    with pytest.raises(ValueError, match="'train' is not a valid WorkKind"):
        JobRecord(profile="p", tier="slurm", job_id="1", name="t", kind="train")
    reg.add(rec)
    with sqlite3.connect(reg.path) as db:  # the column keeps its text values: older versions read it
        assert db.execute("SELECT kind, typeof(kind) FROM jobs").fetchall() == [("service", "text")]
    assert reg.get("serving/web").kind is WorkKind.SERVICE
    assert json.dumps({"kind": rec.kind}) == '{"kind": "service"}'  # the REST field keeps its value
