"""Pure parts of the handoff (handoff.py): checkpoint directory, listing, registry detail, path
maps and the one-line refusals. No I/O but a temporary registry where a lookup is tested."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from jupyter_tiers.batch import jobdir
from jupyter_tiers.batch.jobdir import checkpoint_lines
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobSpec
from jupyter_tiers.data import handoff
from jupyter_tiers.data.handoff import Checkpoint, HandoffError
from jupyter_tiers.slurm.commands import with_checkpoints
from jupyter_tiers.slurm.render import render_sbatch

CKPT = Checkpoint(job_key="box/42", job_id="42", job_name="ft", profile="box", tier="slurm",
                  directory="/scratch/ckpt/ft/42/checkpoints",
                  path="/scratch/ckpt/ft/42/checkpoints/ckpt-000100.pt")


def record(state: str = "COMPLETED", detail: str | None = None, **kw: object) -> JobRecord:
    base: dict = {"profile": "box", "tier": "slurm", "job_id": "42", "name": "ft", "state": state,
                  "detail": detail}
    base.update(kw)
    return JobRecord(**base)


# --- the directory ----------------------------------------------------------------------------


def test_default_dir_is_workdir_name_jobid_checkpoints_and_created_before_ranks() -> None:
    script = render_sbatch(JobSpec(script="print(1)", name="ft"))
    lines = script.splitlines()
    export = 'export JT_CHECKPOINT_DIR="${JT_JOB_DIR%/*}/ft/$SLURM_JOB_ID/checkpoints"'
    assert export in lines
    mkdir = lines.index('(umask 027 && mkdir -p -- "$(dirname -- "$JT_CHECKPOINT_DIR")" && '  # group-readable
                        '{ [ -d "$JT_CHECKPOINT_DIR" ] || mkdir -m 2750 -- "$JT_CHECKPOINT_DIR"; })')
    assert lines.index(export) < mkdir < next(i for i, ln in enumerate(lines) if ln.startswith("srun"))
    assert jobdir.default_checkpoint_dir("/home/a/jt/ft-20261202-1-abc", "ft", "42") == \
        "/home/a/jt/ft/42/checkpoints"


@pytest.mark.parametrize(("given", "word"), [
    ("/scratch/ckpt/run1", "/scratch/ckpt/run1"),
    ("/scratch/ckpt/run1/", "/scratch/ckpt/run1"),
    ("~/ckpt/run1", '"$HOME"/ckpt/run1'),
])
def test_checkpoint_dir_override(given: str, word: str) -> None:
    lines = checkpoint_lines(JobSpec(script="x", checkpoint_dir=given))
    assert lines[0] == f"export JT_CHECKPOINT_DIR={word}"


@pytest.mark.parametrize("bad", ["relative/dir", "/a b", "/a/../b", "/a;rm -rf ~", "$HOME/x", "~root/x",
                                 "/a\nb", "/a/\n", "", "/a'b", "/a`id`"])
def test_checkpoint_dir_refused_naming_the_option(bad: str) -> None:
    with pytest.raises(SpecError) as err:
        render_sbatch(JobSpec(script="x", checkpoint_dir=bad))
    assert err.value.field == "checkpoint_dir"
    assert "absolute path or ~/path" in err.value.problem


# --- the listing ------------------------------------------------------------------------------


def test_newest_entry_skips_hidden_partial_and_takes_the_greater_name_on_a_tie() -> None:
    entries = [(10.0, "f", "ckpt-000050.pt"), (20.0, "f", "ckpt-000100.pt"), (20.0, "f", "ckpt-000090.pt"),
               (30.0, "f", ".ckpt-000110.pt"), (31.0, "f", "ckpt-000120.pt.tmp"), (32.0, "p", "fifo"),
               (25.0, "d", "")]
    assert jobdir.newest_entry(entries) == "ckpt-000100.pt"
    assert jobdir.newest_entry([(5.0, "d", "checkpoint-500")]) == "checkpoint-500"
    assert jobdir.newest_entry([]) is None


def test_a_symlink_is_never_the_newest_checkpoint() -> None:
    """Issue 26 §3: a link's own mtime would pick it (``latest -> /elsewhere``) over the real
    newest checkpoint, and the uploader would follow it out of the checkpoint directory."""
    entries = [(10.0, "d", "ckpt-000100"), (99.0, "l", "latest"), (98.0, "l", "ckpt-zzz")]
    assert jobdir.newest_entry(entries) == "ckpt-000100"
    assert jobdir.newest_entry([(99.0, "l", "latest")]) is None


def test_status_output_splits_into_scheduler_output_and_listing() -> None:
    out = ("42|RUNNING|None\n43|COMPLETED|None\n\n" + jobdir.LISTING_MARKER + "\n"
           "@@ 0 /home/a/jt/ft/42/checkpoints\n"
           "1700000000.5 f ckpt-000001.pt\n1700000100.25 f ckpt-000002.pt\n"
           "@@ 1 /home/a/jt/other/43/checkpoints\n")
    sched, listing = jobdir.split_listing(out)
    assert sched.strip().splitlines() == ["42|RUNNING|None", "43|COMPLETED|None"]
    assert jobdir.parse_listing(listing) == {
        0: ("/home/a/jt/ft/42/checkpoints", "ckpt-000002.pt"),
        1: ("/home/a/jt/other/43/checkpoints", None),
    }
    assert jobdir.split_listing("just squeue\n") == ("just squeue\n", "")


def test_listing_command_keeps_the_status_argv_after_the_dirs() -> None:
    argv = with_checkpoints(["squeue", "-j", "42"], ["~/jt/ft/42/checkpoints"])
    assert argv[0] == "bash" and argv[argv.index("jt-status"):] == [
        "jt-status", "1", "~/jt/ft/42/checkpoints", "squeue", "-j", "42"]
    assert with_checkpoints(["squeue"], []) == ["squeue"]


def test_fuzz_listing_parsers_never_raise() -> None:
    rng = random.Random(1010)
    pieces = ["@@ ", "@@jt-checkpoints", "\n", " ", "0", "1", "f", "d", "l", "nan", "inf", "-", ".", "/x",
              "ckpt.pt", "é", "\x00", "@@ 1", "1e9", "1700000000.5"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 30)))
        sched, listing = jobdir.split_listing(text)
        assert isinstance(sched, str)
        parsed = jobdir.parse_listing(listing)
        for index, (directory, newest) in parsed.items():
            assert index >= 0 and directory
            assert newest is None or (newest and not newest.startswith(".") and "/" not in newest)


# --- the registry's detail and the refusals ----------------------------------------------------


def test_detail_round_trip_and_garbage() -> None:
    text = handoff.encode_detail("/d", "/d/c.pt")
    assert handoff.decode_detail(text) == ("/d", "/d/c.pt")
    assert handoff.decode_detail(handoff.encode_detail("/d", None)) == ("/d", None)
    for junk in (None, "", "2/2", "[1]", '{"checkpoint_dir": 3}', "{"):
        assert handoff.decode_detail(junk)[1] is None


def test_checkpoint_of_a_completed_job() -> None:
    ckpt = handoff.checkpoint_of(record(detail=handoff.encode_detail(CKPT.directory, CKPT.path)))
    assert ckpt == CKPT
    assert ckpt.source == "box/42 (ft)"


@pytest.mark.parametrize(("rec", "words"), [
    (record(state="RUNNING", detail=handoff.encode_detail("/d", None)),
     ["job 42 (ft)", "RUNNING, not COMPLETED"]),
    (record(state="FAILED", detail=handoff.encode_detail("/d", "/d/c.pt")),
     ["job 42 (ft)", "FAILED, not COMPLETED"]),
    (record(detail=handoff.encode_detail("/d/ckpts", None)),
     ["job 42 (ft)", "left no checkpoint in /d/ckpts", "$JT_CHECKPOINT_DIR"]),
    (record(detail=None), ["job 42 (ft)", "no checkpoint directory on record"]),
    (record(detail=handoff.encode_detail("/d", "/d/c k.pt")), ["job 42 (ft)", "unsafe"]),
    (record(detail=handoff.encode_detail("/d", "/d/c.pt\n")), ["job 42 (ft)", "unsafe"]),
    (record(kind="service", job_id="svc", name="svc"), ["'svc' is a service, not a training job"]),
])
def test_checkpoint_of_refuses_in_one_line_naming_the_job(rec: JobRecord, words: list[str]) -> None:
    with pytest.raises(HandoffError) as err:
        handoff.checkpoint_of(rec)
    message = str(err.value)
    assert "\n" not in message and message.startswith("--model-from")
    for word in words:
        assert word in message


def test_find_job_by_id_name_variable_and_unknown(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r.sqlite")
    old = record(job_id="41", submitted_at=1.0)
    new = record(job_id="42", submitted_at=2.0)
    svc = record(job_id="web", name="web", kind="service", tier="kubernetes", profile="serving")
    for r in (old, new, svc):
        reg.add(r)

    class Handle:
        def __init__(self, rec: JobRecord) -> None:
            self.record = rec

    assert handoff.find_job("41", reg).job_id == "41"
    assert handoff.find_job("box/41", reg).job_id == "41"
    assert handoff.find_job("ft", reg).job_id == "42"  # the newest of that name
    assert handoff.find_job("job", reg, {"job": Handle(old)}).job_id == "41"
    assert handoff.find_job("web", reg).kind == "service"  # checkpoint_of then refuses it
    with pytest.raises(HandoffError, match=r"^--model-from nope: no such job in the registry"):
        handoff.find_job("nope", reg, {"nope": 3})


def test_resolve_asks_the_tier_once_when_the_record_is_not_final(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r.sqlite")
    reg.add(record(state="RUNNING", detail=handoff.encode_detail(CKPT.directory, None)))
    asked = []

    def refresh(rec: JobRecord) -> None:
        asked.append(rec.key)
        reg.update(rec.key, state="COMPLETED", detail=handoff.encode_detail(CKPT.directory, CKPT.path))

    assert handoff.resolve("42", reg, refresh=refresh) == CKPT
    assert asked == ["box/42"]


# --- path maps --------------------------------------------------------------------------------


def test_map_path_takes_the_longest_prefix_on_a_boundary() -> None:
    pairs = handoff.parse_path_map({"/scratch": "/s", "/scratch/ckpt": "/", "/scratch/ckpt2": "/two"})
    assert handoff.map_path("/scratch/ckpt/ft/1/c.pt", pairs) == "/ft/1/c.pt"
    assert handoff.map_path("/scratch/ckpt2/c.pt", pairs) == "/two/c.pt"
    assert handoff.map_path("/scratch/other", pairs) == "/s/other"
    assert handoff.map_path("/scratchy/c.pt", pairs) is None
    assert handoff.map_path("/x/c.pt", handoff.parse_path_map({"/": "/root"})) == "/root/x/c.pt"


@pytest.mark.parametrize("bad", [None, {}, [], {"rel": "/x"}, {"/x": "rel"}, {"/x": 3}, {"/a/../b": "/"},
                                 {"/a b": "/"}])
def test_parse_path_map_refuses(bad: object) -> None:
    with pytest.raises(ValueError):
        handoff.parse_path_map(bad)


def serving(**settings: object) -> Profile:
    return Profile(name="serving", tier="kubernetes", settings=settings)


def test_volume_model_path_through_path_map_and_sub_path() -> None:
    volume = {"host_path": "/srv/ckpt", "path_map": {"/scratch/ckpt": "/"}}
    assert handoff.serving_model_path(CKPT, serving(model_volume=volume)) == \
        "/models/ft/42/checkpoints/ckpt-000100.pt"
    pvc = {"pvc": "models", "sub_path": "runs", "path_map": {"/scratch/ckpt": "/runs"}}
    assert handoff.serving_model_path(CKPT, serving(model_volume=pvc)) == \
        "/models/ft/42/checkpoints/ckpt-000100.pt"


@pytest.mark.parametrize(("settings", "words"), [
    ({}, ["profile 'serving' has no model_volume", CKPT.path]),
    ({"model_volume": {"pvc": "m"}}, ["model_volume has no path_map", CKPT.path]),
    ({"model_volume": {"pvc": "m", "path_map": {"/data": "/"}}},
     ["covers /data, not " + CKPT.path, "share no storage"]),
    ({"model_volume": {"pvc": "m", "path_map": {"/scratch": "/other"}, "sub_path": "runs"}},
     ["outside its sub_path 'runs'"]),
    ({"model_volume": {"pvc": "m", "path_map": "nope"}}, ["model_volume.path_map: expected a mapping"]),
])
def test_volume_refusals_name_the_job_and_what_is_missing(settings: dict, words: list[str]) -> None:
    with pytest.raises(HandoffError) as err:
        handoff.serving_model_path(CKPT, serving(**settings))
    message = str(err.value)
    assert "\n" not in message and "job 42 (ft)" in message
    for word in words:
        assert word in message


def test_local_serving_path() -> None:
    local_ckpt = Checkpoint("local/3", "3", "ft", "local", "local", "/home/a/ft/3/checkpoints",
                            "/home/a/ft/3/checkpoints/c.pt")
    here = Profile(name="local", tier="local")
    assert handoff.serving_model_path(local_ckpt, here) == local_ckpt.path
    with pytest.raises(HandoffError, match="ran on slurm profile 'box'; profile 'local' has no path_map"):
        handoff.serving_model_path(CKPT, here)
    mounted = Profile(name="local", tier="local", settings={"path_map": {"/scratch": "/mnt/scratch"}})
    assert handoff.serving_model_path(CKPT, mounted) == "/mnt/scratch/ckpt/ft/42/checkpoints/ckpt-000100.pt"


def test_substitute_model_path_leaves_other_braces() -> None:
    body = 'path = "{model_path}"\nd = {"a": 1}\nprint(f"{d}")\n'
    assert handoff.substitute_model_path(body, "/models/c.pt") == \
        'path = "/models/c.pt"\nd = {"a": 1}\nprint(f"{d}")\n'


def test_fuzz_path_maps_never_raise_anything_but_value_error() -> None:
    rng = random.Random(77)
    alphabet = "/" * 6 + "." * 3 + string.ascii_lowercase[:4] + " ~é"
    for _ in range(3000):
        mapping = {"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))):
                   "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
                   for _ in range(rng.randrange(0, 3))}
        try:
            pairs = handoff.parse_path_map(mapping)
        except ValueError:
            continue
        path = "/" + "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 20)))
        mapped = handoff.map_path(path, pairs)
        assert mapped is None or mapped.startswith("/")


# --- path_map in a profile file ---------------------------------------------------------------


@pytest.mark.parametrize(("text", "error"), [
    ("s: {tier: kubernetes, model_volume: {host_path: /x, path_map: {/scratch/ckpt: /}}}", None),
    ("l: {tier: local, path_map: {/scratch: /mnt/scratch}}", None),
    ("s: {tier: kubernetes, model_volume: {host_path: /x, path_map: {scratch: /}}}",
     "profiles.s.model_volume.path_map: 'scratch' is not an absolute path"),
    ("l: {tier: local, path_map: [1]}", "profiles.l.path_map: expected a mapping"),
    ("b: {tier: slurm, host: h, path_map: {/a: /b}}", "profiles.b.path_map: unknown key"),
])
def test_path_map_in_a_profile_file(tmp_path: Path, text: str, error: str | None) -> None:
    from jupyter_tiers.config.profiles import load_file
    from jupyter_tiers.core.errors import ConfigError

    path = tmp_path / "tiers.yaml"
    path.write_text("profiles:\n  " + text + "\n")
    if error is None:
        assert load_file(path)["profiles"]
        return
    with pytest.raises(ConfigError) as err:
        load_file(path)
    assert str(err.value).startswith(f"{path}: {error}")


# --- what the views show ----------------------------------------------------------------------


def test_job_view_traits_and_summary_carry_the_checkpoint() -> None:
    from jupyter_tiers.app.viewstate.job import status_traits
    from jupyter_tiers.batch.status import merge_status, summary_line
    from jupyter_tiers.core.model import JobState, JobStatus, SchedulerInfo

    sched = SchedulerInfo("42", JobState.COMPLETED, nodelist="node[1-2]", elapsed_s=42, checkpoint=CKPT.path)
    status = merge_status("42", sched, {}, 0)
    assert status_traits(status)["checkpoint"] == CKPT.path
    assert summary_line(status) == f"job 42 COMPLETED in 00:00:42 on node[1-2] — checkpoint {CKPT.path}"
    # a later poll without a listing keeps what was seen
    again = merge_status("42", SchedulerInfo("42", JobState.COMPLETED), {}, 0, status)
    assert again.checkpoint == CKPT.path
    assert status_traits(JobStatus("1", JobState.RUNNING))["checkpoint"] == ""


def test_service_views_name_the_model_source() -> None:
    from jupyter_tiers.app.viewstate.serve import model_note

    assert model_note({"model_source": "box/42 (ft)"}) == "model from box/42 (ft)"
    assert model_note({}) == model_note(None) == model_note({"model_source": 3}) == ""


# --- the remote listing program, run with local bash -------------------------------------------


def test_listing_program_keeps_the_status_output_and_exit_code(tmp_path: Path) -> None:
    import os
    import subprocess

    ckpts = tmp_path / "ft" / "42" / "checkpoints"
    ckpts.mkdir(parents=True)
    for i, name in enumerate(("ckpt-000050.pt", "ckpt-000100.pt", "ckpt-000150.pt.tmp", ".hidden")):
        (ckpts / name).write_text("x")
        os.utime(ckpts / name, (1_700_000_000 + i, 1_700_000_000 + i))
    (tmp_path / "home" / "mine").mkdir(parents=True)
    (tmp_path / "home" / "mine" / "step 1.pt").write_text("x")  # a name with a space
    status = ["sh", "-c", "printf '42|RUNNING\\n'; echo oops >&2; exit 3"]
    argv = with_checkpoints(status, [str(ckpts), str(tmp_path / "missing"), "~/mine"])
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3 and done.stderr == "oops\n"
    sched, listing = jobdir.split_listing(done.stdout)
    assert sched.strip() == "42|RUNNING"
    assert jobdir.parse_listing(listing) == {
        0: (str(ckpts), "ckpt-000100.pt"),
        1: (str(tmp_path / "missing"), None),
        2: (str(tmp_path / "home" / "mine"), "step 1.pt"),
    }


def test_the_mount_point_is_the_renderers() -> None:
    from jupyter_tiers.k8s import render

    assert handoff.MODEL_DIR == render.MODEL_DIR


def test_fuzz_model_from_references_only_refuse_in_one_line(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r.sqlite")
    reg.add(record(detail=handoff.encode_detail(CKPT.directory, CKPT.path)))
    reg.add(record(job_id="7", name="run", state="FAILED"))
    rng = random.Random(4242)
    pieces = ["42", "7", "box/", "ft", "run", "/", "..", " ", "'", "%", "_", "\ud800", "é", "0", "-", "*"]
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(2000):
        ref = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 5)))
        try:
            ckpt = handoff.resolve(ref, reg, {"ft": object()})
        except HandoffError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("--model-from")
            str(exc).encode("utf-8")  # printable
            outcomes["refused"] += 1
        else:
            assert ckpt == CKPT
            outcomes["ok"] += 1
    assert outcomes["ok"] > 10 and outcomes["refused"] > 100, outcomes
