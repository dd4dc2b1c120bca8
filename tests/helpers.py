"""Small helpers shared by several test folders."""

from __future__ import annotations

import contextlib
from typing import Any

from jupyter_tiers import api
from jupyter_tiers.registry import Registry


def cancel_registered_jobs() -> None:
    """Leave no job running and no cached tier behind: cancel (best effort) every job the
    current registry knows, then close every cached tier (a cached tier keeps its registry)."""
    with contextlib.suppress(Exception):
        for rec in Registry().list(limit=1000):
            with contextlib.suppress(Exception):
                api.connect(rec.profile).cancel(rec)
    api.close_all()


def ipython_test_shell() -> Any:
    """IPython's global test shell, for every test module that asks (``globalipapp.get_ipython()``
    hands it only to its first caller in a process and None after that)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    return shell if shell is not None else InteractiveShell.instance()


def drop_connection(transport: Any) -> None:
    """Abruptly cut an SSHTransport's socket, without any SSH goodbye (a dropped link)."""
    conn = transport._conn
    if conn is not None:
        conn.drop()
