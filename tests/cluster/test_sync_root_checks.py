"""Issue 26 §3 on the real cluster over sshd: the cluster-side --sync root is checked as a job
directory is. A ``{workdir}/.sync/NAME`` that is a symbolic link (planted to send the synced
files and snapshots elsewhere), or a ``.lock`` that is one (to make the sync create or truncate
a file elsewhere), is refused in one line and nothing is written through it."""

from __future__ import annotations

import secrets
import shlex
import subprocess
from pathlib import Path

import pytest

from jupyter_tiers.data.sync import SyncError, build_manifest
from jupyter_tiers.slurm.sync_remote import sync_root, sync_to_cluster
from jupyter_tiers.slurm.tier import SlurmTier

pytestmark = pytest.mark.cluster


def _ssh(env: dict[str, str], command: str) -> str:
    argv = ["ssh", "-i", env["JT_SSH_KEY"], "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", env["JT_SSH_PORT"],
            f"{env['JT_SSH_USER']}@{env['JT_SSH_HOST']}", command]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


def test_a_planted_sync_root_or_lock_link_is_refused(box: SlurmTier, cluster_env: dict[str, str],
                                                     tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("VALUE = 1\n")
    manifest, sources = build_manifest(tmp_path)
    workdir = str(box.profile.workdir)
    name = f"planted-{secrets.token_hex(4)}"
    root = sync_root(workdir, name)
    elsewhere = f"/tmp/jt-elsewhere-{secrets.token_hex(4)}"
    q = shlex.quote
    # The root itself a link to another directory.
    _ssh(cluster_env, f"mkdir -p {q(elsewhere)} && mkdir -p {q(workdir)}/.sync && "
                      f"ln -s {q(elsewhere)} {q(root)}")
    try:
        with pytest.raises(SyncError) as err:
            sync_to_cluster(box.transport, workdir, name, manifest, sources)
        assert "is not a directory of yours (a symbolic link" in str(err.value)
        assert "\n" not in str(err.value)
        assert _ssh(cluster_env, f"ls -A {q(elsewhere)}") == ""  # nothing written through it
        # A real root whose .lock is a link to a file elsewhere: refused, the target not made.
        _ssh(cluster_env, f"rm -f {q(root)} && mkdir -m 0700 {q(root)} && "
                          f"ln -s {q(elsewhere)}/victim {q(root)}/.lock")
        with pytest.raises(SyncError, match="is not a plain file"):
            sync_to_cluster(box.transport, workdir, name, manifest, sources)
        assert _ssh(cluster_env, f"ls -A {q(elsewhere)}") == ""
        # Once the link is gone, the sync works and the root is the user's alone.
        _ssh(cluster_env, f"rm -f {q(root)}/.lock")
        outcome = sync_to_cluster(box.transport, workdir, name, manifest, sources)
        assert outcome.snapshot.startswith("/")
        assert _ssh(cluster_env, f"stat -c %a {q(root)} {q(root)}/tree; cat {q(root)}/tree/m.py").split() == [
            "700", "700", "VALUE", "=", "1"]
    finally:
        _ssh(cluster_env, f"rm -rf {q(elsewhere)} {q(root)}")
