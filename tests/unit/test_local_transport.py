"""LocalTransport: the Slurm tier's commands as subprocesses of this machine (bash only, no Slurm:
a stand-in ``sbatch`` on PATH), with the SSH transport's contract and a clean environment."""

from __future__ import annotations

import fcntl
import os
import termios
import threading
from pathlib import Path

import pytest

from jupyter_tiers.slurm.commands import BASH
from jupyter_tiers.transport.errors import CommandError, CommandTimeout, ConnectError
from jupyter_tiers.transport.local import LocalTransport
from tests.helpers import wait_for

GUARD = 60.0


@pytest.fixture()
def here(tmp_path: Path) -> LocalTransport:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    environ = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SLURM_CONF": "/etc/s.conf",
               "SLURM_JOB_ID": "77", "SLURM_MEM_PER_CPU": "2048", "SBATCH_PARTITION": "interactive",
               "RANK": "0"}
    t = LocalTransport(environ=environ)
    yield t
    t.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")


def test_run_passes_argv_words_and_stdin_unchanged(here: LocalTransport) -> None:
    word = "a b; $(touch /tmp/never) 'q' \"\\n"
    r = here.run([*BASH, 'printf %s "$1"; cat', "prog", word], stdin=b"in\x00put")
    assert r.exit_status == 0 and r.stdout == word.encode() + b"in\x00put"
    assert r.argv[-1] == word


def test_the_command_starts_in_home_with_a_clean_environment(here: LocalTransport, tmp_path: Path) -> None:
    out = here.run(["bash", "-c", "pwd; env"]).text().splitlines()
    assert out[0] == str(tmp_path)
    env = dict(line.split("=", 1) for line in out[1:] if "=" in line)
    assert env["SLURM_CONF"] == "/etc/s.conf"
    for name in ("SLURM_JOB_ID", "SLURM_MEM_PER_CPU", "SBATCH_PARTITION", "RANK"):
        assert name not in env


def test_a_failing_command_with_check_raises_command_error(here: LocalTransport) -> None:
    assert here.run(["bash", "-c", "exit 3"], check=False).exit_status == 3
    with pytest.raises(CommandError, match=r"exited with status 4: last words") as e:
        here.run(["bash", "-c", "echo first >&2; echo last words >&2; exit 4"])
    assert e.value.result.exit_status == 4


def test_a_missing_program_exits_127_as_a_shells_would(here: LocalTransport) -> None:
    r = here.run(["no-such-program-jt"], check=False)
    assert r.exit_status == 127 and b"command not found" in r.stderr


def test_a_timeout_ends_the_commands_whole_session(here: LocalTransport, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    with pytest.raises(CommandTimeout, match="did not finish within 1s"):
        here.run(["bash", "-c", 'sleep 600 & echo $! > "$1"; wait', "x", str(pid_file)], timeout=1)
    pid = int(pid_file.read_text())
    wait_for(lambda: not _alive(pid), "the timed-out command's background child to end", GUARD)


def test_stream_gives_chunks_then_the_exit_status(here: LocalTransport) -> None:
    with here.stream(["bash", "-c", "echo one; echo two; echo err >&2; exit 5"], timeout=GUARD) as s:
        data = b"".join(s)
    assert data == b"one\ntwo\n" and s.exit_status == 5 and s.stderr == b"err\n"


def test_stream_timeout_raises_and_the_stream_stays_usable(here: LocalTransport, tmp_path: Path) -> None:
    go = tmp_path / "go"
    argv = ["bash", "-c", 'echo first; while [ ! -e "$1" ]; do sleep 0.05; done; echo second', "x", str(go)]
    with here.stream(argv, timeout=0.5) as s:
        it = iter(s)
        assert next(it) == b"first\n"
        with pytest.raises(CommandTimeout, match="no output from"):
            next(it)
        go.touch()
        s.timeout = GUARD
        assert next(it) == b"second\n"


def test_closing_a_stream_from_another_thread_ends_its_session(here: LocalTransport, tmp_path: Path) -> None:
    pid_file = tmp_path / "tail.pid"
    log = tmp_path / "log"
    log.write_text("line\n")
    s = here.stream(["bash", "-c", 'echo $$ > "$2"; exec tail -F -- "$1"', "x", str(log), str(pid_file)],
                    timeout=GUARD)
    assert next(iter(s)) == b"line\n"
    pid = int(pid_file.read_text())
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(s))
    reader.start()
    s.close()
    reader.join(GUARD)
    assert not reader.is_alive() and got == []
    wait_for(lambda: not _alive(pid), "tail to end once its stream is closed", GUARD)


def test_closing_the_transport_closes_its_streams(here: LocalTransport) -> None:
    s = here.stream(["sleep", "600"], timeout=GUARD)
    here.close()
    assert s.closed and list(s) == []


def test_a_large_stdin_and_output_do_not_deadlock(here: LocalTransport) -> None:
    data = os.urandom(1 << 20)
    assert here.run(["cat"], stdin=data, timeout=GUARD).stdout == data
    with here.stream(["cat"], stdin=data, timeout=GUARD) as s:
        assert b"".join(s) == data


def test_no_sbatch_here_is_a_connect_error_that_says_what_to_do(tmp_path: Path) -> None:
    t = LocalTransport(environ={"PATH": str(tmp_path), "HOME": str(tmp_path)})
    with pytest.raises(ConnectError, match=r"no sbatch on PATH.*host: LOGIN_NODE") as e:
        t.run(["true"])
    assert not e.value.transient and e.value.at_connect and not t.connected


def test_run_takes_a_working_directory_and_a_umask(here: LocalTransport, tmp_path: Path) -> None:
    work = tmp_path / "job"
    work.mkdir()
    r = here.run(["bash", "-c", "pwd; umask; touch made"], cwd=str(work), umask=0o077)
    assert r.text().split() == [str(work), "0077"]
    assert (work / "made").stat().st_mode & 0o777 == 0o600
    assert here.run(["bash", "-c", "pwd"]).text().strip() == str(tmp_path)  # the default stays home
    assert here.home() == str(tmp_path)


def test_a_stream_reads_more_than_a_default_pipe_at_once(here: LocalTransport, tmp_path: Path) -> None:
    # 4 MiB written before anyone reads: with the pipe grown, a read takes far more than the
    # 64 KiB a default pipe holds (the writer blocks at the pipe's size; FIONREAD says when full).
    big = tmp_path / "big"
    big.write_bytes(b"y" * (4 << 20))
    with here.stream(["bash", "-c", 'cat -- "$1"; exec sleep 30', "prog", str(big)], timeout=GUARD) as s:
        fd = s._proc.stdout.fileno()  # type: ignore[union-attr]
        buffered = bytearray(4)

        def queued() -> int:
            fcntl.ioctl(fd, termios.FIONREAD, buffered)
            return int.from_bytes(buffered, "little")

        wait_for(lambda: queued() >= 1 << 20, "1 MiB queued in the pipe", timeout=GUARD)
        chunk = next(s)
        assert len(chunk) > 65536
        got = len(chunk)
        while got < 4 << 20:
            got += len(next(s))
        assert got == 4 << 20
