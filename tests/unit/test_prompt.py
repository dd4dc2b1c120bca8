"""The second-factor prompt: server text shown safely, prompters' refusals, and the hand-over of
keyboard-interactive rounds from paramiko's thread to the caller's (with a fake transport; the
real server is in tests/cluster/test_twofactor.py)."""

from __future__ import annotations

import io
import random
import threading
from typing import Any

import paramiko
import pytest

from jupyter_tiers.transport.errors import AuthenticationError
from jupyter_tiers.transport.kbdint import keyboard_interactive
from jupyter_tiers.transport.prompt import (
    CannotPrompt,
    Prompt,
    PromptRequest,
    clean_text,
    current_prompter,
    kernel_prompter,
    refusing_prompter,
    terminal_prompter,
    unavailable,
    using_prompter,
)
from jupyter_tiers.transport.sshconfig import Hop

HOP = Hop(name="login", hostname="login.example", port=22, user="alice")


def request(*prompts: str, title: str = "", instructions: str = "") -> PromptRequest:
    return PromptRequest("profile 'hpc' (alice@login.example:22)", title, instructions,
                         tuple(Prompt(p) for p in prompts))


def test_server_text_is_shown_as_plain_text() -> None:
    req = request("\x1b[1mPasscode\x1b[0m or option (1-3):", title="Duo\x07",
                  instructions="\x1b]0;owned\x07Push sent\r\n\tto phone")
    assert req.header() == (
        "profile 'hpc' (alice@login.example:22) asks for a one-time code (second factor after "
        "the key).\nDuo\n0;ownedPush sent\n to phone"
    )
    assert req.prompt_texts() == ["Passcode or option (1-3): "]
    assert request("").prompt_texts() == ["One-time code: "]
    assert request("Code: ").prompt_texts() == ["Code: "]
    assert clean_text("x" * 1000, 10) == "x" * 9 + "…"


def test_clean_text_fuzz() -> None:
    rng = random.Random(1103)
    alphabet = ["\x1b", "[", "]", "0", "1", ";", "m", "A", "é", "\n", "\r", "\t", "\x00", "\x07",
                "\x7f", "\x9b", "\u2028", " ", "?", "~", "code"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        limit = rng.randint(1, 80)
        out = clean_text(text, limit)
        assert len(out) <= limit
        assert not any((ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F for c in out), repr(out)
        assert "\r" not in out


def test_prompters_that_cannot_ask_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal, even under pytest -s
    with pytest.raises(CannotPrompt, match="standard input is not a terminal"):
        terminal_prompter(request("Code:"))
    assert unavailable(terminal_prompter) == (
        "there is no terminal to ask in (standard input is not a terminal)"
    )
    with pytest.raises(CannotPrompt, match="not a Jupyter kernel"):
        kernel_prompter(request("Code:"))
    refuse = refusing_prompter("the server cannot ask")
    with pytest.raises(CannotPrompt, match=r"^the server cannot ask$"):
        refuse(request("Code:"))
    assert unavailable(refuse) == "the server cannot ask"
    assert unavailable(lambda r: ["x"]) is None  # a plain function may always ask
    with using_prompter(refuse):
        assert current_prompter() is refuse
    assert current_prompter() is not refuse


class FakeTransport:
    """paramiko.Transport's keyboard-interactive surface: rounds of prompts, then a verdict."""

    def __init__(self, rounds: list[list[tuple[str, bool]]], accept: str | None) -> None:
        self.rounds = rounds
        self.accept = accept
        self.auth_timeout: float | None = 15.0
        self.closed = False
        self.handler_threads: list[str] = []

    def auth_interactive(self, user: str, handler: Any, submethods: str = "") -> list[str]:
        answers: list[str] = []
        for prompts in self.rounds:
            self.handler_threads.append(threading.current_thread().name)
            answers = handler("", "", prompts)
            if self.closed:
                raise paramiko.SSHException("closed")
        if self.accept is not None and answers != [self.accept]:
            raise paramiko.AuthenticationException("Authentication failed.")
        return []

    def close(self) -> None:
        self.closed = True

    def is_active(self) -> bool:
        return not self.closed


def test_rounds_are_asked_on_the_callers_thread() -> None:
    t = FakeTransport([[], [("Code: ", False)]], accept="123456")
    asked: list[tuple[str, PromptRequest]] = []

    def ask(req: PromptRequest) -> list[str]:
        asked.append((threading.current_thread().name, req))
        return ["123456"]

    keyboard_interactive(t, HOP, ask)  # type: ignore[arg-type]
    assert [name for name, _ in asked] == [threading.current_thread().name]
    assert t.handler_threads == ["jt-ssh-second-factor"] * 2  # the empty round was not asked
    assert asked[0][1].who == "alice@login.example:22"
    assert t.auth_timeout == 15.0  # restored


def test_a_refused_answer_and_a_failing_prompter() -> None:
    t = FakeTransport([[("Code: ", False)]], accept="123456")
    with pytest.raises(AuthenticationError, match="refused the one-time code") as info:
        keyboard_interactive(t, HOP, lambda r: ["654321"])  # type: ignore[arg-type]
    assert "654321" not in str(info.value)

    t = FakeTransport([[("Code: ", False)]], accept="123456")

    def cannot(req: PromptRequest) -> list[str]:
        raise CannotPrompt("nobody here")

    with pytest.raises(CannotPrompt, match="nobody here"):
        keyboard_interactive(t, HOP, cannot)  # type: ignore[arg-type]
    assert t.closed  # the server is not left waiting

    t = FakeTransport([[("Code: ", False), ("PIN: ", False)]], accept=None)
    with pytest.raises(AuthenticationError, match="gave 1 answer"):
        keyboard_interactive(t, HOP, lambda r: ["1"])  # type: ignore[arg-type]
    assert t.closed


class FakeKernel:
    """What the kernel prompter reads of ipykernel's Kernel: the shell channel's current parent."""

    def __init__(self, msg_type: str, allow_stdin: bool = True) -> None:
        self.parent = {"header": {"msg_type": msg_type}, "content": {"allow_stdin": allow_stdin}}

    def get_parent(self, channel: str) -> dict[str, Any]:
        return self.parent


def test_the_kernel_asks_only_in_a_running_cell_with_stdin() -> None:
    from jupyter_tiers.transport.prompt import _kernel_unavailable

    assert _kernel_unavailable(FakeKernel("execute_request")) is None
    headless = _kernel_unavailable(FakeKernel("execute_request", allow_stdin=False))
    assert headless is not None and headless.startswith("this kernel's client does not accept input")
    # A widget's button (a comm message between cells): its input request would be dropped.
    widget = _kernel_unavailable(FakeKernel("comm_msg"))
    assert widget is not None and "%tiers login -p PROFILE" in widget
    seen: list[str | None] = []
    thread = threading.Thread(target=lambda: seen.append(_kernel_unavailable(FakeKernel("execute_request"))))
    thread.start()
    thread.join()
    assert seen == [widget]  # a background thread, even while a cell runs


class AskingKernel(FakeKernel):
    """A kernel in a running cell that records how each prompt was asked."""

    def __init__(self) -> None:
        super().__init__("execute_request")
        self.asked: list[tuple[str, str]] = []

    def getpass(self, text: str) -> str:
        self.asked.append(("getpass", text))
        return "123456"

    def raw_input(self, text: str) -> str:
        self.asked.append(("raw_input", text))
        return "123456"


def test_an_echoed_prompt_is_still_asked_like_a_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server marking the code prompt as echoed must not get the code shown: raw_input would
    save it into the notebook's output, input() into the terminal's scrollback (issue 20 item 14)."""
    from jupyter_tiers.transport import prompt as prompt_module

    req = PromptRequest("profile 'hpc' (alice@login.example:22)", "", "",
                        (Prompt("Verification code:", echo=True), Prompt("Option (1-3):", echo=True),
                         Prompt("Password:", echo=False)))
    kernel = AskingKernel()
    monkeypatch.setattr(prompt_module, "_kernel", lambda: kernel)
    assert kernel_prompter(req) == ["123456"] * 3
    assert [how for how, _ in kernel.asked] == ["getpass"] * 3

    asked: list[str] = []
    monkeypatch.setattr(prompt_module, "_kernel", lambda: None)
    monkeypatch.setattr("sys.stdin", type("Tty", (io.StringIO,), {"isatty": lambda self: True})())
    monkeypatch.setattr("getpass.getpass", lambda text="": asked.append(text) or "654321")

    def no_input(text: str = "") -> str:
        raise AssertionError(f"input() asked {text!r}: the answer would be echoed")

    monkeypatch.setattr("builtins.input", no_input)
    assert terminal_prompter(req) == ["654321"] * 3
    assert asked == ["Verification code: ", "Option (1-3): ", "Password: "]
