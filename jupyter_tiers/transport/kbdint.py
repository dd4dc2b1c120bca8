"""The second step of a two-factor login: keyboard-interactive after a partially accepted key.

paramiko calls the answer handler on its own transport thread. The user must be asked on the
caller's thread instead (a Jupyter kernel's ``getpass`` belongs to the thread running the cell),
so authentication runs on a helper thread and hands each round of prompts back here.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import AuthenticationError, ConnectError, reason
from .prompt import Prompt, PromptRequest

if TYPE_CHECKING:
    import paramiko

    from .sshconfig import Hop

Ask = Callable[[PromptRequest], Sequence[str]]

# How long the keyboard-interactive step may take in all, the user's typing included (the
# server's LoginGraceTime, 2 minutes by default, usually ends it sooner).
ANSWER_WAIT = 300.0

_DONE = object()


def keyboard_interactive(t: paramiko.Transport, hop: Hop, ask: Ask) -> None:
    """Answer the server's keyboard-interactive prompts through ``ask`` (on this thread).

    Raises :class:`AuthenticationError` when the server refuses the answers (the message never
    carries them), whatever ``ask`` raised when it could not ask (the transport is then closed),
    or :class:`ConnectError` when the server closed the connection meanwhile.
    """
    import paramiko

    rounds: queue.Queue[Any] = queue.Queue()
    outcome: dict[str, Any] = {}

    def handler(title: str, instructions: str, prompt_list: list[tuple[str, bool]]) -> list[str]:
        if not prompt_list:  # an informational round: nothing to answer
            return []
        request = PromptRequest(
            who=hop.label,
            title=title,
            instructions=instructions,
            prompts=tuple(Prompt(text, bool(echo)) for text, echo in prompt_list),
        )
        reply: queue.Queue[list[str]] = queue.Queue(maxsize=1)
        rounds.put((request, reply))
        return reply.get()

    def authenticate() -> None:
        try:
            outcome["remaining"] = t.auth_interactive(hop.user, handler)
        except BaseException as e:  # handed to the caller's thread
            outcome["error"] = e
        finally:
            rounds.put(_DONE)

    saved_timeout = t.auth_timeout
    t.auth_timeout = ANSWER_WAIT
    worker = threading.Thread(target=authenticate, name="jt-ssh-second-factor", daemon=True)
    worker.start()
    failure: BaseException | None = None
    asked = 0
    try:
        while True:
            item = rounds.get()
            if item is _DONE:
                break
            request, reply = item
            blanks = [""] * len(request.prompts)
            if failure is not None:
                reply.put(blanks)
                continue
            try:
                answers = [str(a) for a in ask(request)]
                if len(answers) != len(request.prompts):
                    raise AuthenticationError(
                        f"the prompter gave {len(answers)} answer(s) to {len(request.prompts)} "
                        f"prompt(s) of {hop.label}"
                    )
            except BaseException as e:
                failure = e
                t.close()  # stop at once: the server would wait for answers that never come
                reply.put(blanks)
                continue
            asked += 1
            reply.put(answers)
            del answers
    except BaseException:
        t.close()  # interrupted while waiting for the server: end the helper thread too
        raise
    finally:
        worker.join(10)
        t.auth_timeout = saved_timeout
    if failure is not None:
        raise failure
    error = outcome.get("error")
    if error is None:
        remaining = outcome.get("remaining") or []
        if remaining:
            raise AuthenticationError(
                f"{hop.label} wants yet more after the key and the code ({', '.join(remaining)}), "
                "which is not supported"
            )
        return
    if isinstance(error, paramiko.BadAuthenticationType):
        allowed = ", ".join(error.allowed_types) or "nothing"
        raise AuthenticationError(
            f"{hop.label} does not offer keyboard-interactive after the key (it allows: {allowed})"
        ) from None
    if isinstance(error, paramiko.AuthenticationException):
        if asked:
            raise AuthenticationError(
                f"{hop.label} refused the one-time code; run it again to enter a new one"
            ) from None
        raise AuthenticationError(
            f"{hop.label} refused keyboard-interactive authentication without asking anything"
        ) from None
    if not t.is_active():
        raise ConnectError(
            f"{hop.label} closed the connection while waiting for the one-time code "
            "(too slow for its LoginGraceTime?)",
            transient=False,
        ) from None
    raise AuthenticationError(f"second factor with {hop.label} failed: {reason(error)}") from None
