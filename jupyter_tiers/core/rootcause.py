"""The line of a crashed program's log that explains the crash (pure).

A crash's last line is rarely its cause: a model server that fails to start prints its root
cause in one process and then, in another, ``RuntimeError: Engine core initialization failed.
See root cause above.`` :func:`root_cause` reads a crashed container's (or rank's) last lines and
returns the line that explains it:

- the first error of the last traceback chain (``The above exception was the direct cause ...``
  and ``During handling of the above exception ...`` join tracebacks into one chain), skipping
  errors that only point elsewhere (``see root cause above``);
- with several processes writing one log (vLLM prefixes each line with ``(EngineCore_DP0
  pid=123)`` or ``(APIServer pid=45)``, and its logger's ``ERROR 12-07 10:15:21 [core.py:708]``
  on every line of a traceback), each process's lines are read apart, so interleaved lines do not
  cut a traceback;
- a known cause (:data:`KINDS`) is named with what it says (the module, the port, the sizes),
  for the caller to word the fix its tier has (``--shm-size`` on Kubernetes, the node's /dev/shm
  on Slurm); without a traceback the last line that shows a known cause is taken;
- failing all that, None (the caller then quotes the last line).

Every pattern here is linear (no nested quantifiers) and every line is cut to
:data:`MAX_LINE` characters before it is read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .plaintext import printable

MAX_LINES = 400  # of the last lines, the ones read
MAX_LINE = 2000  # characters of one line read (a progress bar's line can be megabytes)
MAX_SHOWN = 300  # characters of the cause line returned
_MAX_NAME = 160  # characters of a module, command or size taken from a line

#: The known causes: ``shm`` (/dev/shm too small for shared memory), ``cuda_oom`` (GPU memory),
#: ``no_module`` (a Python module missing), ``addr_in_use`` (the port is taken), ``no_command``
#: (the image has no such program).
KINDS = ("shm", "cuda_oom", "no_module", "addr_in_use", "no_command")

_ANSI = re.compile(r"\x1b\[[0-9;]{0,16}[A-Za-z]")
# vLLM's per-process prefix: "(EngineCore_DP0 pid=123) ", "(APIServer pid=45) ", "(VllmWorker
# TP0 pid=7) ", "(Worker_TP1 pid=8) ".
_PROCESS = re.compile(r"\(([A-Za-z][\w.-]{0,60}(?: [\w.-]{1,40}){0,3} pid=\d{1,10})\) ")
# A logger's prefix on each line: vLLM's "ERROR 12-07 10:15:21 [core.py:708] " (its formatter
# repeats it on every line of a message, traceback included).
_LOGGER = re.compile(r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}"
                     r"(?:\.\d{1,6})? \[[^\]\s]{1,160}\] ?")
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("The above exception was the direct cause of the following exception:",
            "During handling of the above exception, another exception occurred:")
# An exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...", "KeyboardInterrupt".
_EXCEPTION = re.compile(r"[A-Za-z_][\w.]{0,200}(?::|$)")
# Errors that only point at another one.
_POINTS_ELSEWHERE = re.compile(r"see (?:the )?root cause above|see (?:the )?(?:error|logs?|traceback) above|"
                               r"see above for", re.IGNORECASE)

_SHM = re.compile(r"/dev/shm|shared memory \(shm\)|out of shared memory|shared memory limit|"
                  r"shared memory segment|No space left on device.{0,80}shm", re.IGNORECASE)
_SIZE = r"(\d{1,9}(?:\.\d{1,3})? ?[KMGT]i?B)"
_SHM_SIZES = re.compile(_SIZE + " required, " + _SIZE + " free")
_CUDA_OOM = re.compile(r"CUDA out of memory|CUDA error: out of memory|HIP out of memory|"
                       r"CUBLAS_STATUS_ALLOC_FAILED|torch\.(?:cuda\.)?OutOfMemoryError", re.IGNORECASE)
_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]{1,200})'")
_ADDR_IN_USE = re.compile(r"address already in use|EADDRINUSE|\[Errno 98\]", re.IGNORECASE)
_PORT = re.compile(r"\(\S{0,100}?, (\d{2,5})\)|\bport[:= ]\s?(\d{2,5})\b|:(\d{2,5})\b")
# "sh: 1: vllm: not found" (dash), "/jt/code/command.sh: 1: exec: vllm: not found",
# "bash: line 1: vllm: command not found", "env: 'vllm': No such file or directory",
# "exec: \"vllm\": executable file not found in $PATH" (the container runtime).
_NO_COMMAND = re.compile(r"(?:^|: )(?:exec: )?([\w./+-]{1,200}): (?:command )?not found$|"
                         r"^env: '([\w./+-]{1,200})': No such file or directory|"
                         r"exec: \"([\w./+-]{1,200})\": executable file not found")


@dataclass(frozen=True)
class RootCause:
    """The line that explains a crash (``line``: prefixes removed, printable, at most
    :data:`MAX_SHOWN` characters), the known cause it shows (``kind``, one of :data:`KINDS`, or
    None) and what that names (``detail``: the module, the port, the command, or /dev/shm's
    ``160 MiB required, 64 MiB free``; "" when it names nothing)."""

    line: str
    kind: str | None = None
    detail: str = ""


def strip_prefixes(line: str) -> tuple[str, str]:
    """``(process, text)``: a log line without colour codes, vLLM's process prefix (its words
    are ``process``, "" without one) and a logger's level-time-file prefix."""
    text = _ANSI.sub("", line[:MAX_LINE]) if "\x1b" in line else line[:MAX_LINE]
    text = text.rstrip("\r\n")
    process = ""
    m = _PROCESS.match(text)
    if m:
        process, text = m[1], text[m.end():]
    m = _LOGGER.match(text)
    if m:
        text = text[m.end():]
    return process, text


def _known(text: str) -> tuple[str, str] | None:
    """The known cause a line shows, with its detail."""
    m = _NO_MODULE.search(text)
    if m:
        return "no_module", m[1][:_MAX_NAME]
    if _SHM.search(text):
        sizes = _SHM_SIZES.search(text)
        return "shm", f"{sizes[1]} required, {sizes[2]} free" if sizes else ""
    if _CUDA_OOM.search(text):
        return "cuda_oom", ""
    if _ADDR_IN_USE.search(text):
        p = _PORT.search(text)
        return "addr_in_use", (p[1] or p[2] or p[3]) if p else ""
    m = _NO_COMMAND.search(text.strip())
    if m:
        return "no_command", (m[1] or m[2] or m[3])[:_MAX_NAME]
    return None


def _cause(text: str) -> RootCause:
    line = printable(" ".join(text.split()))
    if len(line) > MAX_SHOWN:
        line = line[:MAX_SHOWN - 1] + "…"
    known = _known(text)
    return RootCause(line, known[0], known[1]) if known else RootCause(line)


def _chains(texts: Sequence[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """One process's lines (global index, text) -> its traceback chains, each the exception
    lines of its tracebacks in order (global index, text)."""
    chains: list[list[tuple[int, str]]] = []
    chained = False  # a chaining sentence was read since the last traceback ended
    i, n = 0, len(texts)
    while i < n:
        text = texts[i][1].strip()
        if text in _CHAINED:
            chained = bool(chains)
            i += 1
            continue
        if text != _TRACEBACK:
            if text:  # anything but a blank line between two tracebacks breaks the chain
                chained = False
            i += 1
            continue
        # A traceback: indented frame lines, then the exception's line (the first line that
        # starts at the margin).
        i += 1
        exc: tuple[int, str] | None = None
        while i < n:
            index, raw = texts[i]
            if raw[:1].isspace() or not raw.strip():
                i += 1
                continue
            if _EXCEPTION.match(raw) and raw.strip() != _TRACEBACK:
                exc = (index, raw.strip())
                i += 1
            break
        if exc is None:
            chained = False
            continue
        if chained and chains:
            chains[-1].append(exc)
        else:
            chains.append([exc])
        chained = False
    return chains


def root_cause(lines: Sequence[str]) -> RootCause | None:
    """The line of ``lines`` (a crashed program's last lines, oldest first) that explains the
    crash, see the module docstring; None when no line does."""
    read = list(lines)[-MAX_LINES:]
    streams: dict[str, list[tuple[int, str]]] = {}
    for index, line in enumerate(read):
        process, text = strip_prefixes(line)
        streams.setdefault(process, []).append((index, text))
    # Every process's chains, the latest last (by where its last exception line is).
    chains = sorted((c for texts in streams.values() for c in _chains(texts)), key=lambda c: c[-1][0])
    for chain in reversed(chains):
        for _, text in chain:
            if not _POINTS_ELSEWHERE.search(text):
                return _cause(text)
    # No traceback: the last line that shows a known cause.
    texts = sorted((x for stream in streams.values() for x in stream), reverse=True)
    return next((_cause(text) for _, text in texts if _known(text) is not None), None)
