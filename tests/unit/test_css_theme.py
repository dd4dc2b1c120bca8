"""Dark-theme readability of the widget and sidebar CSS: every colour comes from a JupyterLab theme
variable; a literal colour may appear only as a ``var()`` fallback (used outside JupyterLab), and every
``--jp-*`` variable named exists in both of JupyterLab's themes (a misspelt one would silently fall
back to the light colour)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CSS_FILES = sorted((ROOT / "jupyter_tiers" / "faces" / "widgets").glob("*.css")) + sorted(
    (ROOT / "labextension" / "style").glob("*.css")
)

# CSS named colours a stylesheet might plausibly use (transparent and currentcolor are not theme colours).
NAMED = frozenset(re.findall(r"\w+", """
    white black red green blue gray grey orange yellow purple pink brown navy teal silver maroon olive
    lime aqua fuchsia cyan magenta gold indigo violet crimson coral salmon tomato khaki beige ivory
    lightgray lightgrey darkgray darkgrey dimgray dimgrey whitesmoke gainsboro lightblue darkblue
    lightgreen darkgreen darkred orangered firebrick steelblue skyblue royalblue dodgerblue seagreen
    limegreen forestgreen goldenrod darkorange lightyellow lavender slategray slategrey"""))
COLOUR_FUNCTIONS = frozenset(["rgb", "rgba", "hsl", "hsla", "hwb", "lab", "lch", "oklab", "oklch", "color"])
TOKEN = re.compile(
    r"(?P<func>-?[A-Za-z_][\w-]*)\("  # a function call's name and its (
    r"|(?P<open>\()|(?P<close>\))|(?P<comma>,)"
    r"|(?P<hex>#[0-9A-Fa-f]{3,8})(?![\w-])"
    r"|(?P<ident>-{0,2}[A-Za-z_][\w-]*)"
    r"|(?P<string>\"[^\"]*\"|'[^']*')"
)
DECLARATION = re.compile(r"([-\w]+)\s*:\s*([^;{}]+)")


def declarations(css: str) -> list[tuple[str, str]]:
    """(property, value) of every declaration inside a rule block; comments and selectors dropped."""
    css = re.sub(r"/\*.*?\*/", " ", css, flags=re.S)
    out: list[tuple[str, str]] = []
    for body in re.findall(r"\{([^{}]*)\}", css):
        out.extend((m.group(1), m.group(2).strip()) for m in DECLARATION.finditer(body))
    return out


def bare_colours(value: str) -> list[str]:
    """The colour literals of one declaration value that are not inside a ``var()`` fallback."""
    names: list[str] = []  # the enclosing functions, innermost last ("" for a bare parenthesis)
    commas: list[int] = []  # commas seen so far inside each of them
    found: list[str] = []

    def in_fallback() -> bool:
        return any(name == "var" and n >= 1 for name, n in zip(names, commas, strict=True))

    for m in TOKEN.finditer(value):
        kind = m.lastgroup
        text = m.group(0)
        if kind == "func":
            name = m.group("func").lower()
            if name in COLOUR_FUNCTIONS and not in_fallback():
                found.append(name + "()")
            names.append(name)
            commas.append(0)
        elif kind == "open":
            names.append("")
            commas.append(0)
        elif kind == "close" and names:
            names.pop()
            commas.pop()
        elif kind == "comma" and commas:
            commas[-1] += 1
        elif (kind == "hex" or (kind == "ident" and text.lower() in NAMED)) and not in_fallback():
            found.append(text)
    return found


def jp_variables(value: str) -> list[str]:
    return re.findall(r"var\(\s*(--jp-[\w-]+)", value)


def test_the_scanner_finds_bare_colours_and_accepts_fallbacks() -> None:
    assert bare_colours("#e0e0e0") == ["#e0e0e0"]
    assert bare_colours("1px solid red") == ["red"]
    assert bare_colours("rgba(211, 47, 47, 0.12)") == ["rgba()"]
    assert bare_colours("var(--jp-error-color1, #d32f2f)") == []
    assert bare_colours("var(--jp-a, var(--jp-b, rgb(1, 2, 3)))") == []
    assert bare_colours("color-mix(in srgb, var(--jp-error-color1, #d32f2f) 14%, transparent)") == []
    assert bare_colours("color-mix(in srgb, var(--jp-error-color1) 14%, #fff)") == ["#fff"]
    assert bare_colours("0 0 0 1px var(--jp-ui-font-color0) , black") == ["black"]
    assert bare_colours("var(--jt-cols, 16)") == []
    assert bare_colours("repeat(var(--jt-cols, 16), 12px)") == []
    assert declarations('.a[data-x="1"] { color: #fff; } /* b { color: red } */ .c{x:y}') == [
        ("color", "#fff"), ("x", "y")]


def test_scanner_fuzz_matches_how_each_literal_was_placed() -> None:
    """Seeded fuzz: values assembled from pieces whose verdict is known; the scanner agrees, and
    arbitrary text never raises."""
    rng = random.Random(20261202)
    bare = ["#abc", "#a0b1c2", "red", "rgb(1, 2, 3)", "hsla(0, 0%, 0%, 0.5)"]
    ok = ["var(--jp-x, {})", "color-mix(in srgb, var(--jp-x, {}) 30%, transparent)",
          "var(--jp-a, var(--jp-b, {}))"]
    fillers = ["1px", "solid", "0 0 0 2px", "var(--jp-layout-color1)", "transparent", "12px", "inherit"]
    for _ in range(500):
        parts: list[str] = []
        expected = 0
        for _ in range(rng.randint(1, 5)):
            roll = rng.random()
            if roll < 0.3:
                parts.append(rng.choice(bare))
                expected += 1
            elif roll < 0.6:
                parts.append(rng.choice(ok).format(rng.choice(bare)))
            else:
                parts.append(rng.choice(fillers))
        value = " ".join(parts)
        assert len(bare_colours(value)) == expected, value
    alphabet = "#(),;:{}abcdefrgvr-0123456789 %'\"/*"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        for _prop, value in declarations(text):
            bare_colours(value)


@pytest.mark.parametrize("path", CSS_FILES, ids=lambda p: p.name)
def test_css_colours_come_from_theme_variables(path: Path) -> None:
    bad = [f"{prop}: {value}  ->  {lit}" for prop, value in declarations(path.read_text())
           for lit in bare_colours(value)]
    where = path.relative_to(ROOT)
    assert not bad, f"{where} hard-codes colours (use var(--jp-…, fallback)):\n" + "\n".join(bad)


def test_css_files_are_found() -> None:
    names = {p.name for p in CSS_FILES}
    assert {"job_view.css", "serve_view.css", "base.css"} <= names, names


def _theme_variables(theme: str) -> set[str]:
    jupyterlab = pytest.importorskip("jupyterlab", reason="no JupyterLab: its themes are the reference")
    themes = Path(jupyterlab.__file__).parent / "themes" / "@jupyterlab"
    css = themes / f"theme-{theme}-extension" / "index.css"
    if not css.is_file():
        pytest.skip(f"JupyterLab's {theme} theme CSS is not at {css}")
    return set(re.findall(r"(--jp-[\w-]+)\s*:", css.read_text()))


def test_every_jp_variable_named_exists_in_light_and_dark_themes() -> None:
    light, dark = _theme_variables("light"), _theme_variables("dark")
    used = {v for path in CSS_FILES for _p, value in declarations(path.read_text())
            for v in jp_variables(value)}
    assert used, "no --jp- variables found: the scan is broken"
    assert not used - light, f"not defined by JupyterLab's light theme: {sorted(used - light)}"
    assert not used - dark, f"not defined by JupyterLab's dark theme: {sorted(used - dark)}"
