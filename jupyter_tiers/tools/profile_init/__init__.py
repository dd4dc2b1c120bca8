"""``jupyter tiers init`` (also ``%tiers init``): write a profile into ``~/.jupyter/tiers.yaml``
from what this machine already knows.

Layout: :mod:`.discover` reads ``~/.ssh/config``, known_hosts and the kubeconfig (pure readers
of their text); :mod:`.plan` turns what was found and the flags into questions and a profile
(pure); :mod:`.yamlfile` renders the profile and adds it to an existing file's text, keeping its
comments and order (pure, verified by loading the result); :mod:`.command` does the I/O
(prompts, files, ``sinfo`` over SSH, the doctor).
"""

from __future__ import annotations

from .command import InitError, add_arguments, run_init

__all__ = ["InitError", "add_arguments", "run_init"]
