"""The routing guard: pure analysis of a cell body, advising which tier fits its shape.

``%%k8s_serve`` refuses a *training shape* (a body that starts a process group or torchrun, or
several GPU replicas that meet at a rendezvous): a Deployment restarts one failed pod and leaves
the other ranks waiting on a collective forever, while Slurm allocates every rank at once and
stops them all when one fails. ``%%slurm_train`` warns about a *server shape* (a body that binds
a port and serves forever): a batch job holds its nodes until its time limit and has no stable
endpoint, while a Deployment gives a Service, rolling updates and autoscaling. ``--force``
overrides both. The analysis never raises: a body that is not valid Python is scanned as text.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

TRAINING_WHY = ("multi-rank training belongs on %%slurm_train: Slurm allocates every rank at once and "
                "stops them all when one fails, while a Deployment restarts a lone pod and leaves "
                "the other ranks waiting on a collective")
SERVER_WHY = ("a server belongs on %%k8s_serve: a batch job holds its nodes until the time limit and "
              "has no stable endpoint, while a Deployment gives a Service, rolling updates and "
              "autoscaling")


@dataclass(frozen=True)
class Finding:
    """What the guard saw: ``what`` (e.g. ``calls init_process_group``) and where (1-based line)."""

    what: str
    line: int

    def __str__(self) -> str:
        return f"{self.what} (line {self.line})"


# --- training shapes ----------------------------------------------------------------------------

_TRAIN_CALLS = {"init_process_group": "calls init_process_group",
                "init_device_mesh": "calls init_device_mesh"}
_TRAIN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# Calls whose string arguments are command lines or modules to run.
_PROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output", "system", "popen", "execv",
                  "execvp", "execlp", "spawnlp", "run_module", "getoutput", "getstatusoutput"}
_LAUNCHERS = {"torchrun": "runs torchrun", "deepspeed": "runs deepspeed"}
_RDZV_WORDS = re.compile(r"MASTER_ADDR|MASTER_PORT|rdzv|rendezvous|init_method|c10d|TCPStore")
_SHELL_WORD = re.compile(r"""[^\s;&|()<>'"`]+""")


def training_shape(body: str, *, shell: bool = False, replicas: int = 1,
                   gpus: int = 0) -> Finding | None:
    """A reason this serving body looks like distributed training, or None.

    Python: a call of ``init_process_group`` / ``init_device_mesh``, an import or ``-m`` run of
    ``torch.distributed.run``/``launch``, or ``torchrun`` named in a command. Shell: those
    commands as words. Either: more than one replica with GPUs and a rendezvous (MASTER_ADDR,
    rdzv, init_method, ...), the shape of data-parallel training spread over pods.
    """
    try:
        if shell:
            found = _shell_training(body)
        elif _parse(body) is None:
            found = _text_training(body)
        else:
            found = _python_training(body)
        if found is None and _int(replicas) > 1 and _int(gpus) > 0:
            for number, line in enumerate(_lines(body, shell), 1):
                match = _RDZV_WORDS.search(line)
                if match:
                    return Finding(f"runs {replicas} GPU replicas that meet at a rendezvous "
                                   f"({match.group(0)})", number)
        return found
    except Exception:  # the guard is advice: it must never stop a cell by crashing
        return None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _parse(body: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():  # "invalid escape sequence" and the like are not ours to show
            warnings.simplefilter("ignore")
            return ast.parse(body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _strings(node: ast.AST) -> Iterator[tuple[str, int]]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value, getattr(sub, "lineno", 1)


def _python_training(body: str) -> Finding | None:
    tree = _parse(body)
    if tree is None:
        return None
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 1)
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in _TRAIN_CALLS:
                return Finding(_TRAIN_CALLS[name], line)
            # subprocess.run(["torchrun", ...]), os.system("torchrun ..."), runpy.run_module(...)
            if name not in _PROCESS_CALLS:
                continue
            for text, at in _strings(node):
                found = _shell_training(text, first_line=at)
                if found is not None:
                    return found
                if text in _TRAIN_MODULES:
                    return Finding(f"runs {text}", at)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _TRAIN_MODULES:
                    return Finding(f"imports {alias.name}", line)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module in _TRAIN_MODULES or any(f"{module}.{a.name}" in _TRAIN_MODULES for a in node.names):
                return Finding(f"imports {module or 'torch.distributed'}", line)
    return None


def _text_training(body: str) -> Finding | None:
    """Python that does not parse: look for the same names as text, outside comments."""
    for number, line in enumerate(_lines(body, shell=False), 1):
        for name, what in _TRAIN_CALLS.items():
            if re.search(rf"\b{name}\s*\(", line):
                return Finding(what, number)
        for module in _TRAIN_MODULES:
            if module in line:
                return Finding(f"uses {module}", number)
        if re.search(r"\btorchrun\b", line):
            return Finding("runs torchrun", number)
    return None


def _shell_training(body: str, first_line: int = 1) -> Finding | None:
    for number, line in enumerate(_lines(body, shell=True), first_line):
        words = _SHELL_WORD.findall(line)
        for i, word in enumerate(words):
            base = word.rsplit("/", 1)[-1]
            if base in _LAUNCHERS:
                return Finding(_LAUNCHERS[base], number)
            if word == "-m" and i + 1 < len(words) and words[i + 1] in _TRAIN_MODULES:
                return Finding(f"runs python -m {words[i + 1]}", number)
    return None


def _lines(body: str, shell: bool) -> list[str]:
    """The body's lines with comments cut (roughly: a '#' at the start or after a space)."""
    out = []
    for line in body.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("#"):
            out.append("")
            continue
        out.append(re.split(r"\s#", line, maxsplit=1)[0])
    return out


# --- server shapes ------------------------------------------------------------------------------

_SERVE_CALLS = {"serve_forever": "calls serve_forever", "run_app": "calls run_app",
                "start_server": "calls start_server", "run_simple": "calls run_simple"}
_SERVE_DOTTED = {"uvicorn.run": "calls uvicorn.run", "app.run": "calls app.run",
                 "web.run_app": "calls web.run_app", "demo.launch": "calls demo.launch"}
_SERVE_MODULES = ("http.server", "uvicorn", "gunicorn", "vllm.entrypoints.openai.api_server",
                  "flask")
_SERVE_COMMANDS = {"uvicorn": "runs uvicorn", "gunicorn": "runs gunicorn", "hypercorn": "runs hypercorn"}


def server_shape(body: str, *, shell: bool = False) -> Finding | None:
    """A reason this training body looks like a long-running server, or None.

    Python: ``serve_forever()``, ``uvicorn.run``, ``app.run`` (Flask), aiohttp's ``run_app``,
    ``asyncio.start_server``, or a socket that binds and then listens. Shell: ``python -m
    http.server``, ``uvicorn``/``gunicorn``, ``vllm serve``, ``flask run``.
    """
    try:
        if shell:
            return _shell_server(body)
        if _parse(body) is None:
            return _text_server(body) or _shell_server(body)
        return _python_server(body)
    except Exception:  # the guard is advice: it must never stop a cell by crashing
        return None


def _python_server(body: str) -> Finding | None:
    tree = _parse(body)
    if tree is None:
        return None
    binds: list[int] = []
    listens = False
    found: list[Finding] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        line = getattr(node, "lineno", 1)
        name = _call_name(node)
        dotted = _dotted(node.func)
        if name in _SERVE_CALLS:
            found.append(Finding(_SERVE_CALLS[name], line))
        elif dotted in _SERVE_DOTTED:
            found.append(Finding(_SERVE_DOTTED[dotted], line))
        elif name == "bind":
            binds.append(line)
        elif name == "listen":
            listens = True
        elif name in _PROCESS_CALLS:
            for text, at in _strings(node):
                shell_found = _shell_server(text, first_line=at)
                if shell_found is not None:
                    found.append(shell_found)
    if binds and listens:
        found.append(Finding("binds a port and listens", min(binds)))
    return min(found, key=lambda f: f.line) if found else None


def _text_server(body: str) -> Finding | None:
    """Python that does not parse: look for the same calls as text, outside comments."""
    names = {**_SERVE_CALLS, **_SERVE_DOTTED}
    for number, line in enumerate(_lines(body, shell=False), 1):
        for name, what in names.items():
            if re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", line) or (
                    "." not in name and re.search(rf"\.{name}\s*\(", line)):
                return Finding(what, number)
    return None


def _shell_server(body: str, first_line: int = 1) -> Finding | None:
    for number, line in enumerate(_lines(body, shell=True), first_line):
        words = _SHELL_WORD.findall(line)
        for i, word in enumerate(words):
            base = word.rsplit("/", 1)[-1]
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if word == "-m" and nxt in _SERVE_MODULES:
                return Finding(f"runs python -m {nxt}", number)
            if base in _SERVE_COMMANDS:
                return Finding(_SERVE_COMMANDS[base], number)
            if base in ("vllm", "flask") and nxt in ("serve", "run"):
                return Finding(f"runs {base} {nxt}", number)
            if base == "text-generation-launcher":
                return Finding("runs text-generation-launcher", number)
    return None


# --- the advice ---------------------------------------------------------------------------------


def serve_refusal(body: str, *, shell: bool = False, replicas: int = 1, gpus: int = 0) -> str | None:
    """The one-line refusal ``%%k8s_serve`` gives a training body, or None."""
    found = training_shape(body, shell=shell, replicas=replicas, gpus=gpus)
    if found is None:
        return None
    return (f"%%k8s_serve: this cell {found} — a training shape; {TRAINING_WHY}. "
            "Add --force to serve it anyway")


def train_warning(body: str, *, shell: bool = False, dry_run: bool = False) -> str | None:
    """The one-line warning ``%%slurm_train`` gives a server body, or None. It says what happens
    to the cell: submitted anyway, or (``dry_run``) only rendered."""
    found = server_shape(body, shell=shell)
    if found is None:
        return None
    outcome = ("Nothing submitted (--dry-run); without it the job would be submitted anyway"
               if dry_run else "Submitted anyway")
    return (f"%%slurm_train warning: this cell {found} — a long-running server; {SERVER_WHY}. "
            f"{outcome} (--force silences this)")
