"""Login nodes with two-factor authentication, against the test cluster's second sshd.

That sshd (jupyter_tiers/tools/sandbox/twofactor.sh) wants the cluster's key and then a TOTP code
through PAM (pam_google_authenticator), like an HPC centre's login node. The code is computed
here from the sandbox's secret, as an authenticator app would.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers import api
from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier, transport_for
from jupyter_tiers.transport.errors import AuthenticationError, OneTimeCodeRequired
from jupyter_tiers.transport.prompt import (
    PromptRequest,
    refusing_prompter,
    terminal_prompter,
    using_prompter,
)
from tests.cluster.twofactor import (
    PROFILE,
    contains_code,
    next_code,
    profile_yaml,
    start_twofactor_sshd,
    wrong_code,
)
from tests.helpers import drop_connection

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="session")
def twofactor(cluster_env: dict[str, str]) -> dict[str, str]:
    return start_twofactor_sshd()


@pytest.fixture
def secret(twofactor: dict[str, str]) -> str:
    return twofactor["JT_SSH_2FA_TOTP_SECRET"]


@pytest.fixture
def tiers_2fa(
    cluster_env: dict[str, str], twofactor: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    path = tmp_path / "tiers.yaml"
    path.write_text(profile_yaml(cluster_env, twofactor))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return path


class CodePrompter:
    """Answers with the current TOTP code (or a fixed answer) and remembers each request."""

    def __init__(self, secret_file: str, answer: str | None = None) -> None:
        self.secret_file = secret_file
        self.answer = answer
        self.requests: list[PromptRequest] = []
        self.given: list[str] = []
        self.threads: list[str] = []

    def __call__(self, request: PromptRequest) -> list[str]:
        self.requests.append(request)
        self.threads.append(threading.current_thread().name)
        code = self.answer or next_code(self.secret_file)
        self.given.append(code)
        return [code] * len(request.prompts)


@pytest.fixture
def transports() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for t in made:
        t.close()


def transport(tiers_2fa: Path, transports: list[Any], **kw: Any) -> Any:
    t = transport_for(load_config().profile(PROFILE))
    for key, value in kw.items():
        setattr(t, key, value)
    transports.append(t)
    return t


def test_login_with_the_code_is_asked_once_per_connection(
    tiers_2fa: Path, transports: list[Any], secret: str
) -> None:
    prompter = CodePrompter(secret)
    t = transport(tiers_2fa, transports, prompter=prompter)
    assert t.run(["sh", "-c", 'echo "$SLURM_CONF"']).text().strip().endswith("slurm.conf")
    with t.stream(["sh", "-c", "echo streamed"]) as stream:
        assert b"".join(stream).strip() == b"streamed"
    for _ in range(5):
        t.run(["true"])
    assert len(prompter.requests) == 1 and t.connections == 1 and t.code_prompts == 1
    request = prompter.requests[0]
    assert request.who == f"profile '{PROFILE}' (root@127.0.0.1:{t.target.port})"
    assert [p.text for p in request.prompts] == ["Verification code: "]
    assert request.prompts[0].echo is False
    # Asked on the thread that connected, not on paramiko's transport thread.
    assert prompter.threads == [threading.current_thread().name]


def test_a_reconnect_asks_again(tiers_2fa: Path, transports: list[Any], secret: str) -> None:
    prompter = CodePrompter(secret)
    t = transport(tiers_2fa, transports, prompter=prompter)
    t.run(["true"])
    drop_connection(t)
    assert t.run(["echo", "again"]).text().strip() == "again"
    assert len(prompter.requests) == 2 and t.connections == 2


def test_a_wrong_code_is_refused_without_showing_it(
    tiers_2fa: Path, transports: list[Any], secret: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bad = wrong_code(secret)
    t = transport(tiers_2fa, transports, prompter=CodePrompter(secret, answer=bad))
    with pytest.raises(AuthenticationError) as info:
        t.run(["true"])
    message = str(info.value)
    assert not isinstance(info.value, OneTimeCodeRequired)
    assert message.startswith(f"profile '{PROFILE}': root@127.0.0.1:")
    assert "refused the one-time code" in message
    assert not contains_code(message, bad)
    assert not contains_code(caplog.text, bad)
    assert t.connections == 0


def test_no_terminal_fails_fast_naming_the_profile_and_host(
    tiers_2fa: Path, transports: list[Any], twofactor: dict[str, str]
) -> None:
    # pytest's stdin is not a terminal: the terminal prompter cannot ask.
    t = transport(tiers_2fa, transports, prompter=terminal_prompter)
    with pytest.raises(OneTimeCodeRequired) as info:
        t.run(["true"])
    message = str(info.value)
    port = twofactor["JT_SSH_2FA_PORT"]
    assert f"profile '{PROFILE}' (root@127.0.0.1:{port}) asks for a one-time code" in message
    assert "standard input is not a terminal" in message


def test_without_a_way_to_ask_a_known_two_factor_host_is_not_dialled_again(
    tiers_2fa: Path, transports: list[Any], secret: str, twofactor: dict[str, str]
) -> None:
    log = Path(twofactor["JT_SSH_2FA_KNOWN_HOSTS"]).parent.parent / "log" / "sshd-2fa.log"
    prompter = CodePrompter(secret)
    t = transport(tiers_2fa, transports, prompter=prompter)
    t.run(["true"])
    drop_connection(t)
    # Now, as in a watcher thread of a kernel, nobody can be asked.
    t.prompter = refusing_prompter("nobody can be asked in this test")
    before = log.read_text(errors="replace").count("Partial publickey")
    for _ in range(3):
        with pytest.raises(OneTimeCodeRequired, match="nobody can be asked in this test"):
            t.run(["true"])
    assert log.read_text(errors="replace").count("Partial publickey") == before
    t.prompter = prompter  # someone who can answer: asked again, and it works
    assert t.run(["echo", "back"]).text().strip() == "back"
    assert len(prompter.requests) == 2


def test_jobs_watchers_and_logs_of_a_profile_share_one_prompt(
    tiers_2fa: Path, secret: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    prompter = CodePrompter(secret)
    registry_path = tmp_path / "registry.sqlite"
    tier = SlurmTier(load_config().profile(PROFILE), Registry(registry_path))
    try:
        with using_prompter(prompter):
            jobs = [
                tier.submit(tier.make_spec(f"print('job {i} says hi')\n", name=f"twofactor-{i}"))
                for i in range(3)
            ]
            follower_lines = [line.text for line in jobs[0].follow(timeout=180)]
            statuses = [job.wait(timeout=180) for job in jobs]
            logs = [job.logs() for job in jobs]
    finally:
        for rec in tier.registry.list(limit=100):
            tier.cancel(rec)
        tier.close()
    assert [s.state for s in statuses] == [JobState.COMPLETED] * 3, logs
    assert any("job 0 says hi" in text for text in follower_lines)
    assert all(f"job {i} says hi" in text for i, text in enumerate(logs))
    assert len(prompter.requests) == 1  # submits, the watcher, the log follower, the reads
    code = prompter.given[0]
    assert not contains_code(caplog.text, code)
    assert not contains_code(registry_path.read_bytes().decode("utf-8", "replace"), code)


def test_the_cached_tier_of_a_profile_is_the_one_connection(
    tiers_2fa: Path, secret: str
) -> None:
    prompter = CodePrompter(secret)
    try:
        with using_prompter(prompter):
            tier = api.connect(PROFILE)
            assert isinstance(tier, SlurmTier)
            tier.transport.run(["true"])
            again = api.connect(PROFILE)
            assert again is tier
            again.transport.run(["true"])
    finally:
        api.close_all()
    assert len(prompter.requests) == 1


def _cli_env(tiers_2fa: Path, tmp_path: Path) -> dict[str, str]:
    import os

    return {**os.environ, "JUPYTER_TIERS_CONFIG": str(tiers_2fa),
            "JUPYTER_TIERS_REGISTRY": str(tmp_path / "cli-registry.sqlite")}


def test_jupyter_tiers_login_asks_in_the_terminal(
    tiers_2fa: Path, secret: str, tmp_path: Path, twofactor: dict[str, str]
) -> None:
    import sys

    import pexpect

    cli = str(Path(sys.executable).parent / "jupyter-tiers")
    child = pexpect.spawn(cli, ["login", "-p", PROFILE], env=_cli_env(tiers_2fa, tmp_path),
                          encoding="utf-8", timeout=60)
    transcript = io.StringIO()
    child.logfile_read = transcript  # everything the terminal showed
    try:
        child.expect_exact(f"profile '{PROFILE}' (root@127.0.0.1:{twofactor['JT_SSH_2FA_PORT']}) "
                           "asks for a one-time code")
        child.expect_exact("Verification code: ")
        code = next_code(secret)
        child.sendline(code)
        child.expect_exact(f"{PROFILE} connected to root@127.0.0.1:")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    shown = transcript.getvalue()
    assert "a reconnect asks again" in shown
    assert not contains_code(shown, code)  # getpass: the code is not echoed


def test_jupyter_tiers_login_without_a_terminal_fails_at_once(
    tiers_2fa: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    cli = str(Path(sys.executable).parent / "jupyter-tiers")
    proc = subprocess.run([cli, "login", "-p", PROFILE], env=_cli_env(tiers_2fa, tmp_path),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"jupyter tiers: profile '{PROFILE}' (root@127.0.0.1:")
    assert "no terminal to ask in" in proc.stderr and "Traceback" not in proc.stderr


def test_a_watcher_that_cannot_ask_says_so_and_a_login_brings_it_back(
    tiers_2fa: Path, secret: str, tmp_path: Path
) -> None:
    from jupyter_tiers.transport.prompt import set_prompter
    from tests.helpers import wait_for

    prompter = CodePrompter(secret)
    tier = SlurmTier(load_config().profile(PROFILE), Registry(tmp_path / "registry.sqlite"))
    messages: list[str | None] = []
    states: list[JobState] = []
    previous = set_prompter(prompter)
    try:
        # The job runs until the test says go (at most 300 s), not a fixed 15 s: on a busy machine
        # the watcher could see it end before the link drops, and never be asked for a code.
        body = ("import os, time\ngo = os.path.join(os.environ['JT_JOB_DIR'], 'go')\n"
                "for _ in range(3000):\n    if os.path.exists(go):\n        break\n    time.sleep(0.1)\n"
                "print('done', flush=True)\n")
        job = tier.submit(tier.make_spec(body, name="twofactor-watch"))

        def on_status(status: Any) -> None:
            messages.append(status.message)
            states.append(status.state)

        sub = tier.watcher.watch(job.record, on_status=on_status, follow_logs=False)
        wait_for(lambda: JobState.RUNNING in states, "the job to run")
        # The link drops while nobody can answer (a kernel's watcher thread between cells).
        set_prompter(refusing_prompter("nobody is at the notebook"))
        drop_connection(tier.transport)
        wait_for(lambda: any(m and "one-time code" in m for m in messages), "the watcher's message")
        shown = next(m for m in messages if m and "one-time code" in m)
        assert f"profile '{PROFILE}' (root@127.0.0.1:" in shown
        assert "nobody is at the notebook" in shown
        assert len(prompter.requests) == 1
        # Someone logs in again (what %tiers login does): the watcher carries on to the end.
        set_prompter(prompter)
        tier.transport.connect()
        tier.transport.run(["touch", "--", f"{job.record.jobdir}/go"])
        wait_for(lambda: states[-1] is JobState.COMPLETED, "the job to complete", timeout=180)
        tier.watcher.unwatch(sub)
    finally:
        set_prompter(previous)
        for rec in tier.registry.list(limit=100):
            tier.cancel(rec)
        tier.close()
    assert len(prompter.requests) == 2
    assert messages[-1] is None  # the problem is gone from the status once it is reachable
