"""Issue 16 §4: the cluster side of --sync (slurm/sync_remote.py's bash/awk/tar programs) run
with local bash through a transport that counts round trips and stdin bytes: an unchanged
1,000-file project costs one round trip and no file bytes; one changed file is sent alone;
deletes, a file damaged on the cluster side, and snapshots that later syncs do not touch."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.data.sync import build_manifest, format_manifest
from jupyter_tiers.slurm.sync_remote import sync_to_cluster


class CountingTransport:
    """SSHTransport's run() contract, executed by local bash; counts round trips and stdin."""

    def __init__(self) -> None:
        self.round_trips = 0
        self.stdin_bytes = 0

    def run(self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float | None = 60.0,
            check: bool = True) -> Any:
        from jupyter_tiers.transport.exchange import CommandResult

        self.round_trips += 1
        self.stdin_bytes += len(stdin or b"")
        p = subprocess.run(list(argv), input=stdin or b"", capture_output=True, timeout=timeout)
        return CommandResult(tuple(argv), p.returncode, p.stdout, p.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    nb = tmp_path / "nb"
    for i in range(1000):
        f = nb / f"pkg{i % 10}" / f"m{i}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"VALUE = {i}\n" + "# padding\n" * 20)
    (nb / "run.sh").write_text("echo hi\n")
    (nb / "run.sh").chmod(0o755)
    return nb


def sync(t: CountingTransport, nb: Path, workdir: Path) -> Any:
    manifest, sources = build_manifest(nb)
    return sync_to_cluster(t, str(workdir), "proj", manifest, sources), manifest


def test_unchanged_costs_one_round_trip_and_no_file_bytes(project: Path, tmp_path: Path) -> None:
    t = CountingTransport()
    work = tmp_path / "work"
    first, manifest = sync(t, project, work)
    assert first.round_trips == 2 and len(first.sent_files) == 1001
    tree = work / ".sync/proj/tree"
    assert (tree / "pkg3/m13.py").read_text().startswith("VALUE = 13\n")
    assert (tree / "run.sh").stat().st_mode & 0o100
    assert (work / ".sync/proj/manifest").read_text() == format_manifest(manifest)
    assert not list((work / ".sync/proj").glob(".pending.*"))
    snap1 = Path(first.snapshot)
    assert snap1.parent == (work / ".sync/proj/snap").resolve()
    assert (snap1 / "pkg3/m13.py").read_text() == (tree / "pkg3/m13.py").read_text()

    t.round_trips = t.stdin_bytes = 0
    again, manifest = sync(t, project, work)
    manifest_bytes = len(format_manifest(manifest).encode())
    assert (t.round_trips, t.stdin_bytes) == (1, manifest_bytes)  # the manifest, no file byte
    assert again.round_trips == 1 and again.sent_files == () and again.snapshot != first.snapshot

    # One changed file: its bytes (in a tar: 512-byte header and padding) and the manifests only.
    (project / "pkg3/m13.py").write_text("VALUE = 'changed'\n")
    (project / "pkg4/m14.py").unlink()
    t.round_trips = t.stdin_bytes = 0
    changed, manifest = sync(t, project, work)
    assert changed.sent_files == ("pkg3/m13.py",) and changed.deleted == ("pkg4/m14.py",)
    assert t.round_trips == 2
    # The manifest once (the check keeps it for the apply), then a small gzipped tar: one file.
    assert manifest_bytes < t.stdin_bytes < manifest_bytes + 4 * 1024
    assert (tree / "pkg3/m13.py").read_text() == "VALUE = 'changed'\n"
    assert not (tree / "pkg4/m14.py").exists()
    # The earlier jobs' snapshots keep the code they were submitted with.
    assert (snap1 / "pkg3/m13.py").read_text().startswith("VALUE = 13\n")
    assert (snap1 / "pkg4/m14.py").exists()
    assert (Path(changed.snapshot) / "pkg3/m13.py").read_text() == "VALUE = 'changed'\n"
    assert (work / ".sync/proj/manifest").read_text() == format_manifest(manifest)


def test_a_cut_before_apply_resends_on_the_next_sync(project: Path, tmp_path: Path) -> None:
    """The check keeps the manifest pending; without the apply the stored one is unchanged, so
    the next sync finds the same changes and an apply without its check is refused."""
    from jupyter_tiers.slurm import sync_remote

    t = CountingTransport()
    work = tmp_path / "work"
    sync(t, project, work)
    (project / "pkg0/m0.py").write_text("VALUE = 'new'\n")
    manifest, sources = build_manifest(project)
    root = sync_remote.sync_root(str(work), "proj")
    answer = t.run(sync_remote.check_argv(root, "tok1"), stdin=format_manifest(manifest).encode())
    plan, snapshot = sync_remote.parse_check(answer.stdout.decode(), manifest)
    assert plan.send == ("pkg0/m0.py",) and snapshot is None  # ... and the connection drops here
    payload = sync_remote.apply_payload(manifest, sources, plan)
    refused = t.run(sync_remote.apply_argv(root, "other"), stdin=payload)
    assert refused.exit_status == 3 and b"submit again" in refused.stderr
    again, _ = sync(t, project, work)
    assert again.sent_files == ("pkg0/m0.py",)
    assert (Path(again.snapshot) / "pkg0/m0.py").read_text() == "VALUE = 'new'\n"


def test_file_damaged_on_the_cluster_is_resent(project: Path, tmp_path: Path) -> None:
    t = CountingTransport()
    work = tmp_path / "work"
    sync(t, project, work)
    tree = work / ".sync/proj/tree"
    (tree / "pkg1/m1.py").unlink()
    (tree / "pkg2/m2.py").write_text("x")  # truncated
    again, _ = sync(t, project, work)
    assert again.sent_files == ("pkg1/m1.py", "pkg2/m2.py")
    assert (tree / "pkg2/m2.py").read_text().startswith("VALUE = 2\n")


def test_names_with_spaces_and_quotes(tmp_path: Path) -> None:
    nb = tmp_path / "nb"
    (nb / "a dir").mkdir(parents=True)
    (nb / "a dir/it's $HOME `x`.py").write_text("A = 1\n")
    (nb / "-rf").write_text("not an option\n")
    t = CountingTransport()
    out, _ = sync(t, nb, tmp_path / "work")
    assert (Path(out.snapshot) / "a dir/it's $HOME `x`.py").read_text() == "A = 1\n"
    assert (Path(out.snapshot) / "-rf").exists()
    (nb / "-rf").unlink()
    out, _ = sync(t, nb, tmp_path / "work")
    assert out.deleted == ("-rf",) and not (tmp_path / "work/.sync/proj/tree/-rf").exists()
