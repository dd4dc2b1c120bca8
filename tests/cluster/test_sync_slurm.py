"""Issue 16 §4 on the real cluster: --sync sends the notebook's directory over the real SSH
transport; the ranks (2 nodes) import a module beside the notebook; an unchanged tree costs one
round trip and no file bytes (counted at the transport); a changed module is sent alone and the
next job sees it while the earlier job's snapshot keeps the old one; ignore rules hold there."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.data.sync import build_manifest, format_manifest
from jupyter_tiers.slurm.tier import SlurmTier

pytestmark = pytest.mark.cluster

BODY = """\
import os, mymodel
print("value", mymodel.VALUE, "conf", open("conf/run.txt").read().strip(), "cwd", os.getcwd())
print("ignored-present", os.path.exists("secret.key"))
"""


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    nb = tmp_path / "nb"
    (nb / "conf").mkdir(parents=True)
    (nb / "mymodel.py").write_text("VALUE = 'first'\n")
    (nb / "conf/run.txt").write_text("lr=0.1\n")
    (nb / ".tiersignore").write_text("*.key\n")
    (nb / "secret.key").write_text("never leaves\n")
    monkeypatch.chdir(nb)
    return nb


@pytest.fixture
def counted(box: SlurmTier, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """Every transport.run of the test: (program name, stdin bytes)."""
    calls: list[tuple[str, int]] = []
    real = box.transport.run

    def run(argv: Any, **kw: Any) -> Any:
        argv = list(argv)
        calls.append((argv[5] if argv[:1] == ["bash"] and len(argv) > 5 else argv[0],
                      len(kw.get("stdin") or b"")))
        return real(argv, **kw)

    monkeypatch.setattr(box.transport, "run", run)
    yield calls


def rank_lines(job: Any) -> list[str]:
    status = job.wait(timeout=300)
    log = job.logs()
    assert status.state is JobState.COMPLETED, log
    return log.splitlines()


def test_synced_module_on_two_nodes(box: SlurmTier, notebook: Path, counted: list[tuple[str, int]],
                                    request: pytest.FixtureRequest) -> None:
    name = f"sync-{secrets.token_hex(3)}"
    request.addfinalizer(lambda: box.transport.run(
        ["rm", "-rf", "--", f"{box.profile.workdir}/.sync/{name}"], check=False))
    spec = box.make_spec(BODY, name=name, nodes=2, sync=["."])
    job1 = box.submit(spec)
    assert [c[0] for c in counted[:3]] == ["jt-sync-check", "jt-sync-apply", "jt-submit"]
    lines = rank_lines(job1)
    for rank in (0, 1):
        line = next(x for x in lines if x.startswith(f"{rank}: value"))
        assert f"{rank}: value first conf lr=0.1 cwd " in line and f"/.sync/{name}/snap/" in line
    assert "0: ignored-present False" in lines

    # Unchanged: one round trip carrying only the manifest, then the submit.
    manifest_bytes = len(format_manifest(build_manifest(notebook)[0]).encode())
    counted.clear()
    outcome = box.sync(spec)
    assert outcome.round_trips == 1 and outcome.sent_files == ()
    assert counted == [("jt-sync-check", manifest_bytes)]

    # One changed module: sent alone; the next job sees it, the first job's snapshot does not.
    (notebook / "mymodel.py").write_text("VALUE = 'second'\n")
    counted.clear()
    job2 = box.submit(spec)
    assert [c[0] for c in counted[:3]] == ["jt-sync-check", "jt-sync-apply", "jt-submit"]
    assert counted[1][1] < 3 * manifest_bytes + 16 * 1024  # a tar of 3 manifests and 1 file
    assert any(x.startswith("0: value second ") for x in rank_lines(job2))
    first_snapshot = next(x for x in lines if x.startswith("0: value")).rsplit("cwd ", 1)[1]
    check = box.transport.run(["cat", f"{first_snapshot}/mymodel.py"])
    assert check.text() == "VALUE = 'first'\n"


def test_size_refusal_before_any_round_trip(box: SlurmTier, notebook: Path,
                                            counted: list[tuple[str, int]]) -> None:
    (notebook / "weights.bin").write_bytes(b"\0" * 1_200_000)
    from dataclasses import replace

    from jupyter_tiers.data.sync import SyncError

    box.profile = replace(box.profile, settings={**box.profile.settings, "sync_max_mb": 1})
    with pytest.raises(SyncError, match=r"over the 1 MB limit .*weights\.bin \(1\.2 MB\)"):
        box.submit(box.make_spec(BODY, name="sync-big", sync=["."]))
    assert counted == []


def test_magic_sync_on_slurm(tiers_yaml: Path, notebook: Path, capsys: pytest.CaptureFixture[str],
                             cluster_env: dict[str, str]) -> None:
    """The user's path: %%slurm_train --sync . --profile box, then the job imports the module."""
    from jupyter_tiers import api
    from jupyter_tiers.config.registry import Registry
    from tests.helpers import tiers_shell

    ip = tiers_shell()
    name = f"sync-magic-{secrets.token_hex(3)}"
    try:
        ip.run_cell_magic("slurm_train", f"--profile box --sync . --name {name} --wait --text", BODY)
        out = capsys.readouterr().out
        assert "COMPLETED" in out, out
        rec = Registry().list(limit=1)[0]
        tier = api.connect("box")
        log = tier.read_log(rec).decode()
        assert "0: value first conf lr=0.1 cwd " in log and "0: ignored-present False" in log
    finally:
        tier = api.connect("box")
        tier.transport.run(["rm", "-rf", "--", f"{tier.profile.workdir}/.sync/{name}"], check=False)
        api.close_all()
