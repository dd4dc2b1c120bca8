"""The magics on a stand-in shell, with a kubernetes profile ``k`` whose API server port is
closed: ``--dry-run`` renders without a cluster, and anything that would reach the API fails at
once instead of changing a cluster.

The stand-in (a notebook namespace and the two ways IPython calls a magic) leaves IPython's
global test shell alone: ``globalipapp.get_ipython()`` gives it only to its first caller."""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers import api
from jupyter_tiers.config import profiles as config
from jupyter_tiers.faces.magics import TiersMagics

PROFILE_SECRET = "profile-secret-9f3a7c"  # the profile's env value; must never be shown


def closed_port() -> int:
    """A local port nothing listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Shell:
    """What the magics use of IPython's shell: ``user_ns``; and how IPython calls them."""

    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {}
        self.magics = TiersMagics(shell=self)  # type: ignore[arg-type]

    def run_cell_magic(self, name: str, line: str, cell: str) -> Any:
        return getattr(self.magics, name)(line, cell)

    def run_line_magic(self, name: str, line: str) -> Any:
        return getattr(self.magics, name)(line)


@pytest.fixture
def serve_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Shell]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(textwrap.dedent(f"""\
        apiVersion: v1
        kind: Config
        clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{closed_port()}"}}}}]
        users: [{{name: u, user: {{token: not-a-real-token}}}}]
        contexts: [{{name: x, context: {{cluster: c, user: u, namespace: demo}}}}]
        current-context: x
        """))
    tiers_yaml = tmp_path / "tiers.yaml"
    tiers_yaml.write_text(textwrap.dedent(f"""\
        default_profile: k
        profiles:
          k:
            tier: kubernetes
            kubeconfig: {kubeconfig}
            namespace: demo
            request_timeout: 1
            defaults: {{image: "python:3.11-slim"}}
            env: {{PROFILE_TOKEN: "{PROFILE_SECRET}"}}
        """))
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tiers_yaml))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_TIERS_DISPLAY", "text")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    yield Shell()
    api.close_all()
