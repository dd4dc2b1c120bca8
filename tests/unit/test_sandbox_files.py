"""The sandbox's file helpers: a profile written into a tiers.yaml (the others kept, a .bak of the
previous file), and ``files_kept``, which the lab's tests and bench use around the machine-wide
/etc/jupyter/tiers.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jupyter_tiers.tools.sandbox.files import files_kept, write_profile


def test_write_profile_keeps_the_other_profiles_and_the_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    assert write_profile(path, {"tier": "local"}, name="here")
    assert write_profile(path, {"tier": "slurm", "host": "hpc"})
    assert not write_profile(path, {"tier": "slurm", "host": "hpc"})  # unchanged: not written
    assert yaml.safe_load(path.read_text())["profiles"] == {"here": {"tier": "local"},
                                                           "sandbox": {"tier": "slurm", "host": "hpc"}}
    previous = yaml.safe_load((tmp_path / "tiers.yaml.bak").read_text())
    assert previous["profiles"] == {"here": {"tier": "local"}}


def test_files_kept_puts_back_the_bytes_and_removes_what_was_not_there(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "tiers.yaml"
    path.parent.mkdir()
    path.write_bytes(b"profiles: {mine: {tier: local}}\n")
    with files_kept(path):
        write_profile(path, {"tier": "slurm"})  # rewrites it and leaves a .bak
        assert (tmp_path / "etc" / "tiers.yaml.bak").exists()
    assert path.read_bytes() == b"profiles: {mine: {tier: local}}\n"
    assert not (tmp_path / "etc" / "tiers.yaml.bak").exists()


def test_files_kept_removes_a_directory_it_did_not_find_even_after_an_error(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "jupyter" / "tiers.yaml"
    with pytest.raises(RuntimeError), files_kept(path):
        write_profile(path, {"tier": "slurm"})
        raise RuntimeError("the test failed midway")
    assert not path.exists() and not path.parent.exists()
    assert (tmp_path / "etc").is_dir()  # only the directory that held the file is removed
