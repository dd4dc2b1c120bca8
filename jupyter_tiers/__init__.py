"""jupyter-tiers: train on Slurm and serve on Kubernetes from one notebook.

``%load_ext jupyter_tiers`` adds the ``%%slurm_train`` and ``%tiers`` magics. Underneath is a plain
Python API::

    from jupyter_tiers import connect
    hpc = connect("hpc")                 # a tier from a profile in tiers.yaml
    job = hpc.submit(hpc.make_spec("print('hi')", nodes=2))
    job.status(); job.logs(rank=1); job.wait(); job.cancel()

Heavy dependencies (paramiko, kubernetes, ipywidgets) are imported only when used.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from typing import TYPE_CHECKING, Any

from .core.model import WorkKind  # plain data, no I/O: cheap to import with the package

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .engine.tier import BatchTier, ServeTier, Tier

__all__ = ["WorkKind", "__version__", "connect", "connect_batch", "connect_serve", "load_ipython_extension"]


#: The documented modules' names before the package moved into folders (0.1.x), and where each
#: lives now. Importing an old name gives the module at its new place, with a DeprecationWarning.
MOVED_MODULES = {
    "model": "core.model", "errors": "core.errors", "tier": "engine.tier",
    "handles": "engine.handles", "array_job": "engine.array_job",
    "subscription": "engine.subscription", "service": "app.actions", "magics": "faces.magics",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A meta path finder and loader for :data:`MOVED_MODULES` (``jupyter_tiers.model`` is
    ``jupyter_tiers.core.model``: the same module object, not a copy)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        prefix, _, leaf = fullname.partition(".")
        if prefix != __name__ or leaf not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: Any) -> Any:
        new = f"{__name__}.{MOVED_MODULES[spec.name.partition('.')[2]]}"
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning,
                      stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: Any) -> None:
        """Nothing to run: the module at its new place has run already."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def connect(profile: str | None = None, kind: WorkKind | str = WorkKind.JOB) -> Tier:
    """The tier of a profile (cached: one connection and one watcher per profile) for a kind of
    work: ``WorkKind.JOB`` (training jobs) or ``WorkKind.SERVICE`` (services; a local profile does
    both). The strings ``"job"``/``"service"`` and the older ``"batch"``/``"serve"`` work too."""
    # lazy: keeps `import jupyter_tiers` (and every submodule import) to 2 modules
    from .api import connect as _connect

    return _connect(profile, kind=kind)


def connect_batch(profile: str | None = None) -> BatchTier:
    """``connect(profile)`` typed as the training tier it is (a Kubernetes profile is an error)."""
    # lazy: keeps `import jupyter_tiers` (and every submodule import) to 2 modules
    from .api import connect_batch as _connect_batch

    return _connect_batch(profile)


def connect_serve(profile: str | None = None) -> ServeTier:
    """``connect(profile, "serve")`` typed as the serving tier it is (a Slurm profile is an error)."""
    # lazy: keeps `import jupyter_tiers` (and every submodule import) to 2 modules
    from .api import connect_serve as _connect_serve

    return _connect_serve(profile)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_tiers``: registers the magics."""
    # lazy: magics loads IPython/traitlets; only %load_ext needs it
    from .faces.magics import load_ipython_extension as _load

    _load(ipython)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """The jupyter-server extension (the Tiers sidebar's REST API and shared watcher)."""
    return [{"module": "jupyter_tiers.faces.server"}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt "Tiers" sidebar is (``jupyter labextension develop`` links it)."""
    return [{"src": "labextension", "dest": "jupyter-tiers"}]
