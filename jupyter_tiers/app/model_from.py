"""``--model-from``: where a serving cell's model comes from, as one verb of the service layer.

``REF`` is a training job (``51``, ``hpc/51``, a name, a notebook variable holding a Job), a
sweep's task or whole array (task_handoff.py), or an ``s3://`` URI. The verb finds the job's
newest checkpoint and how the serving tier reaches it (a shared path, or the object store's
copy), and for a model in the object store either lets the serving tier fetch it in the pod
(a tier whose ``fetches_models`` is true: Kubernetes' init container) or brings it into this
machine's model cache (the local tier). The magic (and any other face) applies the
:class:`ModelChoice` to its options and prints the lines it was given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..data import handoff
from ..data.checkpoint_upload import store_of
from ..data.handoff import HandoffError
from ..data.model_cache import check_model, fetch_model, plan_model
from ..data.objectstore import parse_uri
from . import task_handoff

if TYPE_CHECKING:
    from ..config.registry import JobRecord
    from ..engine.tier import BatchTier, ServeTier


@dataclass(frozen=True)
class ModelChoice:
    """Where the served model is: ``path`` as the server sees it (what ``{model_path}`` in the
    cell becomes), ``source`` for the views ("hpc/51 (train)" or the URI), and ``uri`` when the
    serving tier fetches it itself (the spec's ``model_uri``)."""

    path: str
    source: str
    uri: str | None = None

    def options(self) -> dict[str, Any]:
        """The spec options this choice sets (``model_path``, ``model_source``, ``model_uri``)."""
        given: dict[str, Any] = {"model_path": self.path, "model_source": self.source}
        if self.uri is not None:
            given["model_uri"] = self.uri
        return given

    def fill(self, cell: str) -> str:
        """The cell's body with ``{model_path}`` filled in."""
        return handoff.substitute_model_path(cell, self.path)


def choose_model(ref: str, tier: ServeTier, user_ns: Mapping[str, Any] | None,
                 connect: Callable[[str], Any], connect_batch: Callable[[str], BatchTier], *,
                 dry_run: bool = False, say: Callable[[str], None] = print) -> ModelChoice:
    """Resolve ``--model-from REF`` for ``tier``. ``connect``/``connect_batch`` open the training
    side's tiers (the api's); ``say`` gets the lines the cell shows first (which task and why, the
    store check, the cache's download). ``dry_run`` downloads nothing. HandoffError or
    FetchError (both one line starting with --model-from) when the model cannot be served."""
    if ref.startswith("s3://"):  # a model in the object store, trained anywhere
        return _from_store(ref, ref, tier, dry_run=dry_run, say=say)

    def refresh(record: JobRecord) -> None:
        connect(record.profile).refresh([record])

    # A sweep's task (51_7, NAME_7, a task handle) or a whole array (its best task), else a job.
    resolved = task_handoff.resolve(ref, tier.registry, user_ns, connect_batch, refresh=refresh)
    ckpt = resolved.checkpoint
    path, uri = handoff.serving_model(ckpt, tier.profile)
    if resolved.line:  # the cell's first line: which task, and why
        say(resolved.line)
    if uri is not None:
        return _from_store(uri, ckpt.source, tier, dry_run=dry_run, say=say)
    return ModelChoice(path=str(path), source=ckpt.source)


def _from_store(uri: str, source: str, tier: ServeTier, *, dry_run: bool,
                say: Callable[[str], None]) -> ModelChoice:
    """A model in the object store: a tier that fetches models itself gets the URI (after a
    check from this kernel when it has credentials of its own: a missing key is refused before
    anything is created); otherwise it is downloaded into the model cache (nothing if cached;
    ``dry_run`` says what would be, and downloads nothing)."""
    try:
        parse_uri(uri)
    except ValueError as exc:
        raise HandoffError(f"--model-from {exc}") from None
    store = store_of(tier.profile)
    if tier.fetches_models:
        inside = handoff.fetched_model_path(uri)  # validates the URI first
        check = check_model(uri, store)
        if dry_run:
            say(f"# --model-from {check.line}")
        return ModelChoice(path=inside, source=source, uri=uri)
    if dry_run:
        plan = plan_model(uri, store)
        say(f"# {plan.line}")
        return ModelChoice(path=str(plan.target), source=source)
    local, downloaded = fetch_model(uri, store)
    say(f"model {uri} {'downloaded to' if downloaded else 'cached at'} {local}")
    return ModelChoice(path=str(local), source=source)
