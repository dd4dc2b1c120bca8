"""The docs site stays complete and the README's move to it stays mechanical.

- the generated reference (docs/_ext/jt_reference.py) lists every option of both magics, every
  profile key and ``defaults`` key, every ``%tiers`` subcommand, every REST route and every FAIL
  of the doctor; every generated table is on a page;
- README.md is the front door (docs/_tools/front_door.py moved its sections into the pages): it
  stays short, no page includes it any more, and its links lead to files that exist;
- the internal link check finds what is broken, and the pure helpers survive arbitrary input.

The Sphinx build itself (warnings as errors) is tests/run.sh's "docs" phase.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import random
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path[:0] = [str(DOCS / "_ext"), str(DOCS / "_tools")]

import front_door  # noqa: E402
import jt_reference as ref  # noqa: E402

from jupyter_tiers.config.profiles import TIER_KEYS, TIERS, default_keys  # noqa: E402
from jupyter_tiers.spec.options import JOB_OPTIONS, SERVE_OPTIONS  # noqa: E402


@pytest.mark.parametrize("magic,options", [("slurm_train", JOB_OPTIONS), ("k8s_serve", SERVE_OPTIONS)])
def test_magic_reference_lists_every_option_and_flag(magic: str, options: tuple) -> None:
    text = ref.generate(magic)
    for option in options:
        if option.help:  # an option without help text is not on the magic line (--toleration)
            assert f"`{option.flag}" in text, f"%%{magic} reference lacks {option.flag}"
    for action in ref.magic_parser(magic)._actions:
        if not isinstance(action, argparse._HelpAction):
            assert action.option_strings[0] in text, f"%%{magic} reference lacks {action.option_strings}"


def test_profile_reference_lists_every_key_of_every_tier_with_a_meaning() -> None:
    text = ref.generate("profile-keys")
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z_]+)` \|.*$", text, re.M)}
    for tier in TIERS:
        for key in TIER_KEYS[tier]:
            assert key in rows, f"profile reference lacks {tier} key {key}"
            assert ref.PROFILE_KEY_DOCS[key] .split()[0] in rows[key]
    defaults = ref.generate("defaults-keys")
    for tier in TIERS:
        for key in default_keys(tier):
            assert re.search(rf"^\| `{key}` \|", defaults, re.M), f"defaults reference lacks {key}"


def test_a_profile_key_without_a_description_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(TIER_KEYS["slurm"], "brand_new_key", str)
    with pytest.raises(ValueError, match="brand_new_key"):
        ref.generate("profile-keys")


def test_tiers_reference_lists_every_subcommand() -> None:
    from jupyter_tiers.faces.tiers_command import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = ref.generate("tiers-command")
    for name in sub.choices:
        assert f"| `{name}` |" in text


def test_rest_reference_lists_every_route_with_named_parameters() -> None:
    from jupyter_tiers.faces.server.handlers import handler_table

    routes = ref.routes()
    assert [r.handler for r in routes] == [cls.__name__ for _, cls in handler_table("/")]
    paths = {r.path: r for r in routes}
    assert paths["jobs/{profile}/{job_id}"].methods == ("GET", "DELETE")
    assert paths["jobs/{profile}/{job_id}/cancel|scale|restart|promote|rollback|forget"].methods == ("POST",)
    assert paths["events"].websocket and not paths["jobs"].websocket
    assert all("(" not in r.path for r in routes), [r.path for r in routes]
    text = ref.generate("routes")
    assert all(f"`{r.path.replace('|', chr(92) + '|')}`" in text for r in routes)


def _doctor_calls(status: str) -> list[tuple[str, int]]:
    """Every ``fail(...)`` call of the doctor's modules, found independently of jt_reference."""
    found = []
    for path in sorted((ROOT / "jupyter_tiers" / "doctor").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == status:
                found.append((path.stem, node.lineno))
    return found


def test_troubleshooting_lists_every_fail_of_the_doctor_with_its_fix() -> None:
    lines = ref.doctor_lines()
    fails = [d for d in lines if d.status == "FAIL"]
    assert sorted((d.where.split(".py:")[0], int(d.where.split(":")[1])) for d in fails) == \
        sorted(_doctor_calls("fail"))
    text = ref.generate("doctor-fail")
    for d in fails:
        assert d.fix and f"`{d.where}`" in text
        # the fix's words, as the doctor prints them, are in the table
        words = [w for w in re.split(r"⟨[^⟩]*⟩", d.fix) if len(w.strip()) > 12]
        assert words, (f"the doctor's FAIL at {d.where} has no fix text the docs can show: write "
                       "its fix as a literal or an f-string in the fail() call")
        assert all(ref.md_escape(w.strip()) in text for w in words), d
    # the well-known ones read as the user sees them
    assert "the doctor never adds it" in text and "ssh-keyscan" not in ref.generate("doctor-warn")


def test_every_generated_table_is_on_a_page_and_every_page_names_a_known_table() -> None:
    used = set()
    for page in DOCS.rglob("*.md"):
        for name in re.findall(r"^```\{jt-reference\} (\S+)$", page.read_text(encoding="utf-8"), re.M):
            assert name in ref.GENERATORS, f"{page}: unknown table {name}"
            used.add(name)
    assert used == set(ref.GENERATORS)


def test_front_door_is_short_and_its_links_exist() -> None:
    draft = front_door.README.read_text(encoding="utf-8")
    assert front_door.readme_includes() == [], "a docs page still includes README.md"
    assert draft.count("\n") <= 200
    links = re.findall(r"\]\(([^)#\s]+)", draft)
    assert len(links) > 15
    for link in links:
        assert "://" in link or (ROOT / link).exists(), f"front door links to a missing {link}"


def test_broken_links_finds_missing_files_and_anchors(tmp_path: Path) -> None:
    pytest.importorskip("sphinx")
    from jt_docs import broken_links

    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="sub/page.html#here">ok</a><a href="sub/page.html#gone">x</a><a href="#top">t</a>'
        '<a href="missing.html">m</a><a href="https://example.org/x">ext</a><img src="img.png">'
        '<span id="top"></span>')
    (tmp_path / "sub" / "page.html").write_text('<h2 id="here">h</h2><a href="../index.html">up</a>')
    (tmp_path / "img.png").write_bytes(b"")
    assert broken_links(tmp_path) == ["index.html: sub/page.html#gone (no such anchor)",
                                      "index.html: missing.html"]


def test_fuzz_pure_helpers_never_crash_and_keep_a_cell_one_line() -> None:
    """Seeded: md_escape keeps one line with no unescaped pipe outside code; the route namer and
    the include reader take arbitrary text; slice_of fails only with ValueError."""
    rng = random.Random(21)
    alphabet = "ab |*_<>[]`\\\n(){}%-:\"'#"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
        cell = ref.md_escape(text)
        assert "\n" not in cell
        outside = re.split(r"`+[^`]*`+", cell)
        assert all(re.search(r"(?<!\\)\|", part) is None for part in outside), (text, cell)
        ref._route_path(text, ["a", "b"])
        include = front_door.Include(DOCS / "index.md", 0, 0, {"start-after": text[:10],
                                                               "end-before": text[10:]})
        with contextlib.suppress(ValueError):
            front_door.slice_of(text * 2, include)


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
                                        if "```yaml\nprofiles:" in p.read_text(encoding="utf-8")
                                        or "```yaml\ndefault_profile:" in p.read_text(encoding="utf-8")))
def test_the_docs_profile_examples_are_valid_tiers_yaml(page: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_tiers.config.profiles import load_config

    text = (DOCS / page).read_text(encoding="utf-8")
    for block in re.findall(r"```yaml\n((?:profiles|default_profile):.*?)```", text, re.S):
        path = tmp_path / "tiers.yaml"
        path.write_text(block)
        monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
        monkeypatch.setattr("jupyter_tiers.config.profiles.SYSTEM_PATH", tmp_path / "none.yaml")
        monkeypatch.setattr("jupyter_tiers.config.profiles.USER_PATH", tmp_path / "none2.yaml")
        assert load_config().profiles


def test_the_security_table_and_the_project_file_column_come_from_the_allowlist() -> None:
    """Issue 26: docs/security.md's table and the profile reference's column are PROJECT_KEYS."""
    from jupyter_tiers.config.project_trust import PROJECT_KEYS

    table = ref.generate("project-trust")
    for key, row in PROJECT_KEYS.items():
        line = re.search(rf"^\| `{re.escape(key)}` \|.*$", table, re.M)
        assert line, f"security table lacks {key}"
        cells = [c.strip() for c in line.group(0).strip("|").split("|")]
        assert cells[1:3] == ["yes" if row.on_trusted else "no", "yes" if row.on_own else "no"], key
    keys = ref.generate("profile-keys")
    assert re.search(r"^\| `setup` \|.*never \(decides which code runs\)", keys, re.M)
    assert re.search(r"^\| `host` \|.*only in its own profiles", keys, re.M)
    defaults = ref.generate("defaults-keys")
    assert re.search(r"^\| `checkpoint_to` \|.*never \(decides where files and credentials go\)",
                     defaults, re.M)
    assert re.search(r"^\| `nodes` \|.*may set", defaults, re.M)
    assert "```{jt-reference} project-trust" in (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
