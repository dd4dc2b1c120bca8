"""Issue 21 section 2 against the real Slurm test cluster: ``jupyter tiers init`` with a host
from ~/.ssh/config whose key is known logs in (no prompt) and offers the partitions ``sinfo``
lists: the cluster's default taken with --yes, one picked by number when asked. One short
test (no doctor: tests/cluster/test_doctor.py covers it)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.faces import cli

pytestmark = pytest.mark.cluster


def test_init_offers_the_partitions_sinfo_lists(cluster_env: dict[str, str], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host box\n  HostName {cluster_env['JT_SSH_HOST']}\n  Port {cluster_env['JT_SSH_PORT']}\n"
        f"  User {cluster_env['JT_SSH_USER']}\n  IdentityFile {cluster_env['JT_SSH_KEY']}\n"
        f"  UserKnownHostsFile {cluster_env['JT_KNOWN_HOSTS']}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("JUPYTER_TIERS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "--yes", "--no-doctor", "--host", "box",
                     "--workdir", "/var/lib/jupyter-tiers-jobs/box"]) == 0
    out = capsys.readouterr().out
    assert "(1 with a known host key)" in out and "asking box for its partitions (sinfo)" in out, out
    written = yaml.safe_load((home / ".jupyter" / "tiers.yaml").read_text())
    assert written == {"profiles": {"box": {"tier": "slurm", "host": "box",
                                            "workdir": "/var/lib/jupyter-tiers-jobs/box",
                                            "defaults": {"partition": "debug"}}}}
    assert load_config().profile("box").defaults["partition"] == "debug"
    # Interactive: the built-in cluster profile is offered first (this machine has sbatch) and
    # declined; then the partitions are listed by number; 2 picks the second.
    other = tmp_path / "other.yaml"
    answers = "n\nslurm\n1\n/var/lib/jupyter-tiers-jobs/box\n2\nbox2\ny\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(answers))
    assert cli.main(["init", "--no-doctor", "--config", str(other)]) == 0
    out = capsys.readouterr().out
    assert "the built-in profile 'cluster' runs jobs on this cluster with no SSH" in out, out
    assert "  1. debug\n  2. preemptible" in out and "from sinfo on the login node" in out, out
    assert yaml.safe_load(other.read_text())["profiles"]["box2"]["defaults"] == {"partition": "preemptible"}
