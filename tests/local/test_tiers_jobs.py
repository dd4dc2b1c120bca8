"""`%tiers jobs` shows current states, not the last ones some watcher happened to record."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from jupyter_tiers import api
from jupyter_tiers.faces import tiers_command


@pytest.mark.local_procs
def test_jobs_listing_refreshes_unfinished_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tmp_path / "tiers.yaml"))
    (tmp_path / "tiers.yaml").write_text("profiles: {}\n")
    tier = api.connect("local")
    try:
        job = tier.submit(tier.make_spec("print('quick')", name="quick"))
        state_file = Path(job.record.jobdir) / "state.json"
        deadline = time.monotonic() + 60
        while json.loads(state_file.read_text()).get("state") != "COMPLETED":
            assert time.monotonic() < deadline, "the local job did not finish"
            time.sleep(0.1)
        assert tier.registry.get(job.id).state == "PENDING"  # nobody watched it
        tiers_command.run(["jobs"])
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if line.startswith(job.id + " "))
        assert "COMPLETED" in row and "quick" in row
        assert tier.registry.get(job.id).state == "COMPLETED"
    finally:
        api.close_all()
