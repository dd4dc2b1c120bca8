"""Issue 16 §4: the pure core of --sync: walking with ignore rules, the manifest, diffing, the
size cap, path safety; seeded fuzz of the ignore-rule and manifest parsers."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from jupyter_tiers.data import sync
from jupyter_tiers.data.sync import (
    Entry,
    Manifest,
    SyncError,
    build_manifest,
    check_relpath,
    check_sync_paths,
    diff,
    format_manifest,
    parse_ignore,
    parse_manifest,
    scan,
)

SEED = 20261216


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def paths(root: Path, sel: tuple[str, ...] = (".",)) -> list[str]:
    return [f.path for f in scan(root, sel)]


def test_gitignore_semantics(tmp_path: Path) -> None:
    tree(tmp_path, {
        ".gitignore": "*.log\n!keep.log\nbuild/\n/top.txt\ndeep/**/x.bin\n",
        "a.py": "", "x.log": "", "keep.log": "", "top.txt": "", "sub/top.txt": "",
        "build/out.o": "", "sub/build/out.o": "", "buildfile": "",
        "deep/1/2/x.bin": "", "deep/y.bin": "",
        ".git/config": "", "pkg/__pycache__/m.pyc": "", "pkg/m.py": "", "pkg/old.pyc": "",
        ".ipynb_checkpoints/n.ipynb": "", "tiers.yaml": "env: {TOKEN: x}", "sub/tiers.yaml": "",
    })
    assert paths(tmp_path) == [".gitignore", "a.py", "buildfile", "deep/y.bin", "keep.log",
                               "pkg/m.py", "sub/tiers.yaml", "sub/top.txt"]


def test_nested_ignore_files_and_tiersignore(tmp_path: Path) -> None:
    tree(tmp_path, {
        ".gitignore": "*.csv\n",
        ".tiersignore": "data/\n",
        "data/big.bin": "", "a.csv": "",
        "sub/.gitignore": "!wanted.csv\nlocal.py\n",
        "sub/wanted.csv": "", "sub/other.csv": "", "sub/local.py": "", "local.py": "",
    })
    assert paths(tmp_path) == [".gitignore", ".tiersignore", "local.py", "sub/.gitignore",
                               "sub/wanted.csv"]


def test_sync_paths_select_subtrees_and_files(tmp_path: Path) -> None:
    tree(tmp_path, {".gitignore": "*.yaml\nsrc/gen/\n", "src/m.py": "", "src/gen/g.py": "",
                    "conf/a.yaml": "", "conf/b.yaml": "", "other.py": ""})
    # An explicitly named file is synced even if ignored (git add -f); a directory's rules apply.
    assert paths(tmp_path, ("src", "conf/a.yaml")) == ["conf/a.yaml", "src/m.py"]
    with pytest.raises(SyncError, match=r"ignored by a \.gitignore"):
        scan(tmp_path, ("src/gen",))
    with pytest.raises(SyncError, match="no such file"):
        scan(tmp_path, ("nope",))


@pytest.mark.parametrize("bad", ["/etc", "~/x", "../up", "a/../../b", ""])
def test_sync_paths_stay_inside(bad: str) -> None:
    with pytest.raises(SyncError, match="--sync"):
        check_sync_paths([bad])


def test_sync_paths_normalised() -> None:
    assert check_sync_paths([".", "./src/", "src", "a//b"]) == (".", "src", "a/b")


def test_symlinks(tmp_path: Path) -> None:
    tree(tmp_path, {"real.py": "X = 1\n", "sub/d.py": ""})
    (tmp_path / "alias.py").symlink_to("real.py")
    assert paths(tmp_path) == ["alias.py", "real.py", "sub/d.py"]
    manifest, _ = build_manifest(tmp_path)
    assert manifest.by_path()["alias.py"].sha256 == manifest.by_path()["real.py"].sha256
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret")
    (tmp_path / "leak.txt").symlink_to(outside)
    with pytest.raises(SyncError, match=r"leak.txt is a symbolic link .*outside"):
        scan(tmp_path)
    (tmp_path / ".tiersignore").write_text("leak.txt\n")
    assert "leak.txt" not in paths(tmp_path)
    (tmp_path / "dirlink").symlink_to("sub")
    with pytest.raises(SyncError, match=r"dirlink is a symbolic link .*a directory"):
        scan(tmp_path)


def test_bad_file_names_refused(tmp_path: Path) -> None:
    tree(tmp_path, {"ok.py": "", "bad\tname.py": ""})
    with pytest.raises(SyncError, match="control characters"):
        scan(tmp_path)


def test_size_cap_names_largest(tmp_path: Path) -> None:
    tree(tmp_path, {"small.py": "x"})
    (tmp_path / "weights.bin").write_bytes(b"\0" * 3_000_000)
    (tmp_path / "data.npy").write_bytes(b"\0" * 1_000_000)
    with pytest.raises(SyncError) as err:
        build_manifest(tmp_path, max_mb=2)
    msg = str(err.value)
    assert "\n" not in msg
    assert "4.0 MB in 3 files is over the 2 MB limit" in msg
    assert msg.index("weights.bin (3.0 MB)") < msg.index("data.npy (1.0 MB)")
    assert "sync_max_mb" in msg and ".tiersignore" in msg
    manifest, _ = build_manifest(tmp_path, max_mb=5)
    assert manifest.total == 4_000_001


def test_manifest_modes_hashes_roundtrip(tmp_path: Path) -> None:
    tree(tmp_path, {"run.sh": "echo hi\n", "m.py": "A = 1\n"})
    os.chmod(tmp_path / "run.sh", 0o750)
    manifest, _ = build_manifest(tmp_path)
    by = manifest.by_path()
    assert by["run.sh"].mode == 0o755 and by["m.py"].mode == 0o644
    assert by["m.py"].sha256 == hashlib.sha256(b"A = 1\n").hexdigest()
    text = format_manifest(manifest)
    assert parse_manifest(text) == manifest
    assert text.splitlines()[0].endswith("\t644\tm.py")


def entry(path: str, content: str = "x", mode: int = 0o644) -> Entry:
    return Entry(path, len(content), hashlib.sha256(content.encode()).hexdigest(), mode)


def test_diff() -> None:
    old = Manifest((entry("a.py"), entry("b.py"), entry("c.sh"), entry("gone.py")))
    new = Manifest((entry("a.py"), entry("b.py", "changed"), entry("c.sh", mode=0o755), entry("new.py")))
    plan = diff(new, old)
    assert plan.send == ("b.py", "c.sh", "new.py")
    assert plan.delete == ("gone.py",)
    assert diff(new, new).empty
    assert diff(new, Manifest()).send == ("a.py", "b.py", "c.sh", "new.py")
    assert diff(Manifest(), old).delete == ("a.py", "b.py", "c.sh", "gone.py")


@pytest.mark.parametrize("path", ["../x", "/abs", "a/../b", "a//b", "./a", "a/", "a\nb", "", "x\x7f"])
def test_check_relpath_refuses(path: str) -> None:
    with pytest.raises(SyncError):
        check_relpath(path)


def test_copy_tree(tmp_path: Path) -> None:
    src = tree(tmp_path / "nb", {"m.py": "A = 1\n", "pkg/x.py": "B = 2\n"})
    manifest, sources = build_manifest(src)
    copied = sync.copy_tree(manifest, sources, tmp_path / "out")
    assert copied == manifest.total
    assert (tmp_path / "out/pkg/x.py").read_text() == "B = 2\n"
    assert build_manifest(tmp_path / "out")[0] == manifest


# --- seeded fuzz ----------------------------------------------------------------------------------

_PATTERN_BITS = ["*", "**", "?", "[a-c]", "[!x]", "[", "]", "\\", "!", "#", "/", " ", "a", "b.py",
                 "dir/", "\\!", "\\#", "{", "}", "\t", "é", "\x00", "..", "."]


def _fuzz_text(rng: random.Random, bits: list[str], lines: int) -> str:
    return "\n".join("".join(rng.choice(bits) for _ in range(rng.randint(0, 6)))
                     for _ in range(rng.randint(0, lines)))


def test_fuzz_ignore_parser() -> None:
    """Any ignore file parses (or is one SyncError) and its matcher answers for any path."""
    rng = random.Random(SEED)
    probes = ["a", "b.py", "dir/a", "dir/sub/b.py", "x/y/z", "[", "é/x", "a b"]
    for _ in range(3000):
        text = _fuzz_text(rng, _PATTERN_BITS, 6)
        try:
            spec = parse_ignore(text)
        except SyncError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        for p in probes:
            assert isinstance(sync.is_ignored((("", spec),), p, rng.random() < 0.5), bool)


_MANIFEST_BITS = ["a" * 64, "0" * 63, "G" * 64, "\t", "\n", "12", "-1", "644", "755", "600",
                  "m.py", "../x", "/abs", "a//b", "é", "\x01", " ", "1e3", "٣"]


def test_fuzz_manifest_parser() -> None:
    """Any text is a manifest or one SyncError; what parses formats back to the same manifest."""
    rng = random.Random(SEED + 1)
    parsed = 0
    for i in range(5000):
        if i % 3 == 0:  # near-valid lines, mutated
            lines = [f"{rng.getrandbits(256):064x}\t{rng.randint(0, 9999)}\t"
                     f"{rng.choice(['644', '755'])}\t{rng.choice(['a.py', 'd/b.py', 'c', 'd/e/f'])}"
                     for _ in range(rng.randint(0, 4))]
            text = "\n".join(lines)
            if text and rng.random() < 0.5:
                pos = rng.randrange(len(text))
                text = text[:pos] + rng.choice(_MANIFEST_BITS) + text[pos + 1:]
        else:
            text = "".join(rng.choice(_MANIFEST_BITS) for _ in range(rng.randint(0, 12)))
        try:
            m = parse_manifest(text)
        except SyncError as exc:
            assert str(exc).startswith("manifest line ") and "\n" not in str(exc)
            continue
        parsed += 1
        assert parse_manifest(format_manifest(m)) == m
    assert parsed > 500


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_ignore_matches_git_check_ignore(tmp_path: Path) -> None:
    """Seeded differential test: what scan keeps is what git would add (git check-ignore)."""
    rng = random.Random(SEED + 2)
    names = ["a.py", "b.log", "c.txt", "build", "data", "x"]
    patterns = ["*.log", "!b.log", "build/", "/c.txt", "data/**/x", "**/x", "x", "!x", "*.txt",
                "d1/", "/d1/a.py", "d1/**", "!d1/**/a.py", "a.*"]
    for trial in range(25):
        root = tmp_path / f"t{trial}"
        files = {}
        for _ in range(rng.randint(3, 12)):
            depth = rng.randint(0, 2)
            parts = [rng.choice(["d1", "d2", "build", "data"]) for _ in range(depth)]
            files["/".join([*parts, rng.choice(names)])] = ""
        files = {k: v for k, v in files.items()
                 if not any(other.startswith(k + "/") for other in files)}
        files[".gitignore"] = "\n".join(rng.sample(patterns, rng.randint(1, 5))) + "\n"
        if rng.random() < 0.5:
            files["d1/.gitignore"] = "\n".join(rng.sample(patterns, rng.randint(1, 3))) + "\n"
        tree(root, files)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "--others", "--exclude-standard"],
                                check=True, capture_output=True, text=True).stdout.split()
        assert paths(root) == sorted(listed), files


def test_profile_default_and_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``defaults: {sync: [.]}`` turns it on for a profile (a bad path names the profile key);
    ``sync_max_mb`` must be a positive number."""
    from jupyter_tiers.config import profiles as config
    from jupyter_tiers.config.registry import Registry
    from jupyter_tiers.core.errors import ConfigError
    from jupyter_tiers.local.tier import LocalTier

    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "none.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "none2.yaml")
    path = tmp_path / "tiers.yaml"
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    path.write_text(f"profiles:\n  loc: {{tier: local, workdir: {tmp_path}/jobs, sync_max_mb: 5,"
                    " defaults: {sync: ['.', './src/']}}\n")
    tier = LocalTier(config.load_config(tmp_path).profile("loc"), Registry(tmp_path / "r.sqlite"))
    assert tier.make_spec("x").sync == (".", "src")
    assert tier.make_spec("x", sync=["conf"]).sync == ("conf",)  # the magic's value replaces it
    assert sync.max_mb(tier.profile.settings) == 5.0
    path.write_text(f"profiles:\n  loc: {{tier: local, workdir: {tmp_path}/jobs,"
                    " defaults: {sync: ['../up']}}\n")
    bad = LocalTier(config.load_config(tmp_path).profile("loc"), Registry(tmp_path / "r.sqlite"))
    with pytest.raises(ConfigError, match=r"profiles\.loc\.defaults\.sync.*leaves the notebook"):
        bad.make_spec("x")
    for value in (0, -1, True, "10"):
        with pytest.raises(SyncError, match="sync_max_mb"):
            sync.max_mb({"sync_max_mb": value})
    assert sync.max_mb({}) == 100.0


def test_credentials_are_never_synced_unless_named(tmp_path: Path) -> None:
    """Issue 26 §4: a repository's notebooks sync their directory; keys and tokens beside them
    never leave unless the user names them on --sync, and no ignore file (a project's
    .tiersignore with '!' rules) brings them back."""
    tree(tmp_path, {
        "train.py": "", "id_utils.py": "", "conf/run.yaml": "", "conf/.env.local": "T=1",
        ".env": "TOKEN=x", ".netrc": "machine h login u password p",
        "tls/server.pem": "", "tls/server.key": "",
        "id_rsa": "KEY", "id_ed25519.pub": "", ".aws/credentials": "[default]", ".ssh/id_ecdsa": "KEY",
        ".ssh/config": "", "sub/.ssh/known_hosts": "",
        ".tiersignore": "!.env\n!id_rsa\n!.ssh/\n!*.key\n",
    })
    assert paths(tmp_path) == [".tiersignore", "conf/run.yaml", "id_utils.py", "train.py"]
    assert paths(tmp_path, ("conf", "tls")) == ["conf/run.yaml"]
    # Named on --sync (a file, or a credentials directory): sent, as the user asked.
    assert paths(tmp_path, (".", ".env", "tls/server.key")) == [
        ".env", ".tiersignore", "conf/run.yaml", "id_utils.py", "tls/server.key", "train.py"]
    assert paths(tmp_path, (".ssh",)) == [".ssh/config", ".ssh/id_ecdsa"]
    assert paths(tmp_path, (".aws/credentials",)) == [".aws/credentials"]
    for name, is_dir in ((".env", False), (".env.prod", False), ("a.pem", False), ("x.key", False),
                         ("id_rsa", False), (".netrc", False), (".aws", True), (".ssh", True)):
        assert sync.is_secret(name, is_dir), name
    for name, is_dir in (("env.py", False), ("id_map.py", False), ("keys.py", False), (".ssh", False),
                         ("aws", True), (".envrc.py", False)):
        assert not sync.is_secret(name, is_dir), name
