"""Asking the user for a login's second factor (a one-time code after the key).

A login node with ``AuthenticationMethods publickey,keyboard-interactive`` accepts the key, then
sends prompts (``Verification code:``, Duo's ``Passcode or option (1-3):``). The transport hands
each round of prompts to a *prompter*: a callable taking a :class:`PromptRequest` and returning
one answer per prompt. Answers go to the server and nowhere else: never stored, logged or
returned to callers.

Which prompter asks (:func:`current_prompter`, unless :func:`set_prompter` chose one):

* in an IPython kernel, :func:`kernel_prompter`: the kernel's ``getpass``, i.e. a Jupyter
  ``input_request`` that JupyterLab shows as a password field under the running cell. It works
  while the cell waits for the connection because it is a request on the stdin channel, not a
  widget value (a widget's comm message would wait behind the running cell). It asks only on
  the thread running the cell, within an execute request (not from a widget's button between
  cells); a headless client (nbclient, papermill) allows no stdin, so the prompter refuses at
  once instead of hanging;
* elsewhere, :func:`terminal_prompter`: :func:`getpass.getpass` when stdin is a terminal.

A prompter that cannot ask raises :class:`CannotPrompt` with the reason; the transport turns it
into :class:`~jupyter_tiers.transport.errors.OneTimeCodeRequired` naming the profile and host.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CannotPrompt",
    "Prompt",
    "PromptRequest",
    "Prompter",
    "auto_prompter",
    "current_prompter",
    "kernel_prompter",
    "refusing_prompter",
    "set_prompter",
    "terminal_prompter",
    "unavailable",
    "using_prompter",
]

# Server text is shown as plain text: escape sequences and control characters are dropped.
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_TEXT = 500  # characters of a server-sent title, instruction or prompt that are shown


def clean_text(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` from the server as safe plain text: no escape or control characters, bounded."""
    text = _ESCAPES.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = text.replace("\t", " ").strip("\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Prompt:
    """One question of the server: its text and whether the answer may be shown as typed."""

    text: str
    echo: bool = False


@dataclass(frozen=True)
class PromptRequest:
    """One round of keyboard-interactive prompts from ``who`` (a profile and ``user@host:port``)."""

    who: str
    title: str
    instructions: str
    prompts: tuple[Prompt, ...]

    def header(self) -> str:
        """What to show before the inputs: who asks, then the server's title and instructions."""
        lines = [f"{self.who} asks for a one-time code (second factor after the key)."]
        for text in (self.title, self.instructions):
            cleaned = clean_text(text)
            if cleaned:
                lines.append(cleaned)
        return "\n".join(lines)

    def prompt_texts(self) -> list[str]:
        """Each prompt's text, cleaned, with a fallback for an empty one."""
        out = []
        for p in self.prompts:
            text = clean_text(p.text, 200).replace("\n", " ") or "One-time code:"
            out.append(text if text.endswith(" ") else text + " ")
        return out


Prompter = Callable[[PromptRequest], Sequence[str]]


class CannotPrompt(Exception):
    """This process cannot ask the user right now; ``str()`` says why, in a clause."""


def _kernel() -> Any:
    """The running ipykernel kernel of this process, or None (without importing ipykernel)."""
    kernelbase = sys.modules.get("ipykernel.kernelbase")
    if kernelbase is None:
        return None
    kernel_cls = kernelbase.Kernel
    return kernel_cls.instance() if kernel_cls.initialized() else None


_NOT_IN_A_CELL = (
    "the kernel can ask only in a running cell, and this connection was needed elsewhere (a "
    "watcher or log follower reconnecting in the background, or a widget's button); run "
    "`%tiers login -p PROFILE` in a cell to enter a new code"
)


def _kernel_unavailable(kernel: Any) -> str | None:
    # An input_request reaches the frontend only while the cell that it names still runs: a
    # request from another thread, or from a widget's comm message between cells, would be
    # dropped by the frontend and leave the kernel waiting for ever.
    if threading.current_thread() is not threading.main_thread():
        return _NOT_IN_A_CELL
    parent = kernel.get_parent("shell") or {}
    if parent.get("header", {}).get("msg_type") != "execute_request":
        return _NOT_IN_A_CELL
    if not parent.get("content", {}).get("allow_stdin", False):
        return (
            "this kernel's client does not accept input (a headless run: nbclient, papermill, "
            "a notebook run from the command line)"
        )
    return None


def _terminal_unavailable() -> str | None:
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        return "there is no terminal to ask in (standard input is not a terminal)"
    return None


def kernel_prompter(request: PromptRequest) -> list[str]:
    """Ask in the notebook: the header printed as text, each prompt a password-style input
    (even one the server marks as echoed: the answer never lands in the cell's output)."""
    from IPython.core.error import StdinNotImplementedError

    kernel = _kernel()
    if kernel is None:
        raise CannotPrompt("this process is not a Jupyter kernel")
    why = _kernel_unavailable(kernel)
    if why:
        raise CannotPrompt(why)
    print(request.header(), flush=True)
    answers = []
    try:
        for text in request.prompt_texts():
            # Always getpass: a server may mark the code prompt as echoed, and raw_input would
            # save the answer (the code) into the notebook's output.
            answers.append(kernel.getpass(text))
    except StdinNotImplementedError:
        raise CannotPrompt("this kernel's client does not accept input") from None
    except EOFError:
        raise CannotPrompt("no code was entered") from None
    return answers


def terminal_prompter(request: PromptRequest) -> list[str]:
    """Ask in the terminal with :func:`getpass.getpass`, whatever echo the server asks for (an
    echoed answer would stay in the terminal's scrollback and a recorded session)."""
    import getpass

    why = _terminal_unavailable()
    if why:
        raise CannotPrompt(why)
    print(request.header(), file=sys.stderr, flush=True)
    answers = []
    try:
        for text in request.prompt_texts():
            answers.append(getpass.getpass(text))
    except EOFError:
        raise CannotPrompt("no code was entered") from None
    return answers


def auto_prompter(request: PromptRequest) -> Sequence[str]:
    """The kernel's prompter in a Jupyter kernel, the terminal's elsewhere."""
    if _kernel() is not None:
        return kernel_prompter(request)
    return terminal_prompter(request)


def _auto_unavailable() -> str | None:
    kernel = _kernel()
    return _kernel_unavailable(kernel) if kernel is not None else _terminal_unavailable()


def refusing_prompter(reason: str) -> Prompter:
    """A prompter that never asks (``reason`` is a clause: "the Jupyter server cannot ask")."""

    def refuse(request: PromptRequest) -> Sequence[str]:
        raise CannotPrompt(reason)

    _CHECKS[refuse] = lambda: reason
    return refuse


#: Why one of these prompters could not ask right now (see :func:`unavailable`).
_CHECKS: weakref.WeakKeyDictionary[Prompter, Callable[[], str | None]] = weakref.WeakKeyDictionary()
_CHECKS[auto_prompter] = _auto_unavailable
_CHECKS[kernel_prompter] = lambda: (
    _kernel_unavailable(k) if (k := _kernel()) is not None else "this process is not a Jupyter kernel"
)
_CHECKS[terminal_prompter] = _terminal_unavailable

_chosen: Prompter | None = None


def current_prompter() -> Prompter:
    """The prompter set with :func:`set_prompter`, else :func:`auto_prompter`."""
    return _chosen or auto_prompter


def set_prompter(prompter: Prompter | None) -> Prompter | None:
    """Make ``prompter`` the process's prompter (None: back to automatic); returns the previous."""
    global _chosen
    previous, _chosen = _chosen, prompter
    return previous


@contextlib.contextmanager
def using_prompter(prompter: Prompter | None) -> Iterator[None]:
    """``with using_prompter(p):`` sets the process's prompter for the block."""
    previous = set_prompter(prompter)
    try:
        yield
    finally:
        set_prompter(previous)


def unavailable(prompter: Prompter) -> str | None:
    """Why ``prompter`` could not ask right now (a clause), or None if it may (or cannot say).
    A caller's own prompter may say through an ``unavailable()`` method."""
    check = _CHECKS.get(prompter) or getattr(prompter, "unavailable", None)
    return check() if callable(check) else None
