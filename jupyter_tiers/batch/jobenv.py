"""Pure: the Slurm job this process runs inside, and a clean environment for the Slurm commands
it runs on this machine (a job it submits must not inherit that allocation).

When Jupyter runs as a Slurm job (Open OnDemand's Jupyter app, JupyterHub with batchspawner), the
kernel's environment carries the enclosing job's variables. Passed on to ``sbatch``, they break
the new job in well-known ways: ``SLURM_MEM_PER_CPU`` and a new ``--mem`` are "mutually
exclusive", an inherited ``SLURM_CPUS_PER_TASK`` is "set by two different environment
variables", an inherited ``SLURM_CPU_BIND`` pins every rank to the old job's cores, and
``SLURM_JOB_ID`` names the parent. :func:`clean_env` drops them all and keeps what the site set
up (``SLURM_CONF``, ``PATH``, environment modules).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core.errors import OwnJob

#: Prefixes of the enclosing job's variables (Slurm's, its launchers', PMI's).
JOB_PREFIXES = ("SLURM_", "SLURMD_", "SRUN_", "SALLOC_", "PMI_", "PMIX_")
#: The job's torch.distributed rendezvous (set by the notebook's own launcher, if any).
TORCH_NAMES = frozenset({"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                         "LOCAL_WORLD_SIZE"})
#: Kept although they match a prefix above: the site's configuration, not the job's.
SITE_NAMES = frozenset({"SLURM_CONF"})
SBATCH_PREFIX = "SBATCH_"


@dataclass(frozen=True)
class EnclosingJob:
    """The Slurm job this process runs in: its id (an array task as ``ID_TASK``), the node, and
    the job's name when Slurm gave it."""

    job_id: str
    node: str | None = None
    name: str | None = None
    #: ``SLURM_JOB_ID`` itself when it differs from ``job_id`` (an array task runs as its own id).
    raw_id: str | None = None
    #: When the job started (``SLURM_JOB_START_TIME``, Slurm 23.02 on), epoch seconds.
    start_time: int | None = None

    def ids(self) -> frozenset[str]:
        """Every id that names this job to scancel: its own, an array task's raw id, and the
        array's (cancelling the whole array ends this task too)."""
        out = {self.job_id, self.job_id.split("_", 1)[0]}
        if self.raw_id:
            out.add(self.raw_id)
        return frozenset(out)

    def refusal(self, job_id: str) -> str:
        """Why ``job_id`` (one of :meth:`ids`) is not cancelled from this notebook."""
        whose = "" if job_id == self.job_id else f" (it holds Slurm job {self.job_id})"
        where = f" on node {self.node}" if self.node else ""
        return (f"job {job_id}{whose} is the Slurm job this notebook runs inside{where}: "
                "cancelling it would stop this JupyterLab and its kernels, so jupyter-tiers never "
                "does; end it from the portal that started it (Open OnDemand's Delete, "
                "JupyterHub's Stop My Server) or with scancel in a terminal")

    def sentence(self) -> str:
        """One line for the widget and ``%tiers jobs``."""
        where = f" on node {self.node}" if self.node else ""
        return (f"this notebook runs inside Slurm job {self.job_id}{where}; jobs it submits start "
                "clean (none of that job's SLURM_* variables)")


def enclosing_job(environ: Mapping[str, str]) -> EnclosingJob | None:
    """The job ``environ`` belongs to (``SLURM_JOB_ID``, or ``SLURM_JOBID`` of older Slurm), or
    None outside a job. An array task is named ``ARRAYID_TASK``, as squeue shows it."""
    job_id = (environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID") or "").strip()
    if not job_id.isdigit():
        return None
    array, task = environ.get("SLURM_ARRAY_JOB_ID", ""), environ.get("SLURM_ARRAY_TASK_ID", "")
    if array.isdigit() and task.isdigit():
        job_id = f"{array}_{task}"
    raw = (environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID") or "").strip()
    node = environ.get("SLURMD_NODENAME") or environ.get("SLURM_NODENAME") or None
    start = environ.get("SLURM_JOB_START_TIME", "").strip()
    return EnclosingJob(job_id=job_id, node=node, name=environ.get("SLURM_JOB_NAME") or None,
                        raw_id=raw if raw != job_id else None,
                        start_time=int(start) if start.isdigit() else None)


def refuse_own_job(job_id: str, environ: Mapping[str, str]) -> None:
    """Raise :class:`~jupyter_tiers.core.errors.OwnJob` when ``job_id`` names the job
    ``environ`` runs inside (or its array). Only for this machine's Slurm (a profile without
    ``host``): over SSH the same number may be another cluster's job."""
    job = enclosing_job(environ)
    if job is not None and job_id.strip() in job.ids():
        raise OwnJob(job.refusal(job_id.strip()))


def _of_the_job(name: str) -> bool:
    if name in SITE_NAMES:
        return False
    return name in TORCH_NAMES or name.startswith(JOB_PREFIXES)


def clean_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A new environment for a Slurm command run on this machine: ``environ`` without the
    enclosing job's variables (:data:`JOB_PREFIXES`, :data:`TORCH_NAMES`; ``SLURM_CONF`` stays).

    ``SBATCH_*`` variables inside a job came with the job (the portal that started Jupyter set
    them for it): dropped. Outside a job they are the site's or the user's (``SBATCH_ACCOUNT``
    from a module) and stay: an option the magic line sets is a command-line option of sbatch,
    which beats them. No profile's ``env`` is added: a profile's options reach sbatch as
    command-line options (config refuses ``SBATCH_*`` and Slurm's other names in a profile's
    ``env``). ``environ`` itself is never changed.
    """
    inside = enclosing_job(environ) is not None
    return {k: v for k, v in environ.items()
            if not _of_the_job(k) and not (inside and k.startswith(SBATCH_PREFIX))}
