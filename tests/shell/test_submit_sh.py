"""Issue 18 §1: a submit cut by a dropped connection is sent again and still makes exactly one
job. commands.SUBMIT_SH runs with local bash and an ``sbatch`` on PATH that counts its calls; the
connection drop is a transport whose run() lets the command finish (or stop early, as a cut
stdin does) and then says the connection was lost, as SSHTransport.run does."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.slurm import commands
from jupyter_tiers.slurm.render import render_job
from jupyter_tiers.slurm.tier import SUBMIT_ATTEMPTS, SlurmTier
from jupyter_tiers.transport.errors import ConnectError
from jupyter_tiers.transport.exchange import CommandResult

# Appends a line to $CALLS per call; waits for $GATE when set (a slow controller); answers an id.
FAKE_SBATCH = """#!/bin/bash
echo call >>"$CALLS"
if [ -n "${GATE:-}" ]; then while [ ! -e "$GATE" ]; do sleep 0.02; done; fi
echo "$((4000 + $(wc -l <"$CALLS")))"
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(FAKE_SBATCH)
    sbatch.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls")}


def _calls(env: dict[str, str]) -> int:
    path = Path(env["CALLS"])
    return len(path.read_text().splitlines()) if path.exists() else 0


PACKED = commands.pack_job(render_job(SlurmTier(Profile(
    name="hpc", tier="slurm", settings={"host": "h", "workdir": "/w"})).make_spec("print(1)", name="once")))


def _run(jobdir: Path, env: dict[str, str], *, again: bool = False, stdin: bytes | None = None
         ) -> subprocess.CompletedProcess[bytes]:
    packed = PACKED
    return subprocess.run(commands.submit_argv(str(jobdir), packed, again=again),
                          input=packed if stdin is None else stdin,
                          capture_output=True, env=env, timeout=120, check=False)


def test_again_after_a_finished_submit_answers_the_same_job(tmp_path: Path, env: dict[str, str]) -> None:
    jobdir = tmp_path / "jobs" / "once-1"
    first = _run(jobdir, env)
    assert first.returncode == 0, first.stderr
    again = _run(jobdir, env, again=True)
    assert again.returncode == 0, again.stderr
    assert first.stdout == again.stdout and first.stdout.split()[0] == b"4001"
    assert _calls(env) == 1
    assert (jobdir / "job.sbatch").exists() and (jobdir / "ranks").is_dir()


def test_again_after_a_cut_upload_submits_once(tmp_path: Path, env: dict[str, str]) -> None:
    jobdir = tmp_path / "jobs" / "once-2"
    packed = PACKED
    cut = _run(jobdir, env, stdin=packed[: len(packed) // 3])  # the tar cut short: no sbatch
    assert cut.returncode != 0 and _calls(env) == 0
    assert b"arrived incomplete" in cut.stderr and not (jobdir / "job.sbatch").exists()
    again = _run(jobdir, env, again=True, stdin=packed)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[0] == b"4001" and _calls(env) == 1


def test_a_new_submit_still_refuses_an_existing_directory(tmp_path: Path, env: dict[str, str]) -> None:
    jobdir = tmp_path / "jobs" / "taken"
    jobdir.mkdir(parents=True)
    result = _run(jobdir, env)
    assert result.returncode != 0 and b"File exists" in result.stderr
    assert list(jobdir.iterdir()) == [] and _calls(env) == 0


def test_again_refuses_a_link(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "link").symlink_to(tmp_path / "elsewhere")
    result = _run(tmp_path / "jobs" / "link", env, again=True)
    assert result.returncode != 0 and _calls(env) == 0
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_again_waits_for_a_first_run_still_in_sbatch(tmp_path: Path, env: dict[str, str]) -> None:
    """The first run outlives its dropped connection and is still in sbatch when the retry comes:
    the retry waits for it (the lock) and answers its job instead of submitting a second."""
    gate = tmp_path / "gate"
    slow = {**env, "GATE": str(gate)}
    jobdir = tmp_path / "jobs" / "once-3"
    results: dict[str, subprocess.CompletedProcess[bytes]] = {}
    first = threading.Thread(target=lambda: results.setdefault("first", _run(jobdir, slow)))
    first.start()
    deadline = time.monotonic() + 60
    while _calls(env) == 0 and time.monotonic() < deadline:  # the first run is in sbatch
        time.sleep(0.02)
    assert _calls(env) == 1
    second = threading.Thread(target=lambda: results.setdefault("again", _run(jobdir, slow, again=True)))
    second.start()
    time.sleep(0.3)  # not an assertion: gives a retry without the lock the chance to call sbatch
    gate.touch()
    first.join(120)
    second.join(120)
    assert results["first"].returncode == 0 and results["again"].returncode == 0
    assert results["first"].stdout == results["again"].stdout
    assert _calls(env) == 1


class DroppingTransport:
    """run() by local bash; the first ``drops`` calls are cut: after ``cut_after`` bytes of stdin
    (None: after the command finished) the caller is told the connection was lost."""

    def __init__(self, env: dict[str, str], drops: int, cut_after: int | None,
                 only: set[int] | None = None) -> None:
        self.env, self.drops, self.cut_after = env, drops, cut_after
        self.only = only  # the 1-based calls cut instead of the first ``drops``
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float | None = 60.0,
            check: bool = True) -> CommandResult:
        self.calls.append(list(argv))
        data = stdin or b""
        cut = len(self.calls) in self.only if self.only is not None else len(self.calls) <= self.drops
        if cut and self.cut_after is not None:
            data = data[: self.cut_after]
        p = subprocess.run(list(argv), input=data, capture_output=True, env=self.env, timeout=timeout)
        if cut:
            raise ConnectError(f"connection lost while running `{argv[0]}` (it may or may not have "
                               "completed)")
        return CommandResult(tuple(argv), p.returncode, p.stdout, p.stderr)


@pytest.mark.parametrize("cut_after", [None, 0, 200])
def test_tier_submit_after_drops_records_exactly_one_job(tmp_path: Path, env: dict[str, str],
                                                          cut_after: int | None) -> None:
    transport = DroppingTransport(env, drops=2, cut_after=cut_after)
    profile = Profile(name="hpc", tier="slurm",
                      settings={"host": "h", "workdir": str(tmp_path / "work")})
    tier = SlurmTier(profile, Registry(tmp_path / "registry.sqlite"), transport=transport)  # type: ignore[arg-type]  # run() is all submit uses
    job = tier.submit(tier.make_spec("print(1)", name="once"))
    assert job.id == "4001" and _calls(env) == 1
    assert [r.job_id for r in tier.registry.list(limit=10)] == ["4001"]
    # argv: BASH, program, $0, jobdir, sha256, first|again, then the job's sbatch options
    assert len(transport.calls) == 3 and transport.calls[0][8] == "first"
    assert all(c[8] == "again" and c[6:8] == transport.calls[0][6:8] and c[9:] == transport.calls[0][9:]
               for c in transport.calls[1:])


def test_tier_submit_gives_up_with_one_clear_line(tmp_path: Path, env: dict[str, str]) -> None:
    from jupyter_tiers.core.errors import SubmitError

    transport = DroppingTransport(env, drops=SUBMIT_ATTEMPTS, cut_after=0)
    profile = Profile(name="hpc", tier="slurm",
                      settings={"host": "h", "workdir": str(tmp_path / "work")})
    tier = SlurmTier(profile, Registry(tmp_path / "registry.sqlite"), transport=transport)  # type: ignore[arg-type]  # run() is all submit uses
    with pytest.raises(SubmitError, match=r"dropped 4 times while submitting .*see squeue") as err:
        tier.submit(tier.make_spec("print(1)", name="once"))
    assert "\n" not in str(err.value) and _calls(env) == 0
    assert tier.registry.list(limit=10) == []


@pytest.mark.parametrize(("only", "cut_after"), [({1}, None), ({2}, 300), ({2}, None), ({1, 3}, 0)])
def test_sync_after_drops_sends_the_project_whole(tmp_path: Path, env: dict[str, str],
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   only: set[int], cut_after: int | None) -> None:
    """--sync cut in its check or its apply (after it ran, or with its tar cut short) starts
    over: the snapshot the job gets holds the project's files byte for byte, one sbatch."""
    project = tmp_path / "nb"
    (project / "pkg").mkdir(parents=True)
    files = {"main.py": b"print(1)\n", "pkg/data.bin": os.urandom(5000)}
    for name, data in files.items():
        (project / name).write_bytes(data)
    monkeypatch.chdir(project)
    transport = DroppingTransport(env, drops=0, cut_after=cut_after, only=only)
    profile = Profile(name="hpc", tier="slurm",
                      settings={"host": "h", "workdir": str(tmp_path / "work")})
    tier = SlurmTier(profile, Registry(tmp_path / "registry.sqlite"), transport=transport)  # type: ignore[arg-type]  # run() is all submit uses
    job = tier.submit(tier.make_spec("print(1)", name="synced", sync=["."]))
    assert _calls(env) == 1 and job.id == "4001"
    found = re.search(r"export JT_SYNC_DIR=(\S+)", job.record.script or "")
    assert found
    snap = Path(shlex.split(found.group(1))[0])
    # A cut after the apply ran may leave one more snapshot (no job's; pruned after 30 days).
    assert snap.parent == tmp_path / "work" / ".sync" / "synced" / "snap"
    got = {str(p.relative_to(snap)): p.read_bytes() for p in snap.rglob("*") if p.is_file()}
    assert got == files


def test_tier_submit_does_not_dial_again_when_the_host_is_down(tmp_path: Path, env: dict[str, str]) -> None:
    """The transport already retried connecting: a submit does not multiply that wait."""

    class Down:
        calls = 0

        def run(self, argv: Sequence[str], **kw: object) -> CommandResult:
            Down.calls += 1
            raise ConnectError("cannot connect to h:22: refused (gave up after 6 attempts)", at_connect=True)

    profile = Profile(name="hpc", tier="slurm", settings={"host": "h", "workdir": str(tmp_path)})
    tier = SlurmTier(profile, Registry(tmp_path / "registry.sqlite"), transport=Down())  # type: ignore[arg-type]  # run() is all submit uses
    with pytest.raises(ConnectError, match="gave up"):
        tier.submit(tier.make_spec("print(1)", name="once"))
    assert Down.calls == 1 and _calls(env) == 0


def test_the_jobs_options_reach_sbatchs_command_line(tmp_path: Path, env: dict[str, str]) -> None:
    """SBATCH_* variables of the login environment beat #SBATCH lines, so the submit gives sbatch
    every option the job sets on its command line too (before the script, one word each)."""
    seen = tmp_path / "argv"
    sbatch = Path(env["PATH"].split(":")[0]) / "sbatch"
    sbatch.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" >{seen}\necho 4001\n')
    spec = SlurmTier(Profile(name="hpc", tier="slurm", settings={"host": "h", "workdir": "/w"})
                     ).make_spec("print(1)", name="opts", time="00:07:00", partition="debug")
    rendered = render_job(spec)
    packed = commands.pack_job(rendered)
    jobdir = tmp_path / "jobs" / "opts-1"
    p = subprocess.run(commands.submit_argv(str(jobdir), packed, rendered.options), input=packed,
                       capture_output=True, env=env, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    argv = seen.read_text().splitlines()
    assert argv[0] == "--parsable" and argv[-1] == "job.sbatch"
    assert argv[1:-1] == list(rendered.options)
    assert {"--time=00:07:00", "--partition=debug", "--job-name=opts", "--output=job.log"} <= set(argv)
    # ... and the script still carries them as #SBATCH lines, for the user who reads it
    assert "#SBATCH --time=00:07:00" in rendered.script.splitlines()


@pytest.mark.parametrize("bad", ["-t", "--time", "--x=a\nb", "time=1", "--Time=1", ""])
def test_submit_refuses_what_is_not_an_option_word(bad: str) -> None:
    from jupyter_tiers.core.errors import SpecError

    if bad == "--time":  # a flag is a fine word
        assert commands.submit_argv("/w/j", b"", [bad])[-1] == "--time"
        return
    with pytest.raises(SpecError, match="sbatch option"):
        commands.submit_argv("/w/j", b"", [bad])


def test_tier_submit_refuses_a_workdir_others_can_swap(tmp_path: Path, env: dict[str, str]) -> None:
    """Issue 36 item 7: under a group-writable (not sticky) directory the program writes nothing
    and the tier says why in one line (not as sbatch's refusal)."""
    from jupyter_tiers.core.errors import SubmitError

    shared = tmp_path / "project"
    shared.mkdir()
    shared.chmod(0o2775)
    profile = Profile(name="hpc", tier="slurm", settings={"host": "h", "workdir": str(shared / "me")})
    transport = DroppingTransport(env, drops=0, cut_after=None)
    tier = SlurmTier(profile, Registry(tmp_path / "registry.sqlite"), transport=transport)  # type: ignore[arg-type]  # run() is all submit uses
    with pytest.raises(SubmitError, match=rf"^not submitting from {shared}/me: {shared} \(mode 2775\) "
                                          r"is writable by group or others") as err:
        tier.submit(tier.make_spec("print(1)", name="once"))
    assert "\n" not in str(err.value) and "chmod +t" in str(err.value)
    assert _calls(env) == 0 and list((shared / "me").iterdir()) == []
