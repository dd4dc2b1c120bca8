"""Pure: why a job waits, in words, and the waits that never end.

Slurm names a pending job's reason in one CamelCase word (``Resources``, ``PartitionNodeLimit``).
Most of them pass; some mean the job can never start as submitted (more nodes than the partition
has, a time over its limit, a dependency that failed), and a researcher who sees 40 grey cells and
``PENDING (PartitionNodeLimit)`` waits for hours. :func:`pending_words` says which, with what to
change; sbatch's own refusals at submit get the same treatment in :func:`submit_words`.
"""

from __future__ import annotations

__all__ = ["NEVER", "explained_reason", "pending_words", "submit_words"]

#: The prefix of a reason that will not pass by waiting.
NEVER = "can never start as submitted"

# Reason -> (never starts, what it means and what to do).
_REASONS: dict[str, tuple[bool, str]] = {
    "PartitionNodeLimit": (True, "it asks for more nodes than the partition allows; lower --nodes or "
                                 "choose a larger partition"),
    "PartitionTimeLimit": (True, "its --time is over the partition's limit; lower --time or choose "
                                 "another partition"),
    "PartitionDown": (False, "the partition is down; it starts when an admin brings it back"),
    "PartitionInactive": (False, "the partition is inactive; it starts when an admin activates it"),
    "DependencyNeverSatisfied": (True, "a job it depends on ended in a way the dependency excludes; "
                                       "cancel it"),
    "BadConstraints": (True, "no node has the features --constraint asks for; change --constraint"),
    "InvalidQOS": (True, "the QOS is not one the account may use; change --qos"),
    "InvalidAccount": (True, "the account is not one you may use; change --account"),
    "QOSMaxNodePerJobLimit": (True, "it asks for more nodes than the QOS allows one job; lower --nodes"),
    "QOSMaxWallDurationPerJobLimit": (True, "its --time is over the QOS's limit; lower --time"),
    "AssocMaxNodesPerJobLimit": (True, "it asks for more nodes than your account allows one job; "
                                       "lower --nodes"),
    "AssocMaxWallDurationPerJobLimit": (True, "its --time is over your account's limit; lower --time"),
    "Resources": (False, "waiting for nodes to free up"),
    "Priority": (False, "other jobs are ahead of it in the queue"),
    "Dependency": (False, "waiting for a job it depends on"),
    "BeginTime": (False, "it may not start before its begin time"),
    "JobHeldUser": (False, "held by you (scontrol release ID lets it go)"),
    "JobHeldAdmin": (False, "held by an admin"),
    "ReqNodeNotAvail": (False, "a node it needs is down, drained or reserved"),
    "Reservation": (False, "waiting for its reservation to begin"),
    "NodeDown": (False, "a node it needs is down"),
    "QOSGrpCpuLimit": (False, "your QOS's group is using its CPU limit; it starts when they finish"),
    "QOSGrpNodeLimit": (False, "your QOS's group is using its node limit; it starts when they finish"),
    "AssocGrpCpuLimit": (False, "your account's group is using its CPU limit; it starts when they "
                                "finish"),
    "AssocGrpNodeLimit": (False, "your account's group is using its node limit; it starts when "
                                 "they finish"),
    "AssocGrpGRES": (False, "your account's group is using its GPU limit; it starts when they finish"),
    "launch failed requeued held": (False, "its launch failed and Slurm held it: scontrol release ID "
                                           "tries again"),
}


#: Reasons every queue shows all day: their word is enough.
_EVERYDAY = frozenset({"Resources", "Priority", "None"})


def pending_words(reason: str | None) -> str | None:
    """What a pending reason means, ``can never start as submitted: ...`` for those that do not
    pass by waiting; None for a reason not known here (shown as Slurm says it)."""
    if not reason:
        return None
    found = _REASONS.get(reason.strip())
    if found is None:
        return None
    never, words = found
    return f"{NEVER}: {words}" if never else words


def explained_reason(state: str, reason: str | None) -> str:
    """``reason`` as a view shows it for a job in ``state``: a pending reason with its words
    (``PartitionNodeLimit — can never start as submitted: ...``), the everyday ones (Resources,
    Priority: every queue's) and any other reason as it is."""
    text = (reason or "").strip()
    if state not in ("PENDING", "CONFIGURING", "REQUEUED") or text in _EVERYDAY:
        return text
    words = pending_words(text)
    return f"{text} — {words}" if words else text


# sbatch's refusals at submit (its stderr) -> what it means for the user.
_SUBMIT = (
    ("Invalid generic resource (gres) specification",
     "this cluster has no GPUs of that kind (no node offers that gres): drop --gpus-per-node/--gpus, "
     "or use the profile of a GPU partition"),
    ("Requested node configuration is not available",
     "no node of the partition has what one node is asked for (CPUs, memory, GPUs or --constraint "
     "per node): ask less per node, or choose another partition"),
    ("Node count specification invalid",
     "the partition does not have that many nodes: lower --nodes"),
    ("Requested time limit is invalid",
     "the time is over the partition's limit: lower --time"),
    ("Invalid account or account/partition combination specified",
     "the account may not use that partition: change --account or --partition"),
    ("Invalid qos specification", "the QOS is not one the account may use: change --qos"),
    ("invalid partition specified", "there is no such partition: check --partition (sinfo lists them)"),
)


def submit_words(stderr: str) -> str | None:
    """What sbatch's refusal means, or None when it is not one known here."""
    return next((words for needle, words in _SUBMIT if needle in stderr), None)
