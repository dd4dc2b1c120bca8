"""Pure parts of ``--model-from`` for a sweep: the ``ID_i`` reference, a task's checkpoint and
every refusal, the choice of a whole array's best task, and the Slurm tasks' listing command and
its parser (run for real against stand-in sacct/squeue scripts: bash, find, tail and base64 are
the real ones). Seeded fuzz tests for both parsers."""

from __future__ import annotations

import os
import random
import re
import string
import subprocess
from pathlib import Path

import pytest

from jupyter_tiers.app.task_handoff import find_array_task
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.data import handoff
from jupyter_tiers.data.handoff import HandoffError, pick_best_task, split_task_ref, task_checkpoint
from jupyter_tiers.slurm.task_listing import parse_task_checkpoints, task_checkpoints_argv

SWEEP = {"sweep": "lr=1e-4,3e-4,1e-3", "array": None}


def array(**spec: object) -> JobRecord:
    return JobRecord(profile="box", tier="slurm", job_id="51", name="sw", state="RUNNING",
                     jobdir="/w/51-sw", spec={**SWEEP, **spec})


def listed(i: int, newest: str | None = "ckpt.pt") -> tuple[str, str | None]:
    return (f"/w/sw/{60 + i}/checkpoints", newest)


# --- the reference --------------------------------------------------------------------------------


@pytest.mark.parametrize(("ref", "expected"), [
    ("51_7", ("51", 7)), ("hpc/51_7", ("hpc/51", 7)), ("lr_sweep_12", ("lr_sweep", 12)),
    ("sw_0", ("sw", 0)), ("51_4000000", ("51", 4000000)),
    ("51", None), ("_7", None), ("51_", None), ("51_x", None), ("51_12345678", None),
    ("hpc/_3", None), ("51_٣", None), ("", None),
])
def test_split_task_ref(ref: str, expected: tuple[str, int] | None) -> None:
    assert split_task_ref(ref) == expected


def test_split_task_ref_fuzz() -> None:
    rng = random.Random(5151)
    alphabet = string.ascii_letters + string.digits + "_/-.٣ \n\x00é"
    for _ in range(5000):
        ref = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        m = re.fullmatch(r"(.+)_([0-9]{1,7})", ref, re.S)  # greedy: the last "_" splits
        expected = (m.group(1), int(m.group(2))) if m and not m.group(1).endswith("/") else None
        assert split_task_ref(ref) == expected, ref


# --- one task ---------------------------------------------------------------------------------


def test_a_completed_task_with_a_checkpoint() -> None:
    ckpt = task_checkpoint(array(), 2, "COMPLETED", listed(2))
    assert (ckpt.job_id, ckpt.job_key, ckpt.path) == ("51_2", "box/51_2", "/w/sw/62/checkpoints/ckpt.pt")
    assert ckpt.source == "box/51_2 (sw)"


@pytest.mark.parametrize(("index", "state", "got", "message"), [
    (1, "FAILED", listed(1), "--model-from: job 51_1 (sw) is FAILED, not COMPLETED; a model is served "
     "from a job that completed"),
    (1, None, None, "--model-from: job 51_1 (sw) is UNKNOWN, not COMPLETED; a model is served from a "
     "job that completed"),
    (1, "COMPLETED", listed(1, None), "--model-from: job 51_1 (sw) completed but left no checkpoint in "
     "/w/sw/61/checkpoints (save one under $JT_CHECKPOINT_DIR)"),
    (1, "COMPLETED", None, "--model-from: job 51_1 (sw) completed, but the scheduler no longer says "
     "which job id it ran as, so its checkpoint directory ({workdir}/NAME/JOB_ID/checkpoints) is unknown"),
    (9, "COMPLETED", listed(9), "--model-from 51_9: array 51 (sw) has no task 9; its tasks: 0-2"),
    (0, "COMPLETED", listed(0, "bad name.pt"), "--model-from: job 51_0 (sw): the checkpoint path "
     "'/w/sw/60/checkpoints/bad name.pt' has characters that are unsafe in a shell or a string "
     "literal; use letters, digits and _ . / + @ = , : -"),
])
def test_every_task_refusal_is_one_line(index: int, state: str | None, got: tuple[str, str | None] | None,
                                        message: str) -> None:
    with pytest.raises(HandoffError) as err:
        task_checkpoint(array(), index, state, got)
    assert str(err.value) == message


def test_a_shared_checkpoint_dir_is_refused_for_a_task_and_the_array() -> None:
    shared = array(checkpoint_dir="/data/ckpt")
    with pytest.raises(HandoffError, match=r"^--model-from: job 51_0 \(sw\): its array was submitted "
                       r"with --checkpoint-dir /data/ckpt, which every task shares"):
        task_checkpoint(shared, 0, "COMPLETED", listed(0))
    with pytest.raises(HandoffError, match="which every task shares"):
        pick_best_task(shared, {0: "COMPLETED"}, {0: listed(0)}, {0: ("loss", 0.1)})


# --- the whole array --------------------------------------------------------------------------


def test_best_task_among_completed_tasks_with_a_checkpoint() -> None:
    states = {0: "COMPLETED", 1: "COMPLETED", 2: "FAILED"}
    lists = {0: listed(0), 1: listed(1), 2: listed(2)}
    metrics = {0: ("loss", 0.5), 1: ("loss", 0.0123), 2: ("loss", 0.001)}  # 2 failed: not eligible
    best = pick_best_task(array(), states, lists, metrics)
    assert (best.index, best.checkpoint.path) == (1, "/w/sw/61/checkpoints/ckpt.pt")
    assert best.line == "model from array 51 task 1 (best loss 0.0123 at lr=3e-4)"
    # without its checkpoint task 1 no longer qualifies: task 0 is the best left
    best = pick_best_task(array(), states, {**lists, 1: listed(1, None)}, metrics)
    assert best.line == "model from array 51 task 0 (best loss 0.5 at lr=1e-4)"
    # accuracies: the highest wins; a plain array says no parameters
    plain = JobRecord(profile="box", tier="slurm", job_id="8", name="arr", jobdir="/w/8-arr",
                      spec={"array": "0-2"})
    best = pick_best_task(plain, states, lists, {0: ("acc", 0.7), 1: ("acc", 0.9)})
    assert best.line == "model from array 8 task 1 (best acc 0.9)"


@pytest.mark.parametrize(("states", "lists", "metrics", "message"), [
    ({0: "FAILED", 1: "RUNNING"}, {}, {}, "--model-from 51: array 51 (sw) has no COMPLETED task "
     "(1 FAILED, 1 RUNNING, 1 UNKNOWN); a model is served from a task that completed"),
    ({0: "COMPLETED", 1: "COMPLETED"}, {0: listed(0, None)}, {0: ("loss", 1.0)},
     "--model-from 51: array 51 (sw): none of its 2 COMPLETED tasks left a checkpoint (save one under "
     "$JT_CHECKPOINT_DIR)"),
    ({0: "COMPLETED", 1: "COMPLETED"}, {0: listed(0), 1: listed(1)}, {0: ("loss", float("nan"))},
     "--model-from 51: array 51 (sw): none of its 2 COMPLETED tasks with a checkpoint reported a metric "
     "to rank them by; name one task: --model-from 51_0"),
])
def test_every_array_refusal_is_one_line(states: dict, lists: dict, metrics: dict, message: str) -> None:
    with pytest.raises(HandoffError) as err:
        pick_best_task(array(), states, lists, metrics)
    assert str(err.value) == message


# --- finding the array in the registry -----------------------------------------------------------


def test_find_array_task_by_id_name_profile_and_handle(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "r.sqlite")
    registry.add(array())
    registry.add(JobRecord(profile="box", tier="slurm", job_id="70", name="run_3", jobdir="/w/70-run_3",
                           spec={}))

    class Handle:
        def __init__(self, record: JobRecord) -> None:
            self.record = record

    task_rec = JobRecord(profile="box", tier="slurm", job_id="51_2", name="sw", jobdir="/w/51-sw/tasks/2",
                         spec=SWEEP)
    ns = {"t": Handle(task_rec), "a": Handle(array())}
    for ref, index in (("51_1", 1), ("box/51_0", 0), ("sw_2", 2), ("t", 2), ("51", None), ("sw", None),
                       ("a", None)):
        found = find_array_task(ref, registry, ns)
        assert found is not None and (found[0].key, found[1]) == ("box/51", index), ref
    for ref in ("run_3", "70", "nope_1", "70_1"):  # a plain job (even one named like a task), unknown
        assert find_array_task(ref, registry, ns) is None, ref
    with pytest.raises(HandoffError, match="no such job"):
        handoff.find_job("nope_1", registry, ns)


# --- the Slurm command and its parser --------------------------------------------------------------


def test_argv_validates_its_words() -> None:
    argv = task_checkpoints_argv("51", "/w/sw", "/w/51-sw", 400)
    assert argv[-4:] == ["51", "/w/sw", "/w/51-sw", "400"]
    for bad in (("51_2", "/w/sw", "/w/x"), ("5;1", "/w/sw", "/w/x"), ("51", "w/sw", "/w/x"),
                ("51", "/w/s w", "/w/x"), ("51", "/w/../etc", "/w/x"), ("51", "/w/sw", "/w/$(x)")):
        with pytest.raises(Exception, match="not"):
            task_checkpoints_argv(*bad)


def test_the_command_maps_raw_ids_and_lists_in_one_run(tmp_path: Path) -> None:
    """Stand-in sacct/squeue print what Slurm 22.05 prints for an array (a pending range too);
    the rest is the real bash program."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text("#!/bin/sh\nprintf '51_0|58\\n51_1|51\\n51_[2-3]|51\\n'\n")
    (bin_dir / "squeue").write_text("#!/bin/sh\nprintf '51_0|58\\n61_5|70\\n'\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    root, jobdir = tmp_path / "sw", tmp_path / "51-sw"
    (root / "58" / "checkpoints").mkdir(parents=True)
    (root / "58" / "checkpoints" / "ckpt-1.pt").write_text("w")
    for i in range(3):
        (jobdir / "tasks" / str(i)).mkdir(parents=True)
    (jobdir / "tasks" / "0" / "job.log").write_text("0: loss=0.5\n0: naïve | @@ 9 /etc\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(task_checkpoints_argv("51", str(root), str(jobdir), 400), env=env,
                         capture_output=True, text=True, check=True).stdout
    got, tails = parse_task_checkpoints(out)
    assert got == {0: (f"{root}/58/checkpoints", "ckpt-1.pt"), 1: (f"{root}/51/checkpoints", None)}
    assert tails == {0: "0: loss=0.5\n0: naïve | @@ 9 /etc\n", 1: "", 2: ""}
    out = subprocess.run(task_checkpoints_argv("51", str(root), str(jobdir), 0), env=env,
                         capture_output=True, text=True, check=True).stdout
    assert parse_task_checkpoints(out) == (got, {})


def test_parse_task_checkpoints_fuzz() -> None:
    rng = random.Random(7_051)
    pieces = ["@@ 3 /w/sw/58/checkpoints", "@@ x /d", "%tail 3 ", "%tail 3 bG9zcz0xCg==", "%tail ٣ YQ==",
              "%tail 4 !!!", "1.5 f ckpt.pt", "nan f x", "1e308 d checkpoint-5", "", "\x00", "@@ ", "%tail"]
    for _ in range(3000):
        text = "\n".join(rng.choice(pieces) + "".join(rng.choice(string.printable) for _ in range(
            rng.randint(0, 3) if rng.random() < 0.3 else 0)) for _ in range(rng.randint(0, 12)))
        got, tails = parse_task_checkpoints(text)
        assert all(isinstance(i, int) and isinstance(d, str) for i, (d, _) in got.items())
        assert all(isinstance(i, int) and isinstance(t, str) for i, t in tails.items())
