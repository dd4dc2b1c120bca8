"""Issue 36 (hardening round 5), items 1-3: Slurm's own variables are reserved on every path, and
metric patterns from any file cannot freeze a kernel or the server's log thread.

The allowlist of environment names itself (a name off it is refused, OPENSSL_CONF among them) is
tested in test_config_trust.py and fuzzed through every renderer in test_project_trust_fuzz.py.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from jupyter_tiers.batch import linear_regex
from jupyter_tiers.batch.metrics import MetricParser, MetricsTracker, parse_patterns
from jupyter_tiers.config.profiles import Profile, load_config
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.slurm.tier import transport_for
from jupyter_tiers.spec.jobspec import check_env_name
from jupyter_tiers.transport.local import LocalTransport
from tests import helpers

# What the fourth review used: Slurm's commands read these as their options.
SLURM_OPTION_NAMES = ["SBATCH_EXPORT", "SBATCH_CONTAINER", "SBATCH_CLUSTERS", "SBATCH_ERROR",
                      "SRUN_EXPORT_ENV", "SRUN_CONTAINER", "SALLOC_EXPORT"]


@pytest.mark.parametrize("name", SLURM_OPTION_NAMES)
def test_env_refuses_slurms_own_variables(name: str) -> None:
    """SRUN_EXPORT_ENV=ALL,LD_PRELOAD=... in env.sh reached every rank's srun (item 2)."""
    with pytest.raises(SpecError) as err:
        check_env_name(name)
    assert "reserved" in str(err.value) and "SRUN_*" in str(err.value)


def test_the_magic_refuses_srun_export_env_as_one_usage_error(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.isolate_tiers(tmp_path, monkeypatch)
    ip = helpers.tiers_shell()
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("slurm_train", "--dry-run --env SRUN_EXPORT_ENV=ALL,LD_PRELOAD=/x/evil.so",
                          "print(1)\n")
    assert "SRUN_EXPORT_ENV" in str(info.value) and "evil" not in str(info.value)


@pytest.mark.parametrize("name", SLURM_OPTION_NAMES)
def test_no_profile_env_reaches_an_on_cluster_slurm_command(name: str) -> None:
    """Item 1: on the on-cluster path the profile's SBATCH_* went into every Slurm command's
    environment, whichever layer set it. A profile built by hand (config refuses the names) still
    gives the commands nothing of its env."""
    profile = Profile(name="cluster", tier="slurm", env={name: "ALL,LD_PRELOAD=/x/evil.so",
                                                         "OMP_NUM_THREADS": "2"})
    transport = transport_for(profile)
    assert isinstance(transport, LocalTransport)
    env = transport.env()
    assert name not in env and "OMP_NUM_THREADS" not in env.keys() - os.environ.keys()
    assert not any("evil" in v for v in env.values())


# --- item 3: metric patterns -------------------------------------------------------------------

# The review's pattern: with re, 10.9 s on a 21-character line, 48 s on 22, doubling per character.
HOSTILE = r"^(\d+|\w+|.)+!"


def test_a_project_files_metric_pattern_runs_in_the_linear_engine(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The review's pattern, set from a project file on the built-in local profile, on a line of 80
    characters: RE2 answers at once (re would take about 2**58 times the 21-character line's 10.9 s,
    so on the old code this test fails by pytest's timeout, not by a timed assertion)."""
    helpers.isolate_tiers(tmp_path, monkeypatch)
    (tmp_path / "tiers.yaml").write_text(
        "profiles:\n  local:\n    defaults:\n      metrics: {stall: '" + HOSTILE + "'}\n", encoding="utf-8")
    patterns = parse_patterns(load_config().profile("local").defaults["metrics"])
    parser = MetricParser(patterns)
    assert all(not isinstance(rx, re.Pattern) for _, rx in parser.custom)
    assert parser.parse("1a" * 40) == {}
    assert parser.parse("12" * 40 + "!") == {"stall": float("12" * 40)}  # a match reads its group


def test_every_custom_pattern_of_a_tracker_is_linear() -> None:
    """What the server's log thread and the kernel's watcher feed lines through."""
    tracker = MetricsTracker(patterns=parse_patterns({"stall": HOSTILE, "loss": r"loss=(\S+)"}), rank=None)
    assert tracker.parser.custom and all(not isinstance(rx, re.Pattern)
                                         for _, rx in tracker.parser.custom)
    tracker.feed_line("1a" * 2000, None)
    tracker.feed_line("loss=0.5", None)
    assert tracker.series["loss"].last == 0.5


@pytest.mark.parametrize("pattern, construct", [
    (r"(?<=loss=)(\d+)", "lookahead or lookbehind"),
    (r"loss=(\d+)(?=\s)", "lookahead or lookbehind"),
    (r"(?<!x)loss=(\d+)", "negative lookahead or lookbehind"),
    (r"(a)\1=(\d+)", "a backreference"),
    (r"(a)?(?(1)b|c)(\d)", "a conditional group"),
    (r"(?>ab)(\d)", "an atomic group"),
    (r"a++(\d)", "a possessive quantifier"),
])
def test_a_construct_the_linear_engine_lacks_is_refused_by_name(pattern: str, construct: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_patterns([f"loss={pattern}"])
    assert f"uses {construct}" in str(err.value) and "RE2" in str(err.value)


def test_ordinary_patterns_still_read_their_numbers() -> None:
    parser = MetricParser(parse_patterns({"loss": r"loss[=:] ?(\S+)", "acc": r"acc (?P<value>[0-9.]+)%"}),
                          defaults=False)
    assert parser.parse("step 3 loss: 0.25 acc 91.5%") == {"loss": 0.25, "acc": 91.5}


def test_compile_linear_fuzz() -> None:
    """A seeded fuzz of the pattern parser: any text is compiled or refused with
    LinearRegexError, never another exception; a compiled one searches a hostile line."""
    rng = random.Random(3605)
    alphabet = [*"ab()[]{}|*+?.^$\\-=:,<>!#PdswD019", "(?P<value>", "(?<=", "(?=", "(?:", "\\1", "(?>",
                "++", "{2,}", "[^", "(?i)"]
    compiled = refused = 0
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        try:
            rx = linear_regex.compile_linear(text)
        except linear_regex.LinearRegexError as exc:
            refused += 1
            assert str(exc) and "\n" not in str(exc)
            continue
        compiled += 1
        rx.search("ab" * 200 + "!")
    assert compiled > 300 and refused > 300, (compiled, refused)


# --- the two tables of environment names ---------------------------------------------------------

# Names this project's own files and the fourth review name: each must be in one table, so that
# nobody meets a name jupyter-tiers has not decided about in its own examples.
KNOWN_NAMES = ["NCCL_DEBUG", "OMP_NUM_THREADS", "PYTHONHASHSEED", "OPENSSL_CONF", "CUDA_INJECTION64_PATH",
               "NVTX_INJECTION64_PATH", "OMP_TOOL_LIBRARIES", "XDG_CACHE_HOME", "TRITON_CACHE_DIR",
               "TORCHINDUCTOR_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CC", "CUDA_HOME", "JUPYTER_CONFIG_DIR",
               "IPYTHONDIR", "GIT_EXTERNAL_DIFF", "LESSOPEN", "KRB5CCNAME", "SSH_AUTH_SOCK",
               "GOOGLE_APPLICATION_CREDENTIALS", "HOSTALIASES", "R_LIBS_USER", "JULIA_LOAD_PATH",
               "VLLM_CPU_KVCACHE_SPACE", "HF_HUB_OFFLINE", "VLLM_NO_USAGE_STATS"]


def _yaml_env_names(text: str) -> set[str]:
    """The names under every ``env:`` mapping of a YAML text (comments and all)."""
    names: set[str] = set()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "env:":
            continue
        indent = len(line) - len(line.lstrip())
        for nxt in lines[i + 1:]:
            if not nxt.strip() or nxt.lstrip().startswith("#"):
                continue
            if len(nxt) - len(nxt.lstrip()) <= indent:
                break
            names.add(nxt.strip().split(":", 1)[0])
    return names


def test_every_name_we_show_or_were_shown_is_in_one_table() -> None:
    from jupyter_tiers.config import project_trust as pt

    template = (Path(__file__).parents[2] / "examples" / "tiers.yaml.template").read_text(encoding="utf-8")
    shown = _yaml_env_names(template)
    assert {"NCCL_DEBUG", "OMP_NUM_THREADS"} <= shown  # the reader found the template's env
    for name in sorted(shown | set(KNOWN_NAMES)):
        allowed = name in pt.PROJECT_ENV
        refused = "not on the project-file environment allowlist" not in pt.refused_env_decides(name)
        assert allowed != refused or (allowed and name.startswith("PYTHON")), \
            f"{name}: in neither table (or in both) of config/project_trust.py"
    assert not set(pt.PROJECT_ENV) & set(pt.REFUSED_ENV_NAMES)
    for name in pt.PROJECT_ENV:  # a knob never names a file, directory, library or program
        assert not name.endswith(("_PATH", "_DIR", "_FILE", "_HOME", "_PLUGIN", "_URL")), name
