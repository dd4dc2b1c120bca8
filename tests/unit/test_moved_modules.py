"""The modules documented before the move into folders (0.1.x) still import under their old
names, as the same module objects at their new places, with a DeprecationWarning that names the
new place; a name that never existed still fails as before."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import jupyter_tiers


@pytest.mark.parametrize("old", sorted(jupyter_tiers.MOVED_MODULES))
def test_an_old_module_name_is_the_module_at_its_new_place(old: str) -> None:
    new = f"jupyter_tiers.{jupyter_tiers.MOVED_MODULES[old]}"
    sys.modules.pop(f"jupyter_tiers.{old}", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(f"jupyter_tiers.{old}")
    assert module is importlib.import_module(new)
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        f"jupyter_tiers.{old} moved to {new}; import it from there"]


def test_from_import_of_an_old_name_works_in_a_fresh_interpreter() -> None:
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    from jupyter_tiers.handles import Job\nexcept DeprecationWarning as w:\n"
            "    print('warned:', w)\n"
            "import warnings; warnings.resetwarnings()\n"
            "from jupyter_tiers.handles import Job\nfrom jupyter_tiers.engine.handles import Job as J\n"
            "print(Job is J)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "warned: jupyter_tiers.handles moved to jupyter_tiers.engine.handles; import it from there",
        "True"], out.stderr


def test_a_name_that_never_existed_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("jupyter_tiers.no_such_module")
