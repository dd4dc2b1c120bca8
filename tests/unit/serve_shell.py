"""An IPython shell with the extension loaded and a kubernetes profile ``k`` whose API server
port is closed: ``--dry-run`` renders without a cluster, and anything that would reach the API
fails at once instead of changing a cluster."""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

from jupyter_tiers import api, config

PROFILE_SECRET = "profile-secret-9f3a7c"  # the profile's env value; must never be shown


def closed_port() -> int:
    """A local port nothing listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
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
    shell = start_ipython() or InteractiveShell.instance()  # start_ipython gives None once started
    shell.run_line_magic("load_ext", "jupyter_tiers")
    yield shell
    api.close_all()
