"""Small helpers shared by several test folders: bounded waits, a free port, a skip that says
so loudly, the local profile, the processes under a directory, leftovers cancelled, a dropped SSH
link, IPython's test shell (with the extension loaded), the isolation every local-tier magic test
starts from, a recorder of a widget view's messages, and the pieces both magic-line fuzzers
share."""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest

from jupyter_tiers import api
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], what: str = "condition", timeout: float = 120.0, *,
             interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that. After ``timeout``
    seconds the test fails naming ``what``: a bound against hanging, not a timed assertion."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def loud_skip(what: str, reason: str, *, fail_in_ci: bool = True) -> NoReturn:
    """Skip, saying so on stderr where a test run's reader sees it. In CI (``$CI`` set) a missing
    prerequisite fails instead, unless ``fail_in_ci`` is False."""
    if fail_in_ci and os.environ.get("CI"):
        pytest.fail(f"{reason} — CI must run the {what}")
    print(f"\nSKIPPING {what.upper()}: {reason}", file=sys.stderr)
    pytest.skip(reason)


def cancel_registered_jobs() -> None:
    """Leave no job running and no cached tier behind: cancel (best effort) every job the
    current registry knows, then close every cached tier (a cached tier keeps its registry)."""
    with contextlib.suppress(Exception):
        for rec in Registry().list(limit=1000):
            with contextlib.suppress(Exception):
                api.connect(rec.profile).cancel(rec)
    api.close_all()


def isolate_tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test of the magics on the local tier: no system, user or project tiers.yaml (only the
    built-in local profile), the Jupyter data dir (registry, local jobs and services) under
    ``tmp_path``, text display, the venv's python first on PATH (the local tier runs ``python3``
    from PATH) and ``tmp_path`` as the working directory."""
    from jupyter_tiers.config import profiles as config

    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.delenv("JUPYTER_TIERS_CONFIG", raising=False)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_TIERS_DISPLAY", "text")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)


def local_profile(workdir: Path, **settings: object) -> Profile:
    """The local tier's profile with its jobs and services under ``workdir`` (and ``settings``)."""
    return Profile(name="local", tier="local", settings={"workdir": str(workdir), **settings})


def processes_mentioning(root: Path | str, *, skip_zombies: bool = False) -> list[tuple[int, str]]:
    """Every live process (pid, command line) whose command line or environment mentions ``root``;
    with ``skip_zombies``, not the exited ones their parent has yet to reap."""
    needle = os.fsencode(str(root))
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            environ = Path(f"/proc/{name}/environ").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_bytes() if skip_zombies else b""
        except OSError:
            continue
        if skip_zombies and stat.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]:
            continue
        if needle in cmdline or needle in environ:
            found.append((int(name), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def tiers_shell() -> Any:
    """IPython's test shell with the jupyter_tiers extension loaded."""
    shell = ipython_test_shell()
    shell.run_line_magic("load_ext", "jupyter_tiers")
    return shell


def ipython_test_shell() -> Any:
    """IPython's global test shell, for every test module that asks (``globalipapp.get_ipython()``
    hands it only to its first caller in a process and None after that)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    return shell if shell is not None else InteractiveShell.instance()


class SentRecorder:
    """Mixin for a widget view under test (``class RecordingView(SentRecorder, JobView)``): it
    keeps, in ``sent``, the custom messages the view would send to the browser."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        self.sent_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def send(self, content: Any, buffers: Any = None) -> None:
        with self.sent_lock:
            self.sent.append(content)


def drop_connection(transport: Any) -> None:
    """Abruptly cut an SSHTransport's socket, without any SSH goodbye (a dropped link)."""
    conn = transport._conn
    if conn is not None:
        conn.drop()


# --- fuzzing magic lines (tests/hardening/test_fuzz.py, tests/unit/test_k8s_fuzz.py) ----------
FUZZ_TIERS_COMMANDS = ["jobs", "attach", "logs", "cancel", "delete", "scale", "restart", "rollback",
                       "profiles", "bogus", ""]
FUZZ_TIERS_OPTIONS = ["--profile", "-p", "--limit", "--kind", "--pod", "--rank", "--tail", "--text", "--wait",
                      "--to", "--bogus"]


def fuzz_word(rng: random.Random, choices: Sequence[str]) -> str:
    """One of ``choices``, usually shell-quoted, sometimes raw (its quotes may be unbalanced)."""
    word = rng.choice(choices)
    return shlex.quote(word) if rng.random() < 0.7 else word


def fuzz_tiers_line(rng: random.Random, values: Sequence[str]) -> str:
    """A random ``%tiers`` line: a command (or none) and up to four words or options."""
    words = [rng.choice(FUZZ_TIERS_COMMANDS)]
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.5:
            words.append(fuzz_word(rng, values))
        else:
            words += [rng.choice(FUZZ_TIERS_OPTIONS), fuzz_word(rng, values)]
    return " ".join(words)


def check_fuzz_answer(what: str, exc: BaseException | None, printed: str, secrets: Sequence[str],
                      never_typed: Sequence[str]) -> None:
    """A fuzzed line's answer: output or one non-empty UsageError, and no env value in either.
    argparse repeats stray words as typed (that text is in the cell already), so an
    "unrecognized arguments" error is only checked for the ``never_typed`` values (from the
    kernel or the profile)."""
    from IPython.core.error import UsageError

    for secret in secrets:
        assert secret not in printed, f"{what}: an env value was printed"
    if exc is None:
        return
    assert isinstance(exc, UsageError), f"{what}: {type(exc).__name__}: {exc}"
    message = str(exc)
    assert message.strip(), f"{what}: an empty UsageError"
    for secret in never_typed if message.startswith("unrecognized arguments:") else secrets:
        assert secret not in message, f"{what}: the error shows an env value: {message}"
