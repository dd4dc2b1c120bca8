"""config_cache: a settled, unchanged tiers.yaml is parsed once; any change (even of the same size,
even within one timestamp tick) is read again; a broken file is reported every time."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from jupyter_tiers.config import cache as config_cache
from jupyter_tiers.config import profiles as config_mod
from jupyter_tiers.config.profiles import ConfigError


def test_parsed_files_are_cached_while_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_cache.clear()
    path = tmp_path / "tiers.yaml"
    path.write_text("profiles:\n  a: {tier: local}\n")
    old = time.time() - 60
    os.utime(path, (old, old))
    calls = []
    real = config_mod.load_file

    def counting(p: Path, *, trusted: bool = True) -> dict:
        calls.append(p)
        return real(p, trusted=trusted)

    monkeypatch.setattr(config_mod, "load_file", counting)
    try:
        first = config_cache.load_file_cached(path, config_mod.load_file)
        first["profiles"]["a"]["tier"] = "mutated by a caller"
        second = config_cache.load_file_cached(path, config_mod.load_file)
        assert len(calls) == 1 and second["profiles"]["a"]["tier"] == "local"
        path.write_text("profiles:\n  b: {tier: local}\n")  # same size, just now: not trusted
        assert list(config_cache.load_file_cached(path, config_mod.load_file)["profiles"]) == ["b"]
        assert list(config_cache.load_file_cached(path, config_mod.load_file)["profiles"]) == ["b"]
        assert len(calls) == 3
        path.write_text("profiles: [\n")
        os.utime(path, (old, old))
        for _ in range(2):
            with pytest.raises(ConfigError):
                config_cache.load_file_cached(path, config_mod.load_file)
    finally:
        config_cache.clear()
