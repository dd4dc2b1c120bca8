"""Every Slurm parser we have, fed the outputs recorded from two real Slurm releases for the same
jobs: Debian's 22.05.8 (the test cluster's) and SchedMD's 25.05.8 (tests/unit/snapshots/slurm/
golden, copied verbatim from shared/facts/slurm-golden; its README lists what differs). Each test
runs on both versions and asserts the same states, reasons and ids per job."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from jupyter_tiers.batch.failstop import Failure, fold_text, is_failstop_line, is_stop_report
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.doctor import slurm_parse as doctor
from jupyter_tiers.slurm import commands
from jupyter_tiers.slurm.history import parse_history
from jupyter_tiers.slurm.parse import (
    parse_failed_nodes,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_jobs,
    parse_squeue,
    slurm_state,
)
from jupyter_tiers.slurm.tier import SlurmTier
from jupyter_tiers.transport.exchange import CommandResult

GOLDEN = Path(__file__).parent / "snapshots" / "slurm" / "golden"
VERSIONS = ["slurm-22.05", "slurm-25.05"]


@dataclass(frozen=True)
class Section:
    command: str
    stdout: str
    stderr: str
    rc: int | None


def sections(version: str, name: str) -> list[Section]:
    """A transcript's ``$ COMMAND`` sections: stdout, ``--- stderr:``, ``--- rc=N``."""
    out: list[Section] = []
    command, parts, where = None, {"stdout": [], "stderr": []}, "stdout"
    rc: int | None = None

    def close() -> None:
        if command is not None:
            out.append(Section(command, "".join(parts["stdout"]), "".join(parts["stderr"]), rc))

    for line in (GOLDEN / version / name).read_text().splitlines(keepends=True):
        if line.startswith("$ "):
            close()
            command, parts, where, rc = line[2:].strip(), {"stdout": [], "stderr": []}, "stdout", None
        elif line.startswith("--- stderr:"):
            where = "stderr"
        elif line.startswith("--- rc="):
            rc = int(line.strip()[len("--- rc="):])
        else:
            parts[where].append(line)
    close()
    return out


def ids(version: str) -> dict[str, str]:
    pairs = (ln.split("=", 1) for ln in (GOLDEN / version / "ids.env").read_text().split())
    return {k: v for k, v in pairs}


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_squeue_states_reasons_and_task_ids(version: str) -> None:
    j = ids(version)
    (sq,) = sections(version, "squeue.txt")
    got = parse_squeue(sq.stdout)
    want = {
        j["RUN"]: (JobState.RUNNING, None), j["HELD"]: (JobState.PENDING, "JobHeldUser"),
        j["DONE"]: (JobState.COMPLETED, None), j["FAIL"]: (JobState.FAILED, "NonZeroExitCode"),
        j["CANC"]: (JobState.CANCELLED, None), j["TOUT"]: (JobState.TIMEOUT, "TimeLimit"),
        j["RQ"]: (JobState.PENDING, "BeginTime"),
        f"{j['ARR']}_2": (JobState.FAILED, "NonZeroExitCode"), f"{j['ARR']}_3": (JobState.COMPLETED, None),
        f"{j['ARRP']}_0": (JobState.RUNNING, None),
        f"{j['ARRP']}_5": (JobState.PENDING, "JobArrayTaskLimit"),
    }
    assert {k: (got[k].state, got[k].reason) for k in want} == want
    assert len(got) == 17  # every row, none dropped
    assert got[j["RUN"]].nodelist == "node[1-2]" and got[j["HELD"]].start_time is None
    assert got[j["RUN"]].start_time and got[j["RUN"]].start_time.startswith("2026-12-04T")


def test_sacct_states_exit_codes_and_raw_ids(version: str) -> None:
    j = ids(version)
    plain, arrays = sections(version, "sacct.txt")
    got = parse_sacct(plain.stdout)
    assert got[j["CANC"]].state is JobState.CANCELLED  # "CANCELLED by 0"
    assert (got[j["FAIL"]].state, got[j["FAIL"]].exit_code) == (JobState.FAILED, 3)
    assert got[j["TOUT"]].state is JobState.TIMEOUT and got[j["HELD"]].nodelist is None
    assert got[j["DONE"]].end_time and got[j["DONE"]].end_time.startswith("2026-12-04T")
    # The pending job's reason: 22.05 names it, 25.05 says None (squeue still names it: below)
    held = got[j["HELD"]]
    assert held.state is JobState.PENDING
    assert held.reason == ("JobHeldUser" if version == "slurm-22.05" else None)
    # JobIDRaw: array tasks by their own numbers; the last task keeps the array's
    arr = parse_sacct(arrays.stdout)
    assert arr[j["ARR"]].state is JobState.COMPLETED and len(arr) == 7
    assert [i.state for i in arr.values()].count(JobState.FAILED) == 1
    (tasks,) = sections(version, "sacct-tasks.txt")
    by_task = parse_sacct(tasks.stdout)
    assert (by_task[f"{j['ARR']}_2"].state, by_task[f"{j['ARR']}_2"].exit_code) == (JobState.FAILED, 3)
    assert by_task[f"{j['ARRP']}_1"].state is JobState.RUNNING and len(by_task) == 6


class _Replay:
    """A transport answering the tier's commands with a transcript's outputs, by command name."""

    def __init__(self, answers: dict[str, Section]) -> None:
        self.answers, self.ran = answers, []  # type: list[str]

    def run(self, argv, stdin=b"", check=True, timeout=None):  # type: ignore[no-untyped-def]  # a fake
        inner = commands.unwrap_slurm(argv)
        if argv[:4] == commands.BASH and argv[4] == commands.WITH_CHECKPOINTS_SH:
            inner = commands.unwrap_slurm(argv[7 + int(argv[6]):])
        self.ran.append(inner[0])
        s = self.answers[inner[0]]
        return CommandResult(tuple(argv), s.rc or 0, s.stdout.encode(), s.stderr.encode())

    def close(self) -> None:
        pass


def test_a_pending_jobs_reason_comes_from_squeue_on_both_versions(version: str, tmp_path: Path) -> None:
    """The poll path: squeue answers for every job it still has, so a held job reads JobHeldUser
    on 25.05 too, where sacct would say None; sacct only for the job squeue has forgotten."""
    j = ids(version)
    (sq,) = sections(version, "squeue.txt")
    plain, _ = sections(version, "sacct.txt")
    forgotten = Section(sq.command, "".join(ln for ln in sq.stdout.splitlines(keepends=True)
                                            if not ln.startswith(j["DONE"] + "|")), "", 0)
    transport = _Replay({"squeue": forgotten, "sacct": plain})
    profile = Profile(name="box", tier="slurm", settings={"host": "h", "workdir": "~/jt"})
    tier = SlurmTier(profile, Registry(tmp_path / "r.sqlite"), transport=transport)  # type: ignore[arg-type]  # a fake
    records = [JobRecord(profile="box", tier="slurm", job_id=j[k], name=k.lower(), state="PENDING",
                         submitted_at=0.0, updated_at=0.0, world_size=1) for k in ("HELD", "RQ", "DONE")]
    found = tier.poll_scheduler(records)
    assert (found[j["HELD"]].state, found[j["HELD"]].reason) == (JobState.PENDING, "JobHeldUser")
    assert (found[j["RQ"]].state, found[j["RQ"]].reason) == (JobState.PENDING, "BeginTime")
    assert found[j["DONE"]].state is JobState.COMPLETED  # from accounting
    assert transport.ran == ["squeue", "sacct"]


def test_scontrol_show_job_states_and_array_task_names(version: str) -> None:
    j = ids(version)
    (every,) = sections(version, "scontrol-show-job-all.txt")
    got = parse_scontrol_jobs(every.stdout)
    assert got[j["RUN"]].state is JobState.RUNNING and got[j["RUN"]].nodelist == "node[1-2]"
    assert (got[j["HELD"]].state, got[j["HELD"]].reason) == (JobState.PENDING, "JobHeldUser")
    assert (got[j["FAIL"]].state, got[j["FAIL"]].exit_code) == (JobState.FAILED, 3)
    assert got[j["CANC"]].state is JobState.CANCELLED and got[j["TOUT"]].state is JobState.TIMEOUT
    assert got[f"{j['ARR']}_2"].state is JobState.FAILED and got[f"{j['ARRP']}_0"].state is JobState.RUNNING
    for one in sections(version, "scontrol-show-job.txt"):  # "show job N": that job (an array: its tasks)
        asked = one.command.split()[-1]
        alone = parse_scontrol_jobs(one.stdout)
        assert alone and (asked in alone or all(k.startswith(asked + "_") for k in alone)), one.command
        assert all(got[k].state is v.state for k, v in alone.items())


def test_sinfo_names_the_drained_node(version: str) -> None:
    busy, *drained = sections(version, "sinfo-nodes.txt")  # 22.05's capture has no drained node
    assert parse_failed_nodes(busy.stdout) == {}
    for s in drained:
        assert parse_failed_nodes(s.stdout) == {"node4": "drained: golden drain test"}


def test_sbatch_answers_are_the_recorded_ids(version: str) -> None:
    got = [parse_sbatch_parsable(s.stdout) for s in sections(version, "sbatch-parsable.txt")]
    j = ids(version)
    assert got == [j[k] for k in ("RUN", "HELD", "DONE", "FAIL", "CANC", "TOUT", "RQ", "ARR", "ARRP")]


def test_scancel_answers_are_no_refusals(version: str) -> None:
    for s in sections(version, "scancel.txt"):  # cancelled, ended, unknown: nothing to refuse
        assert commands.scancel_refusal(s.rc or 0, s.stderr) is None, s.command


def test_history_rows(version: str) -> None:
    j = ids(version)
    failed, nobody = sections(version, "sacct-history-range.txt")  # -s FAILED,TIMEOUT,CANCELLED
    rows = {r.job_id: r for r in parse_history(failed.stdout)}
    assert rows[j["CANC"]].state == "CANCELLED" and rows[j["TOUT"]].state == "TIMEOUT"
    assert (rows[j["FAIL"]].state, rows[j["FAIL"]].exit_code) == ("FAILED", 3)
    assert {r.state for r in rows.values()} <= {"FAILED", "TIMEOUT", "CANCELLED"}
    assert j["RUN"] not in rows and parse_history(nobody.stdout) == []
    job, *others = sections(version, "sacct-history-job.txt")  # "-j RUN" first
    (run,) = parse_history(job.stdout)
    assert run.job_id == j["RUN"] and run.state == "RUNNING" and run.workdir == "/home/alice/jt-golden"
    assert run.nodes == 2
    for s in others:  # a job asked for is one row whatever its steps; an array, one per task
        asked = s.command.split(" -j ")[1].split()[0]
        got = parse_history(s.stdout)
        assert got and all(r.display_id == asked or r.display_id.startswith(asked + "_") for r in got)
        if asked == j["ARR"]:
            assert {r.display_id: r.state for r in got} == {
                f"{asked}_{i}": "FAILED" if i == 2 else "COMPLETED" for i in range(4)}


def test_failstop_folds_slurmstepds_line_on_both_versions(version: str) -> None:
    (log,) = sections(version, "failstop-log.txt")
    lines = [ln for ln in log.stdout.splitlines() if not ln.startswith("srun-rc=")]
    node = lines[0].split(": ")[2]  # "srun: error: node3: task 1: Exited with exit code 3"
    fold = fold_text("\n".join(lines) + "\n", Failure(1, node))
    assert fold.lines == [1, 2, 3, 4, 5]  # all but the failing rank's own report
    step = next(ln for ln in lines if "*** STEP" in ln)
    assert is_stop_report(step) and is_failstop_line(step, Failure(1, node))
    # a time limit is not the fail-stop's: shown, never folded
    (tout,) = sections(version, "timeout-log.txt")
    assert not is_stop_report(tout.stdout.strip())
    assert not is_failstop_line(tout.stdout.strip(), Failure(1, node))


def test_steps_cancelled_for_other_causes_stay_shown() -> None:
    for tail in ("DUE TO TIME LIMIT", "DUE TO JOB REQUEUE", "DUE TO PREEMPTION"):
        line = (f"[2026-12-04T17:46:35.153] error: *** STEP 32.0 ON node3 CANCELLED AT "
                f"2026-12-04T17:46:35 {tail} ***")
        assert not is_failstop_line(line, Failure(1, "node3")) and not is_stop_report(line)


def test_doctor_reads_both_versions(version: str) -> None:
    versions = {doctor.slurm_version(s.stdout) for s in sections(version, "doctor-version.txt")}
    assert versions == {version.removeprefix("slurm-") + ".8"}
    (config,) = sections(version, "doctor-config.txt")
    conf = doctor.parse_config(config.stdout.splitlines())
    assert conf["SLURM_VERSION"] == version.removeprefix("slurm-") + ".8"
    (part,) = sections(version, "doctor-partition.txt")
    (p,) = doctor.parse_partitions(part.stdout.splitlines())
    assert p.default and p.state == "UP" and p.name == ("debug" if version == "slurm-22.05" else "batch")
    (nodes,) = sections(version, "doctor-nodes.txt")
    (kind,) = doctor.parse_nodes(nodes.stdout.splitlines())
    assert kind.memory_mb == "2000" and kind.gres == ""
    (test_only,) = sections(version, "lab-test-only.txt")
    got = doctor.parse_test_only(test_only.stderr)
    assert got is not None and got.processors == 1 and got.partition == p.name
    assert got.start.startswith("2026-12-04T")


def test_newer_and_unknown_states_are_shown_as_themselves() -> None:
    rows = ("1|RESV_DEL_HOLD|ResvDeleted|N/A|0:00||a|1\n2|EXPEDITING|None|N/A|0:00||a|1\n"
            "3|SOMETHING_NEW|None|N/A|0:00||a|1\n4|STOPPED|None|N/A|0:10|n1|a|1\n"
            "5+0|RUNNING|None|N/A|0:10|n1|a|1\n5+1|RUNNING|None|N/A|0:10|n2|a|1\n")
    got = parse_squeue(rows)
    assert (got["1"].state, got["1"].reason) == (JobState.PENDING, "RESV_DEL_HOLD: ResvDeleted")
    assert (got["2"].state, got["2"].reason) == (JobState.REQUEUED, "EXPEDITING")
    assert (got["3"].state, got["3"].reason) == (JobState.UNKNOWN, "SOMETHING_NEW")
    assert got["3"].state is not JobState.RUNNING and not got["3"].state.terminal
    assert (got["4"].state, got["4"].reason) == (JobState.SUSPENDED, "STOPPED")
    assert got["5"].state is JobState.RUNNING and got["5"].nodelist == "n1"  # the het leader
    acct = parse_sacct("7|CANCELLED by 1000|0:15|00:00:03|n1|None|x|y|a\n"
                       "8|RD|0:0|0|None assigned|None|x|y|a\n")
    assert (acct["7"].state, acct["7"].reason, acct["7"].exit_signal) == (JobState.CANCELLED, None, 15)
    assert (acct["8"].state, acct["8"].reason) == (JobState.PENDING, "RESV_DEL_HOLD")
    sep = "|#|"
    hist = parse_history(sep.join(["9", "9", "REVOKED", "0:0", "00:00:01", "1", "n1", "", "u", "s", "s",
                                   "e", "p", "/w", "n"]) + "\n")
    assert hist[0].state == "REVOKED"


def test_fuzz_state_and_sbatch_parsers_never_raise() -> None:
    rng = random.Random(2505)
    words = ["RUNNING", "CANCELLED", " by ", "1000", "+", "RD", "EXPEDITING", "\x00", "ü", "|", ";",
             "Submitted batch job ", " on cluster ", "ceo", "12", "\n", " ", "-", "PD"]
    for _ in range(3000):
        text = "".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
        state, word = slurm_state(text)
        assert isinstance(state, JobState)
        assert word is None or (word and all(c.isalnum() or c in "_?" for c in word) and len(word) <= 40)
        try:
            job = parse_sbatch_parsable(text)
        except Exception as exc:  # only our one clear error
            assert type(exc).__name__ == "SubmitError", exc
        else:
            assert job.isdigit() and job in text
        parse_squeue(text.replace(";", "|"))
        parse_sacct(text.replace(";", "|"))


def test_task_listing_program_maps_both_versions_raw_ids(version: str, tmp_path: Path) -> None:
    """The real bash program of slurm/task_listing.py with sacct and squeue replaying the golden
    outputs, under a login environment that would hide every row from a plain squeue/sacct."""
    import os
    import shlex
    import subprocess

    from jupyter_tiers.slurm.task_listing import parse_task_checkpoints, task_checkpoints_argv

    j = ids(version)
    arr = j["ARR"]
    (acct, _) = sections(version, "sacct-array-raw.txt")
    (queue, _) = sections(version, "squeue-array-raw.txt")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, s in (("sacct", acct), ("squeue", queue)):
        # answers only in our neutral environment, as a real one hiding our rows would not
        (bin_dir / name).write_text(
            "#!/bin/sh\n"
            'if [ -n "${SQUEUE_USERS:-}${SACCT_FORMAT:-}" ] || [ "${SLURM_TIME_FORMAT:-}" != standard ]; '
            "then exit 0; fi\n"
            f"printf %s {shlex.quote(s.stdout)}\n")
        (bin_dir / name).chmod(0o755)
    raw = dict(line.split("|") for line in acct.stdout.split())
    root, jobdir = tmp_path / "sw", tmp_path / f"{arr}-sw"
    for task, raw_id in raw.items():
        (root / raw_id / "checkpoints").mkdir(parents=True)
        (root / raw_id / "checkpoints" / f"ckpt-{task}.pt").write_text("w")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SQUEUE_USERS": "nobody",
           "SACCT_FORMAT": "jobid", "SLURM_TIME_FORMAT": "relative"}
    out = subprocess.run(task_checkpoints_argv(arr, str(root), str(jobdir), 0), env=env,
                         capture_output=True, text=True, check=True, timeout=60).stdout
    listed, _ = parse_task_checkpoints(out)
    assert listed == {int(t.split("_")[1]): (f"{root}/{r}/checkpoints", f"ckpt-{t}.pt")
                      for t, r in raw.items()}
    assert len(listed) == 4 and listed[3][0] == f"{root}/{arr}/checkpoints"  # the last task keeps the id
