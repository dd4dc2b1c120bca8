"""Issue 36, item 7 (the hub's proxy): configurable-http-proxy is installed as root with ``npm ci``
from the committed package.json and package-lock.json (every transitive version and integrity hash
pinned, no install scripts), not ``npm install NAME@VERSION`` whose dependencies float; an install
that is the lockfile's is kept, not fetched again. npm itself never runs here: subprocess.run is
replaced by a recorder that lays out what npm ci would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.tools.sandbox import hub


def test_the_committed_lockfile_pins_the_proxy_and_everything_below_it() -> None:
    package = json.loads((hub.PROXY_PROJECT / "package.json").read_text())
    lock = json.loads((hub.PROXY_PROJECT / "package-lock.json").read_text())
    assert package["dependencies"] == {hub.PROXY_PACKAGE: hub.PROXY_VERSION}  # an exact version
    assert lock["packages"][""]["dependencies"] == package["dependencies"]
    assert lock["packages"][f"node_modules/{hub.PROXY_PACKAGE}"]["version"] == hub.PROXY_VERSION
    entries = {k: v for k, v in lock["packages"].items() if k}
    assert len(entries) > 10  # the transitive dependencies are in it too
    for name, entry in entries.items():
        assert entry["integrity"].startswith("sha512-"), name
        assert entry["resolved"].startswith("https://registry.npmjs.org/"), name
        assert not entry.get("hasInstallScript"), f"{name} has an install script (--ignore-scripts)"


@pytest.fixture
def npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """npm and node on PATH as empty files; each npm run recorded and 'installing' the proxy."""
    calls: list[list[str]] = []
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("npm", "node"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(hub, "_NPM_PATH", "")

    def run(argv: list[str], **kw: Any) -> Any:
        calls.append(list(argv))
        prefix = Path(argv[argv.index("--prefix") + 1])
        assert all((prefix / name).is_file() for name in hub.PROXY_FILES), "npm ci without the lockfile"
        package = prefix / "node_modules" / hub.PROXY_PACKAGE
        package.mkdir(parents=True, exist_ok=True)
        (package / "package.json").write_text(json.dumps({"version": hub.PROXY_VERSION}))
        (prefix / "node_modules" / ".bin").mkdir(exist_ok=True)
        (prefix / "node_modules" / ".bin" / hub.PROXY_PACKAGE).write_text("")

        class Done:
            returncode, stdout, stderr = 0, "", ""
        return Done()

    monkeypatch.setattr(hub.subprocess, "run", run)
    return calls


def test_the_proxy_is_installed_with_npm_ci_from_the_lockfile_once(npm: list[list[str]],
                                                                   tmp_path: Path) -> None:
    target = tmp_path / "proxy"
    found = hub.ensure_proxy(target, say=lambda line: None)
    assert found == target / "node_modules" / ".bin" / hub.PROXY_PACKAGE
    assert len(npm) == 1
    argv = npm[0]
    assert argv[1] == "ci" and "--ignore-scripts" in argv and "install" not in argv
    assert not any(word.startswith(f"{hub.PROXY_PACKAGE}@") for word in argv)  # no floating spec
    for name in hub.PROXY_FILES:
        assert (target / name).read_bytes() == (hub.PROXY_PROJECT / name).read_bytes()
    assert hub.ensure_proxy(target, say=lambda line: None) == found
    assert len(npm) == 1  # kept: not fetched again


def test_an_install_without_the_lockfile_is_redone_with_it(npm: list[list[str]], tmp_path: Path) -> None:
    """An older hub's proxy (npm install of the same version, no lockfile) is installed once
    more with npm ci; so is one whose lockfile is not this package's."""
    target = tmp_path / "proxy"
    package = target / "node_modules" / hub.PROXY_PACKAGE
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"version": hub.PROXY_VERSION}))
    (target / "node_modules" / ".bin").mkdir()
    (target / "node_modules" / ".bin" / hub.PROXY_PACKAGE).write_text("")
    hub.ensure_proxy(target, say=lambda line: None)
    assert len(npm) == 1 and npm[0][1] == "ci"
    (target / "package-lock.json").write_text("{}")
    hub.ensure_proxy(target, say=lambda line: None)
    assert len(npm) == 2
    lock = "package-lock.json"
    assert (target / lock).read_bytes() == (hub.PROXY_PROJECT / lock).read_bytes()
