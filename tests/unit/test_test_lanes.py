"""The test suite's own plumbing: the environment markers --fast deselects on, the check that
keeps supervisors out of the fast lane, and the time-by-group table."""

from __future__ import annotations

import json
from pathlib import Path

from tests import conftest, durations

ROOT = Path(__file__).resolve().parents[2]


def test_every_environment_marker_is_registered_and_every_rule_names_one() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    registered = {name for name in [*conftest.ENVIRONMENTS, "cluster"] if f'\n    "{name}: ' in pyproject}
    assert set(conftest.ENVIRONMENTS) <= registered
    assert {"cluster", "s3"} <= registered
    rules = [*conftest.FIXTURE_ENVIRONMENTS.values(), *conftest.FOLDER_ENVIRONMENTS.values(),
             *conftest.ALIASES.values()]
    assert set(rules) <= set(conftest.ENVIRONMENTS)
    for folder in conftest.FOLDER_ENVIRONMENTS:
        assert (ROOT / "tests" / folder).is_dir(), folder


def test_supervisors_and_jupyter_count_as_local_processes_and_quick_helpers_do_not() -> None:
    long_lived = [
        ["/venv/bin/python", "-m", "jupyter_tiers.local.supervisor", "--detach", "/d"],
        ["/venv/bin/python", "-m", "jupyter_tiers.local.serve_supervisor", "/d"],
        ["/venv/bin/jupyter-lab", "--no-browser"],
        ["/venv/bin/jupyter", "server", "extension", "list"],
        ["python", "-m", "ipykernel_launcher", "-f", "k.json"],
        ["python", "-m", "jupyter", "lab"],
    ]
    quick = [
        ["bash", "-n", "script.sh"],
        ["/usr/bin/node", "-"],
        ["/usr/bin/shellcheck", "--norc", "x.sh"],
        ["python", "-c", "from jupyter_tiers.local import processes"],
        ["python", "-m", "jupyter_tiers.faces.cli", "jobs"],
        ["python", "-m", "jupyterish"],
        [],
    ]
    assert [argv for argv in long_lived if not conftest._long_lived(argv)] == []
    assert [argv for argv in quick if conftest._long_lived(argv)] == []


def test_durations_are_summed_by_folder_and_several_files_merge(tmp_path: Path) -> None:
    times = {"tests/cluster/test_a.py::t1": 2.0, "tests/cluster/test_b.py::C::t2": 3.0,
             "tests/unit/test_c.py::t3[x]": 0.5, "tests/test_top.py::t": 1.0}
    assert durations.group_of("tests/cluster/test_b.py::C::t2") == "cluster"
    assert durations.group_table(times) == [("cluster", 2, 5.0), ("tests", 1, 1.0), ("unit", 1, 0.5)]
    one, two = tmp_path / "slurm.json", tmp_path / "rest.json"
    one.write_text(durations.to_json({k: v for k, v in times.items() if "cluster" in k}, 5.5))
    two.write_text(durations.to_json({k: v for k, v in times.items() if "cluster" not in k}))
    assert json.loads(one.read_text())["groups"]["cluster"] == {"tests": 2, "seconds": 5.0}
    assert durations.merged([one, two, tmp_path / "missing.json"]) == times
    lines = durations.format_table(durations.group_table(times))
    assert lines[0].split() == ["cluster", "2", "tests", "5.0", "s"]
    assert lines[-1].split() == ["total", "4", "tests", "6.5", "s"]
