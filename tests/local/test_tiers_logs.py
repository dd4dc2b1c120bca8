"""`%tiers logs ID` prints a job's whole log piece by piece (Job.iter_logs), the same text as
Job.logs(); --tail and --rank still print their slices."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers import api
from jupyter_tiers.faces import tiers_command

BODY = """\
import os
rank = int(os.environ["RANK"])
for i in range(300):
    print(f"step {i:03d} from rank {rank} ✓")
"""


@pytest.mark.local_procs
def test_logs_command_prints_the_whole_log_and_its_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tmp_path / "tiers.yaml"))
    (tmp_path / "tiers.yaml").write_text("profiles: {}\n")
    tier = api.connect("local")
    try:
        job = tier.submit(tier.make_spec(BODY, name="logs", nodes=2))
        assert job.wait(timeout=120).state.value == "COMPLETED"
        whole = job.logs()
        assert whole.count("\n") == 600 and {ln.split(":")[0] for ln in whole.splitlines()} == {"0", "1"}
        assert "".join(job.iter_logs()) == whole

        tiers_command.run(["logs", job.id])
        assert capsys.readouterr().out == whole
        tiers_command.run(["logs", job.id, "--tail", "3"])
        assert capsys.readouterr().out.splitlines() == whole.splitlines()[-3:]
        tiers_command.run(["logs", job.id, "--rank", "1", "--tail", "1"])
        assert capsys.readouterr().out == "step 299 from rank 1 ✓\n"
    finally:
        api.close_all()
