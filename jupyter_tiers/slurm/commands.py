"""Pure builders of the remote commands the Slurm tier runs, as argv lists.

User data travels only as separate argv words (quoted by the transport with ``shlex.join``) or on
stdin; the small bash programs below are constants and refer to their arguments as "$1", "$2"...
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import time
from collections.abc import Sequence

from ..batch.efficiency import ACCOUNTING_FIELDS
from ..batch.jobdir import LISTING_MARKER, LOG_NAME
from ..batch.shareddirs import UNSAFE_DIRS_SH
from ..batch.stacks import MAX_ANSWER_BYTES, check_request_id
from ..core.errors import SpecError
from .parse import SACCT_FIELDS, SINFO_NODES_FORMAT, SQUEUE_FORMAT
from .render import RenderedJob

_JOB_ID_RE = re.compile(r"\d{1,20}(_\d{1,7})?", re.ASCII)  # a job or an array task; used with fullmatch
_WORKDIR_RE = re.compile(r"(~/)?[A-Za-z0-9_./+@-]{1,1024}")
_OPTION_RE = re.compile(r"--[a-z][a-z0-9-]{0,63}(=[^\x00-\x1f\x7f]{1,4096})?", re.ASCII)

# Every remote program runs as `bash --norc --noprofile -c PROGRAM`: the login shell sshd
# starts has already read the user's start-up files (PATH, modules) and passes their
# environment on, and bash run under sshd would read ~/.bashrc a second time (100 ms on the
# test cluster, `pyenv init`), on every command.
BASH = ["bash", "--norc", "--noprofile", "-c"]

# Our own Slurm queries must print what our parsers read and act on the jobs we name, whatever
# the login environment exports: squeue, sacct, sinfo, scontrol and scancel read SQUEUE_*,
# SACCT_*, SINFO_*, SCONTROL_*, SCANCEL_* variables as defaults of their options (SQUEUE_USERS or
# SQUEUE_PARTITION hide our job from squeue, SCANCEL_STATE=RUNNING makes scancel of a pending
# job a silent no-op) and SLURM_TIME_FORMAT=relative rewrites every time stamp. So every query
# program starts with these lines (bash's ${!P@} lists the names starting with P); SBATCH_*
# and SLURM_CONF/SLURM_CLUSTERS (the site's) are left alone. docs/reference/environment.md.
NEUTRAL_ENV_SH = (
    "unset ${!SQUEUE_@} ${!SACCT_@} ${!SINFO_@} ${!SCONTROL_@} ${!SCANCEL_@} ${!SPRIO_@} ${!SSHARE_@}\n"
    "export SLURM_TIME_FORMAT=standard\n"
)
#: The $0 of :func:`slurm_argv`'s program: marks a wrapped Slurm command (:func:`unwrap_slurm`).
SLURM_ARGV0 = "jt-slurm"
_EXEC_SH = NEUTRAL_ENV_SH + 'exec "$@"\n'


def slurm_argv(*words: str) -> list[str]:
    """A Slurm command (``squeue -h -o ...``, as argv words) run in the neutral environment of
    :data:`NEUTRAL_ENV_SH`, so the user's variables change neither its output nor its effect."""
    return [*BASH, _EXEC_SH, SLURM_ARGV0, *words]


def unwrap_slurm(argv: Sequence[str]) -> list[str]:
    """The Slurm command inside :func:`slurm_argv`'s wrapping (``argv`` itself when it is not
    one): for fakes and tests that answer by the command's name."""
    n = len(BASH)
    if list(argv[:n]) == BASH and len(argv) > n + 2 and argv[n] == _EXEC_SH and argv[n + 1] == SLURM_ARGV0:
        return list(argv[n + 2:])
    return list(argv)

# Unpack the job directory from stdin (a tar), then submit. Prints the job id, then the directory.
# umask 077: the job's files and the log sbatch's umask gives slurmstepd are the user's alone.
# The job directory is 0710 and a new workdir 0710 too, so the user's group may traverse them to
# the checkpoints (0750, see jobdir.checkpoint_lines) but not list them. The job directory itself
# must be new (not one another user prepared).
# "$2" is the tar's sha256: a tar cut short by a dropped connection may end on a file boundary,
# which tar takes for the end; such a job is never submitted.
# "$4"...: the job's sbatch options (render.sbatch_options), also given on sbatch's command line,
# where they beat a login environment's SBATCH_* variables (which beat #SBATCH lines); options
# the job does not set stay the site's (SBATCH_ACCOUNT still applies).
# Idempotent across a dropped connection: a retry ("$3" = again) may find the directory it made
# itself (ours, not a link); under a lock on .submit.lock it submits only when .jobid (sbatch's
# answer, written to a file so a cut pipe cannot lose it) is still missing, else answers the same
# id. The lock makes a retry wait for an earlier run still going after its connection dropped.
# Before the job directory is made, every directory from / down to the workdir must be one nobody
# else can swap (batch/shareddirs.py, the rule submit_here.py applies by descriptor): else exit
# UNSAFE_WORKDIR_EXIT, nothing written.
UNSAFE_WORKDIR_EXIT = 5
SUBMIT_SH = r"""set -e
umask 077
d="$1"
case "$d" in "~/"*) d="$HOME/${d#"~/"}";; esac
(umask 067 && mkdir -p -- "${d%/*}")
""" + UNSAFE_DIRS_SH + r"""if ! jt_unsafe_dirs "${d%/*}"; then
  echo "not submitting from ${d%/*}: $JT_WHY; set the profile's workdir to a directory of your" \
    "own that only you can write (or have the shared directory made root's and sticky, chmod +t)" >&2
  cat >/dev/null
  exit 5
fi
if [ "${3:-}" = again ] && [ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ]; then :
else mkdir -m 0710 -- "$d"
fi
cd -- "$d"
exec 9>>.submit.lock
if command -v flock >/dev/null; then flock 9; fi
if [ -s .jobid ]; then
  cat >/dev/null
else
  mkdir -p -- ranks
  cat >.upload.tar
  if [ "$(sha256sum <.upload.tar)" != "$2  -" ]; then
    rm -f .upload.tar
    echo "the job's files arrived incomplete (the connection dropped?)" >&2
    exit 3
  fi
  tar -x -f .upload.tar
  rm -f .upload.tar
  sbatch --parsable "${@:4}" job.sbatch >.jobid || { rm -f .jobid; exit 1; }
fi
cat .jobid
pwd
"""

# Per job directory: a header, every rank event, each rank's latest usage sample and the nodes'
# GPU snapshots (grep -H; batch/usage.py), and every rank file's mtime (heartbeat).
RANKS_SH = r"""for d in "$@"; do
  printf '@@ %s\n' "$d"
  grep -H -s -- '' "$d"/ranks/* "$d"/.gpu/* 2>/dev/null
  find "$d/ranks" -maxdepth 1 -type f ! -name '*.*' -printf '%% %f %T@\n' 2>/dev/null
  stat -f -c '%%free %a %S' -- "$d" 2>/dev/null
done
exit 0
"""

# Relays tail's output to the channel unchanged, but after a small write it waits 2 ms before the
# next one, so a log written at 10,000 lines/s leaves in <= 500 SSH packets a second instead of
# about one per line: paramiko's cost is per packet (~30 us of Python each), and that, not the
# bytes, is what a fast log costs the kernel (45 % of a core at 10,000 lines/s, 11 % with this;
# bench/log_stream.py). A lone line still goes at once; bulk reads (>= 32 KiB) are not held.
# Exits when the channel closes (its stdout pipe reports an error) or when tail ends.
COALESCE_PL = r"""my ($in, $out) = (fileno(STDIN), fileno(STDOUT));
my $watch = "";
vec($watch, $in, 1) = 1;
vec($watch, $out, 1) = 1 if -p STDOUT;
my ($ready, $n, $buf, $w);
while (1) {
    next if select($ready = $watch, undef, undef, undef) < 0;
    exit 0 if vec($ready, $out, 1);
    $n = sysread(STDIN, $buf, 65536);
    exit 0 unless $n;
    while (length $buf) {
        $w = syswrite(STDOUT, $buf);
        exit 0 unless $w;
        substr($buf, 0, $w) = "";
    }
    select(undef, undef, undef, 0.002) if $n < 32768;
}
"""

# Follow the log from a byte offset. With perl (login nodes have it; else plain tail, below),
# perl relays tail's output through COALESCE_PL ("$3") and tail watches perl's pid ($$, kept by
# exec), so both end within a second of the channel closing. Without perl, tail writes to the
# channel itself and ends when that pipe breaks (GNU tail checks every -s 1; its --pid watch of
# cat does not fire, as cat, its child after the exec, stays a zombie).
FOLLOW_SH = r"""if command -v perl >/dev/null 2>&1; then
  exec perl -e "$3" < <(exec tail -c +"$2" -F -s 1 --pid=$$ -- "$1" </dev/null 2>/dev/null)
fi
exec 3<&0
cat <&3 >/dev/null 3<&- &
exec tail -c +"$2" -F -s 1 --pid=$! -- "$1" 0</dev/null 3<&- 2>/dev/null
"""

READ_SH = r"""[ -e "$1" ] || exit 0
tail -c +"$2" -- "$1"
"""

GREP_RANK_SH = r"""[ -e "$1" ] || exit 0
grep -a -- "^$2: " "$1" | tail -n "$3"
"""


def check_job_id(job_id: str) -> str:
    if not _JOB_ID_RE.fullmatch(job_id):
        raise SpecError("job id", f"{job_id!r} is not a Slurm job id (digits, or ID_TASK for an "
                        "array task)")
    return job_id


def check_workdir(workdir: str) -> str:
    if not _WORKDIR_RE.fullmatch(workdir) or ".." in workdir.split("/"):
        raise SpecError(
            "workdir", f"{workdir!r} is not allowed; use an absolute path or ~/path without spaces"
        )
    return workdir.rstrip("/")


def job_dir_name(name: str, now: float | None = None, token: str = "") -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{name}-{stamp}-{token}" if token else f"{name}-{stamp}"


def pack_job(rendered: RenderedJob) -> bytes:
    """The job directory's files as an uncompressed tar (sent on stdin)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        now = time.time()
        for name, (content, mode) in sorted(rendered.files.items()):
            data = content.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            info.mtime = int(now)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def submit_argv(jobdir: str, packed: bytes, options: Sequence[str] = (), *,
                again: bool = False) -> list[str]:
    """Unpack ``packed`` (:func:`pack_job`, sent on stdin) into ``jobdir`` and sbatch it with
    ``options`` on its command line (``RenderedJob.options``: validated ``--key=value`` words);
    the remote side checks its sha256 first. ``again``: a retry after the connection dropped,
    which answers the first run's job id when that one got as far as sbatch."""
    digest = hashlib.sha256(packed).hexdigest()
    return [*BASH, SUBMIT_SH, "jt-submit", jobdir, digest, "again" if again else "first",
            *check_options(options)]


def check_options(options: Sequence[str]) -> list[str]:
    """``options`` as sbatch's command line takes them (``--key`` or ``--key=value`` words, no
    control characters); SpecError naming the first that is not one."""
    for opt in options:
        if not _OPTION_RE.fullmatch(opt):
            raise SpecError("sbatch option", f"{opt[:80]!r} is not an sbatch option word")
    return list(options)


def squeue_argv(job_ids: Sequence[str]) -> list[str]:
    ids = ",".join(check_job_id(j) for j in job_ids)
    # -r: one row per array task ("51_3"), pending ones too, so an array is one query.
    return slurm_argv("squeue", "-h", "-a", "-r", "-t", "all", "-j", ids, "-o", SQUEUE_FORMAT)


def sacct_argv(job_ids: Sequence[str]) -> list[str]:
    ids = ",".join(check_job_id(j) for j in job_ids)
    return slurm_argv("sacct", "-X", "-n", "-P", "-j", ids, "-o", SACCT_FIELDS)


def accounting_argv(job_id: str) -> list[str]:
    """sacct of one job with its steps: what it used (batch/efficiency.py ACCOUNTING_FIELDS)."""
    return slurm_argv("sacct", "-n", "-P", "-j", check_job_id(job_id), "-o", ACCOUNTING_FIELDS)


def sacct_tasks_argv(task_ids: Sequence[str]) -> list[str]:
    """sacct for array tasks (``51_3``): JobID names them as the array does (JobIDRaw would
    give each task's own number)."""
    ids = ",".join(check_job_id(j) for j in task_ids)
    fields = "JobID" + SACCT_FIELDS[len("JobIDRaw"):]
    return slurm_argv("sacct", "-X", "-n", "-P", "-j", ids, "-o", fields)


# A status command followed, in the same round trip, by a listing of checkpoint directories:
# "$1" of them, then the command's argv. The command's exit status is kept; after its output,
# LISTING_MARKER, then per directory "@@ INDEX DIR" ("~/" resolved) and "MTIME TYPE NAME" lines.
# Each listing gets at most 10 s, so a hung shared filesystem cannot stall the status poll.
WITH_CHECKPOINTS_SH = r"""n="$1"; shift
dirs=("${@:1:$n}"); shift "$n"
"$@"; rc=$?
printf '\n%s\n' '""" + LISTING_MARKER + r"""'
lim=()
if command -v timeout >/dev/null 2>&1; then lim=(timeout 10); fi
i=0
for d in "${dirs[@]}"; do
  case "$d" in "~/"*) d="$HOME/${d#"~/"}";; esac
  printf '@@ %s %s\n' "$i" "$d"
  "${lim[@]}" find "$d" -mindepth 1 -maxdepth 1 -printf '%T@ %y %f\n' 2>/dev/null
  i=$((i + 1))
done
exit "$rc"
"""


def with_checkpoints(argv: list[str], dirs: Sequence[str]) -> list[str]:
    """``argv`` plus one listing of each checkpoint directory, in one remote command."""
    if not dirs:
        return argv
    return [*BASH, WITH_CHECKPOINTS_SH, "jt-status", str(len(dirs)), *dirs, *argv]


def scontrol_jobs_argv() -> list[str]:
    return slurm_argv("scontrol", "-o", "show", "job")


_HOSTLIST_RE = re.compile(r"[A-Za-z0-9_.\-\[\],]{1,4096}", re.ASCII)


def node_states_argv(nodelists: Sequence[str]) -> list[str]:
    """sinfo of the nodes in Slurm hostlists (``node[1-2]``): one row per node and partition,
    with its state and the reason it is out of service (parse.parse_failed_nodes)."""
    lists = [n for n in nodelists if n]
    if not lists or not all(_HOSTLIST_RE.fullmatch(n) for n in lists):
        raise SpecError("nodelist", f"not a Slurm host list: {lists!r}"[:200])
    return slurm_argv("sinfo", "-h", "-N", "-n", ",".join(lists), "-o", SINFO_NODES_FORMAT)


def ranks_argv(jobdirs: Sequence[str]) -> list[str]:
    return [*BASH, RANKS_SH, "jt-ranks", *jobdirs]


# One job's usage series (batch/usage.py parse_usage_dump): "@@ NAME" and the last $2 lines of
# each file of usage/ (R: a rank's samples, gpu-NODE: a node's GPU snapshots), then one
# "@node R NODE" per rank file from its last start line.
USAGE_SH = r"""d="$1"; n="$2"
for f in "$d"/usage/*; do
  [ -f "$f" ] || continue
  printf '@@ %s\n' "${f##*/}"
  tail -n "$n" -- "$f"
done
for f in "$d"/ranks/*; do
  r="${f##*/}"
  case "$r" in ''|*[!0-9]*) continue ;; esac
  awk -v r="$r" '$1 == "start" && NF >= 3 { n = $3 } END { if (n != "") print "@node", r, n }' "$f"
done
exit 0
"""


def usage_argv(jobdir: str, max_lines: int) -> list[str]:
    """The job's usage series, the last ``max_lines`` lines of each file (one command)."""
    return [*BASH, USAGE_SH, "jt-usage", jobdir, str(int(max_lines))]


# Stacks (batch/stacks.py): the request is one file in the job directory, which every rank's
# shim looks at; the answers come back in one read. Neither asks the scheduler.
STACKS_ASK_SH = r"""d="$1/stacks"; id="$2"
mkdir -p -- "$d" && printf '%s\n' "$id" > "$d/.request.$$" && mv -f -- "$d/.request.$$" "$d/request"
"""
STACKS_READ_SH = r"""d="$1"; n="$2"
for f in "$d"/stacks/[0-9]*; do
  [ -f "$f" ] || continue
  printf '@@ %s\n' "${f##*/}"
  tail -c "$n" -- "$f"
  printf '\n'
done
c="$d/cell.py"
[ -f "$c" ] || c="$d/main.py"
printf '@@cell\n'
head -c "$n" -- "$c" 2>/dev/null
exit 0
"""


def stacks_ask_argv(jobdir: str, rid: str) -> list[str]:
    """Ask every rank of the job for its stacks (the request file)."""
    return [*BASH, STACKS_ASK_SH, "jt-stacks-ask", jobdir, check_request_id(rid)]


def stacks_read_argv(jobdir: str) -> list[str]:
    """The ranks' answers and the cell's file, in one command."""
    return [*BASH, STACKS_READ_SH, "jt-stacks", jobdir, str(MAX_ANSWER_BYTES)]


def cancel_argv(job_id: str, signal: str | None = None) -> list[str]:
    argv = ["scancel"]
    if signal:
        if not re.fullmatch(r"[A-Z0-9]{1,16}", signal):
            raise SpecError("signal", f"{signal!r} is not a signal name")
        argv += ["--signal", signal]
    return slurm_argv(*argv, check_job_id(job_id))


# What scancel says of a job that has nothing left to cancel (ended, or forgotten by the
# controller): cancelling it is a no-op. Slurm 22.05 exits 0 for these unless asked to be verbose.
_SCANCEL_NOTHING_TO_DO = ("Job/step already completing or completed", "Invalid job id specified")


def scancel_refusal(exit_status: int, stderr: str) -> str | None:
    """Why scancel refused (its error lines, e.g. ``Kill job error on job id 12:
    Access/permission denied``), or None when it cancelled or there was nothing to cancel."""
    if exit_status == 0:
        return None
    errors = []
    for line in stderr.splitlines():
        text = line.strip()
        if text.startswith("scancel: "):
            text = text[len("scancel: "):]
        if text.startswith("error: "):
            text = text[len("error: "):]
        if text and not any(known in text for known in _SCANCEL_NOTHING_TO_DO):
            errors.append(text[:300])
    if errors:
        return "; ".join(errors[:5])
    if stderr.strip():  # only "nothing to cancel" lines
        return None
    return f"scancel exited with status {exit_status} and said nothing"


def log_path(jobdir: str) -> str:
    return f"{jobdir}/{LOG_NAME}"


def follow_argv(jobdir: str, offset: int) -> list[str]:
    return [*BASH, FOLLOW_SH, "jt-follow", log_path(jobdir), str(offset + 1), COALESCE_PL]


def read_log_argv(jobdir: str, offset: int) -> list[str]:
    return [*BASH, READ_SH, "jt-read", log_path(jobdir), str(offset + 1)]


TAIL_SH = r"""[ -e "$1" ] || exit 0
tail -n "$2" -- "$1"
"""


def tail_log_argv(jobdir: str, lines: int) -> list[str]:
    return [*BASH, TAIL_SH, "jt-tail", log_path(jobdir), str(int(lines))]


def log_size_argv(jobdir: str) -> list[str]:
    return [*BASH, 'stat -c %s -- "$1" 2>/dev/null || echo 0', "jt-size", log_path(jobdir)]


def grep_rank_argv(jobdir: str, rank: int, tail: int | None) -> list[str]:
    count = "+1" if tail is None else str(int(tail))
    return [*BASH, GREP_RANK_SH, "jt-grep", log_path(jobdir), str(int(rank)), count]



# "$1" the job's python (~/ expanded here), "$2" the uploader's text (checkpoint_upload.py). A
# python that is not there is one @@jt-upload error line, as the uploader's own refusals are.
UPLOAD_SH = (
    'p=$1; case $p in "~/"*) p=$HOME/${p#"~/"};; esac; '
    'if ! command -v "$p" >/dev/null 2>&1; then '
    'echo "@@jt-upload error python $1 not found on $(hostname) (the job\'s python:'
    ' --python or defaults.python)"; exit 3; fi; exec "$p" -c "$2"'
)


def upload_argv(python: str, source: str) -> list[str]:
    """Run the checkpoint uploader with ``python`` on the login node (request on stdin)."""
    return [*BASH, UPLOAD_SH, "jt-upload", python, source]
