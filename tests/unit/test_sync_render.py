"""Issue 16 §4: the --sync lines of the rendered Slurm script and the cluster-side programs
(shellcheck-clean; the path quoted whatever it holds)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from jupyter_tiers.model import JobSpec
from jupyter_tiers.slurm import sync_remote
from jupyter_tiers.slurm.render import render_job
from jupyter_tiers.sync import SyncError


def test_sync_lines_come_before_the_launcher() -> None:
    script = render_job(JobSpec(script="import m\n", name="s", sync=(".",)),
                        sync_dir="/w/.sync/s/snap/abc").script
    lines = script.splitlines()
    at = lines.index("export JT_SYNC_DIR=/w/.sync/s/snap/abc")
    assert lines[at + 1:at + 3] == ['cd -- "$JT_SYNC_DIR"',
                                    'export PYTHONPATH="$JT_SYNC_DIR${PYTHONPATH:+:$PYTHONPATH}"']
    assert at < next(i for i, x in enumerate(lines) if x.startswith("srun "))
    assert "JT_SYNC_DIR" not in render_job(JobSpec(script="import m\n", name="s")).script


def test_sync_dir_is_quoted() -> None:
    script = render_job(JobSpec(script="x\n", name="s", sync=(".",)), sync_dir="/w/a b/$(x)").script
    assert "export JT_SYNC_DIR='/w/a b/$(x)'" in script


@pytest.mark.parametrize("text", ["= relative\n", "+\t../x\n", "+\tnot-ours.py\n", "?\tx\n", "garbage"])
def test_check_answer_refused(text: str) -> None:
    from jupyter_tiers.sync import Entry, Manifest

    with pytest.raises(SyncError):
        sync_remote.parse_check(text.replace(" ", "\t", 1), Manifest((Entry("a.py", 1, "0" * 64, 0o644),)))


def test_bad_names_and_tokens() -> None:
    for name in ("", "..", "a/b"):
        with pytest.raises(SyncError):
            sync_remote.sync_root("/w", name)
    with pytest.raises(SyncError):
        sync_remote.check_argv("/w/.sync/x", "a;b")


@pytest.mark.parametrize("program", [sync_remote.CHECK_SH, sync_remote.APPLY_SH])
def test_programs_are_shellcheck_clean(program: str) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (tests/run.sh installs it)")
    # SC2088: the quoted "~/" is matched literally on purpose (a workdir given as ~/x), as in
    # commands.SUBMIT_SH, and replaced by $HOME.
    result = subprocess.run([shellcheck, "--norc", "-s", "bash", "-e", "SC2088", "-"],
                            input="#!/bin/bash\n" + program, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout


def test_k8s_items_and_refusals() -> None:
    from jupyter_tiers.k8s.render import render_manifests
    from jupyter_tiers.k8s.sync_render import with_synced_files
    from jupyter_tiers.model import ServeSpec

    objects = render_manifests(ServeSpec(body="import m\n", name="web", image="python:3.11-slim"),
                               namespace="ns")
    out = with_synced_files(objects, [("m.py", b"A = 1\n", 0o644), ("bin/run", b"#!", 0o755)], "d1")
    cm = next(o for o in out if o["metadata"]["name"] == "web-sync")
    assert cm["binaryData"] == {"f0": "QSA9IDEK", "f1": "IyE="}
    dep = next(o for o in out if o["kind"] == "Deployment")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "sync")
    assert vol["configMap"]["items"] == [{"key": "f0", "path": "m.py", "mode": 0o644},
                                         {"key": "f1", "path": "bin/run", "mode": 0o755}]
    assert objects != out and "web-sync" not in str(objects)  # the input is not changed
    with pytest.raises(SyncError, match=r"starting with '\.\.'"):
        with_synced_files(objects, [("..data/x", b"", 0o644)], "d")


def test_slurm_dry_run_names_the_snapshot_to_come() -> None:
    from jupyter_tiers.config import Profile
    from jupyter_tiers.slurm.tier import SlurmTier

    tier = SlurmTier(Profile(name="hpc", tier="slurm", settings={"host": "h", "workdir": "~/jt"}))
    script = tier.render(JobSpec(script="import m\n", name="ft", sync=(".",)))
    assert 'export JT_SYNC_DIR="$HOME"/jt/.sync/ft/snap/TOKEN-AT-SUBMIT' in script
