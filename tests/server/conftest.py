"""Fixtures of the server extension's tests: pytest-jupyter's server with jupyter_tiers loaded,
an isolated tiers.yaml and registry, and JupyterServerAuthWarning turned into a failure."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

# pytest-jupyter's fixtures and its coroutine-test hooks, for the tests in this folder only (a
# non-root conftest may not declare pytest_plugins).
from pytest_jupyter.jupyter_server import *  # noqa: F403

from jupyter_tiers import api
from jupyter_tiers.config import profiles as config

AUTH_WARNING = "error::jupyter_server.utils.JupyterServerAuthWarning"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.filterwarnings(AUTH_WARNING))


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    # allow_unauthenticated_access defaults to True, and then jupyter_server does not warn about
    # an undecorated extension handler at all; False makes it warn (an error here, see above).
    return {"ServerApp": {"jpserver_extensions": {"jupyter_tiers": True},
                          "allow_unauthenticated_access": False}}


@pytest.fixture
def tiers_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, Any]], Path]:
    """Write the only tiers.yaml the server sees: ``write({"default_profile": ..., "profiles": ...})``."""
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    path = tmp_path / "tiers.yaml"
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))

    def write(data: dict[str, Any]) -> Path:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    write({"profiles": {}})
    return write


@pytest.fixture(autouse=True)
def _close_tiers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test with a server: its hub stopped and every cached tier closed."""
    app = request.getfixturevalue("jp_serverapp") if "jp_serverapp" in request.fixturenames else None
    yield
    if app is not None:
        hub = app.web_app.settings.get("jupyter_tiers_hub")
        if hub is not None:
            hub.stop()
    api.close_all()
