"""Issue 16 §4: the --sync lines of the rendered Slurm script and the cluster-side programs
(shellcheck-clean; the path quoted whatever it holds)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jupyter_tiers.core.model import JobSpec
from jupyter_tiers.data.sync import SyncError
from jupyter_tiers.slurm import sync_remote
from jupyter_tiers.slurm.render import render_job


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
    from jupyter_tiers.data.sync import Entry, Manifest

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
    from jupyter_tiers.core.model import ServeSpec
    from jupyter_tiers.k8s.render import render_manifests
    from jupyter_tiers.k8s.sync_render import with_synced_files

    objects = render_manifests(ServeSpec(body="import m\n", name="web", image="python:3.11-slim"),
                               namespace="ns")
    out = with_synced_files(objects, [("m.py", b"A = 1\n", 0o644), ("bin/run", b"#!", 0o755)], "d1")
    secret = next(o for o in out if o["metadata"]["name"] == "web-sync")
    # A Secret (issue 26): the built-in view role reads every ConfigMap of a namespace.
    assert secret["kind"] == "Secret" and secret["type"] == "Opaque"
    assert secret["data"] == {"f0": "QSA9IDEK", "f1": "IyE="}
    assert not any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == "web-sync" for o in out)
    dep = next(o for o in out if o["kind"] == "Deployment")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "sync")
    assert vol["secret"]["secretName"] == "web-sync" and "configMap" not in vol
    assert vol["secret"]["items"] == [{"key": "f0", "path": "m.py", "mode": 0o644},
                                      {"key": "f1", "path": "bin/run", "mode": 0o755}]
    assert objects != out and "web-sync" not in str(objects)  # the input is not changed
    with pytest.raises(SyncError, match=r"starting with '\.\.'"):
        with_synced_files(objects, [("..data/x", b"", 0o644)], "d")


def test_slurm_dry_run_names_the_snapshot_to_come() -> None:
    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.slurm.tier import SlurmTier

    tier = SlurmTier(Profile(name="hpc", tier="slurm", settings={"host": "h", "workdir": "~/jt"}))
    script = tier.render(JobSpec(script="import m\n", name="ft", sync=(".",)))
    assert 'export JT_SYNC_DIR="$HOME"/jt/.sync/ft/snap/TOKEN-AT-SUBMIT' in script


def test_k8s_sync_size_is_refused_from_the_sizes_alone() -> None:
    from jupyter_tiers.k8s.sync_render import size_refusal

    assert size_refusal([("m.py", 1000), ("conf/a.yaml", 200)]) is None
    line = size_refusal([("m.py", 1000), ("weights.bin", 5_000_000_000)])
    assert line is not None and "\n" not in line and "do not fit a Kubernetes Secret" in line
    assert "5000.00 MB" in line and size_refusal([("a", 740_000)]) is None
    assert size_refusal([("a", 760_000)]) is not None  # base64: 4/3 of it is over 1 MB


def test_an_oversize_k8s_sync_is_refused_before_anything_is_read_or_encoded(tmp_path: Path) -> None:
    """Issue 26 §4: 60 MB of notebook files (under sync_max_mb) are refused from their sizes;
    the old path built a zero-filled copy of each file and base64-encoded it first."""
    import tracemalloc

    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.core.model import ServeSpec
    from jupyter_tiers.k8s.render import render_manifests
    from jupyter_tiers.k8s.tier import _with_synced_files

    (tmp_path / "m.py").write_text("A = 1\n")
    with open(tmp_path / "weights.bin", "wb") as f:
        f.truncate(60_000_000)  # sparse: costs no disk
    spec = ServeSpec(body="import m\n", name="web", image="python:3.11-slim", sync=("weights.bin", "m.py"))
    objects = render_manifests(spec, namespace="ns")
    profile = Profile(name="k", tier="kubernetes", settings={"sync_max_mb": 1000})
    cwd = os.getcwd()
    os.chdir(tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(SyncError, match="do not fit a Kubernetes Secret"):
            _with_synced_files(spec, objects, profile)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        os.chdir(cwd)
    assert peak < 20_000_000, f"{peak / 1e6:.0f} MB allocated to refuse it"
