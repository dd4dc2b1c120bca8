"""Pure parsers of what the doctor's one remote command prints on a Slurm login node
(:data:`~.slurm_probe.DOCTOR_SH`): sections, tool versions, ``scontrol show config`` lines,
``scontrol -o show partition`` records, ``sinfo -N`` node lines and the workdir's facts.

Every parser takes any text (a login node may print anything: a banner, a localised error) and
never raises; what it cannot read it leaves out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SECTION = "@@jt-doctor "
_VERSION_RE = re.compile(r"\bslurm(?:-wlm)?\s+(\d+\.\d+(?:\.\d+)?(?:-\S+)?)", re.IGNORECASE)
_KV_RE = re.compile(r"(?<!\w)(\w+)=(\S*)")  # a key starts a word: not a search from each letter


def sections(text: str) -> dict[str, list[str]]:
    """The output split at ``@@jt-doctor NAME`` lines (a name seen twice keeps the first)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(SECTION):
            name = line[len(SECTION):].strip()
            current = [] if name in out else out.setdefault(name, [])
        elif current is not None:
            current.append(line)
    return out


@dataclass(frozen=True)
class Tool:
    """One command looked up on the login node: where (``""``: not found) and its version."""

    name: str
    path: str
    version: str  # "" when not found or not printed as "slurm X.Y.Z"


def slurm_version(line: str) -> str:
    """``22.05.8`` from ``slurm 22.05.8`` / ``slurm-wlm 22.05.8``, else ``""``."""
    match = _VERSION_RE.search(line)
    return match.group(1) if match else ""


def parse_tools(lines: list[str]) -> dict[str, Tool]:
    """``NAME<TAB>PATH<TAB>VERSION-LINE`` lines (the first per name wins)."""
    tools: dict[str, Tool] = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) < 2 or not re.fullmatch(r"[a-z]{1,16}", parts[0]) or parts[0] in tools:
            continue
        path = parts[1].strip()
        tools[parts[0]] = Tool(parts[0], path, slurm_version(parts[2]) if path and len(parts) > 2 else "")
    return tools


def parse_config(lines: list[str]) -> dict[str, str]:
    """``Key = value`` lines of ``scontrol show config``."""
    out: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and re.fullmatch(r"[A-Za-z_]{1,64}", key) and key not in out:
            out[key] = value.strip()
    return out


@dataclass(frozen=True)
class Partition:
    name: str
    state: str = "UP"
    default: bool = False
    hidden: bool = False
    allow_groups: tuple[str, ...] = ("ALL",)
    allow_accounts: tuple[str, ...] = ("ALL",)
    deny_accounts: tuple[str, ...] = ()
    allow_qos: tuple[str, ...] = ("ALL",)
    max_time: str = ""
    nodes: str = ""


def _names(value: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if not value or value == "(null)":
        return default
    return tuple(v for v in value.split(",") if v)


def parse_partitions(lines: list[str]) -> list[Partition]:
    """``scontrol -o show partition``: one record per line (``PartitionName=...``)."""
    out: list[Partition] = []
    for line in lines:
        fields = dict(_KV_RE.findall(line))
        name = fields.get("PartitionName", "")
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
            continue
        out.append(Partition(
            name=name, state=fields.get("State", "UP"), default=fields.get("Default") == "YES",
            hidden=fields.get("Hidden") == "YES",
            allow_groups=_names(fields.get("AllowGroups", ""), ("ALL",)),
            allow_accounts=_names(fields.get("AllowAccounts", ""), ("ALL",)),
            deny_accounts=_names(fields.get("DenyAccounts", ""), ()),
            allow_qos=_names(fields.get("AllowQos", ""), ("ALL",)),
            max_time=fields.get("MaxTime", ""), nodes=fields.get("Nodes", "")))
    return out


def usable(partition: Partition, groups: set[str], accounts: set[str]) -> str | None:
    """Why the user may not submit to ``partition``, or None. ``accounts`` empty: unknown (no
    accounting), so account limits are not judged."""
    if partition.state != "UP":
        return f"state {partition.state}"
    if "ALL" not in partition.allow_groups and not groups & set(partition.allow_groups):
        return f"only groups {','.join(partition.allow_groups)}"
    if accounts:
        if "ALL" not in partition.allow_accounts and not accounts & set(partition.allow_accounts):
            return f"only accounts {','.join(partition.allow_accounts)}"
        if accounts <= set(partition.deny_accounts):
            return f"accounts {','.join(sorted(accounts))} denied"
    return None


@dataclass(frozen=True)
class NodeType:
    """Nodes alike in CPUs, memory and GRES, and how many there are."""

    cpus: str
    memory_mb: str
    gres: str  # "" without any
    count: int

    def gpus(self) -> int:
        """GPUs per node from ``gpu:4`` / ``gpu:a100:8(S:0-1)`` / ``gpu:a100:4,gpu:v100:2``."""
        total = 0
        for item in self.gres.split(","):
            parts = item.split("(")[0].split(":")
            if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
                total += int(parts[-1])
        return total


def parse_nodes(lines: list[str]) -> list[NodeType]:
    """``sinfo -h -N -o '%N|%c|%m|%G'`` (a node once per partition): node types, commonest first."""
    seen: dict[str, tuple[str, str, str]] = {}
    for line in lines:
        parts = line.strip().split("|")
        if len(parts) != 4 or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", parts[0]):
            continue
        gres = "" if parts[3] in ("(null)", "") else parts[3]
        seen.setdefault(parts[0], (parts[1], parts[2], gres))
    counts: dict[tuple[str, str, str], int] = {}
    for kind in seen.values():
        counts[kind] = counts.get(kind, 0) + 1
    return [NodeType(c, m, g, n) for (c, m, g), n in sorted(counts.items(), key=lambda kv: -kv[1])]


@dataclass(frozen=True)
class Workdir:
    path: str = ""
    exists: bool = False
    writable: bool = False
    error: str = ""  # why a test file could not be made
    parent: str = ""  # the nearest existing directory when the workdir does not exist yet
    parent_writable: bool = False
    free_kib: int | None = None
    mount: str = ""


def parse_workdir(lines: list[str]) -> Workdir:
    values: dict[str, list[str]] = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) >= 2:
            values.setdefault(parts[0], parts[1:])

    def field_of(key: str, index: int) -> str:
        found = values.get(key, [])
        return found[index] if len(found) > index else ""

    free = field_of("df", 0)
    return Workdir(
        path=field_of("path", 0),
        exists=field_of("exists", 0) == "yes",
        writable=field_of("writable", 0) == "yes",
        error=field_of("writable", 1)[:200],
        parent=field_of("parent", 0),
        parent_writable=field_of("parent", 1) == "writable",
        free_kib=int(free) if free.isdigit() and len(free) < 20 else None,
        mount=field_of("df", 1),
    )


@dataclass(frozen=True)
class Setup:
    """The profile's setup lines and Python, run on the login node."""

    status: int | None = None  # the setup lines' exit status (None: none ran)
    tools: dict[str, Tool] = field(default_factory=dict)
    python: str = ""  # its version, "" when it did not run
    executable: str = ""
    python_error: str = ""
    torch: str = ""  # "" when not importable
    nccl: bool = False


def parse_setup(lines: list[str]) -> Setup:
    status: int | None = None
    tool_lines: list[str] = []
    python = executable = error = torch = ""
    nccl = False
    for line in lines:
        parts = line.split("\t")
        if parts[0] == "setup" and len(parts) > 1 and parts[1].strip().isdigit():
            status = int(parts[1].strip())
        elif parts[0] == "python" and len(parts) > 2:
            python, executable = parts[1][:40], parts[2][:300]
        elif parts[0] == "python-error" and len(parts) > 1:
            error = parts[1][:300]
        elif parts[0] == "torch" and len(parts) > 2:
            torch, nccl = ("" if parts[1] == "-" else parts[1][:40]), parts[2] == "nccl"
        elif parts[0] == "tool":
            tool_lines.append("\t".join(parts[1:]))
        elif line.strip():  # what the interpreter (or the shell) said instead
            error = line.strip()[:300]
    return Setup(status, parse_tools(tool_lines), python, executable, error, torch, nccl)


@dataclass(frozen=True)
class Association:
    account: str
    partition: str
    qos: tuple[str, ...]


def parse_associations(lines: list[str]) -> list[Association]:
    """``sacctmgr -n -P show assoc format=account,partition,qos``."""
    out = []
    for line in lines:
        parts = line.strip().split("|")
        if len(parts) == 3 and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", parts[0]):
            out.append(Association(parts[0], parts[1], tuple(q for q in parts[2].split(",") if q)))
    return out


@dataclass(frozen=True)
class DryRun:
    """What ``sbatch --test-only`` promised: the job id it would get, when and where it would
    start (``start`` as Slurm printed it)."""

    job_id: str
    start: str
    processors: int
    nodes: str
    partition: str


# 22.05 "sbatch: Job 76 to start at TS using 1 processors on nodes node1 in partition debug";
# 25.05 prints a stray word before "using" ("... at TS a using 1 processors ...").
_TEST_ONLY_RE = re.compile(
    r"sbatch: Job (\d{1,20}) to start at (\S{1,40})(?: \S{1,20})? using (\d{1,9}) processors? "
    r"on nodes? (\S{1,4096}) in partition ([A-Za-z0-9_.-]{1,64})", re.ASCII)


def parse_test_only(stderr: str) -> DryRun | None:
    """``sbatch --test-only``'s answer (on stderr) on any release we know, or None."""
    for line in stderr.splitlines():
        m = _TEST_ONLY_RE.fullmatch(line.strip())
        if m:
            return DryRun(m[1], m[2], int(m[3]), m[4], m[5])
    return None
