"""widgets/esm_link.py, the linker that makes one ES module of a view and what it imports (for
anywidget's ``_esm``): the linked module does what node's own ES modules do (seeded random
module graphs, run both ways), what it cannot read is a short LinkError naming the file, and
random text is an answer or a LinkError, never another exception."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_tiers.faces.widgets.esm_link import LinkError, link, parse
from tests.unit.widget_js import WIDGETS, node_or_skip

SEED = 20261203


def reader(files: dict[str, str]) -> Callable[[str], str]:
    def read(name: str) -> str:
        if name not in files:
            raise FileNotFoundError(2, "No such file or directory")
        return files[name]
    return read


def run_both(tmp_path: Path, graphs: list[dict[str, str]]) -> list[dict[str, object]]:
    """For each graph (file -> text, entry ``m0.js``): its entry's ``default.run()`` and the order
    the modules ran in, once as node's ES modules and once linked; one node process for all."""
    node = node_or_skip("ES module linker tests")
    (tmp_path / "package.json").write_text('{"type": "module"}\n')
    lines = ["const out = [];"]
    for k, files in enumerate(graphs):
        folder = tmp_path / f"g{k}"
        folder.mkdir()
        for name, text in files.items():
            (folder / name).parent.mkdir(exist_ok=True)
            (folder / name).write_text(text)
        (folder / "linked.js").write_text(link("m0.js", reader(files)))
        lines.append(f"""
globalThis.ran = [];
const native{k} = (await import("./g{k}/m0.js")).default.run();
const nativeOrder{k} = globalThis.ran;
globalThis.ran = [];
const linked{k} = (await import("./g{k}/linked.js")).default.run();
out.push({{ native: native{k}, nativeOrder: nativeOrder{k},
            linked: linked{k}, linkedOrder: globalThis.ran }});""")
    lines.append("console.log(JSON.stringify(out));")
    (tmp_path / "driver.js").write_text("\n".join(lines))
    res = subprocess.run([node, "driver.js"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def random_graph(rng: random.Random) -> dict[str, str]:
    """Modules m0..mN (m0 the entry); mI imports only from mJ, J > I (no cycle). Every module has
    the same private names (its scope must stay its own), logs when it runs, and exports
    functions, consts and a class whose values show what they called."""
    n = rng.randint(1, 6)
    exports: dict[int, list[str]] = {}
    for i in range(n - 1, -1, -1):
        names = [f"f{k}" for k in range(rng.randint(1, 3))] + [f"c{k}" for k in range(rng.randint(0, 2))]
        if rng.random() < 0.3:
            names.append("K0")
        exports[i] = names
    files = {}
    for i in range(n):
        taken = {"secret", "helper", *exports[i]}
        imports: list[tuple[int, list[tuple[str, str]]]] = []
        for j in range(i + 1, n):
            if rng.random() < 0.6:
                chosen = rng.sample(exports[j], rng.randint(1, len(exports[j])))
                pairs = []
                for name in chosen:
                    local = name
                    if local in taken or rng.random() < 0.3:
                        local = f"{name}_of{j}"
                    taken.add(local)
                    pairs.append((name, local))
                imports.append((j, pairs))
        if i == 0 and not imports and n > 1:
            imports.append((1, [(exports[1][0], f"{exports[1][0]}_of1")]))
        head = []
        for j, pairs in imports:
            names = [n_ if n_ == loc else f"{n_} as {loc}" for n_, loc in pairs]
            quote = rng.choice("\"'")
            if rng.random() < 0.3:
                body = ",\n  ".join(names) + ("," if rng.random() < 0.5 else "")
                head.append(f"import {{\n  {body}\n}} from {quote}./m{j}.js{quote};")
            else:
                head.append(f"import {{ {', '.join(names)} }} from {quote}./m{j}.js{quote}"
                            + (";" if rng.random() < 0.7 else ""))
        calls = []
        for _, pairs in imports:
            for name, local in pairs:
                if name.startswith("f"):
                    calls.append(f"{local}()")
                elif name.startswith("c"):
                    calls.append(local)
                else:
                    calls.append(f"new {local}().v")
        joined = " + '|' + ".join(calls) if calls else "''"
        body = [f'globalThis.ran.push("m{i}");', f'const secret = "m{i}";',
                "function helper() { return secret; }"]
        for name in exports[i]:
            if name.startswith("f"):
                value = f"'{name}@' + helper() + '(' + {joined} + ')'"
                body.append(f"export function {name}() {{ return {value}; }}")
            elif name.startswith("c"):
                body.append(f"export const {name} = '{name}@' + secret;")
            else:
                body.append(f"export class {name} {{ constructor() {{ this.v = '{name}@' + helper(); }} }}")
        if i == 0:
            everything = [f"{name}()" if name.startswith("f") else name if name.startswith("c")
                          else f"new {name}().v" for name in exports[0]]
            body.append("export default {\n  run: () => [" + ", ".join(everything + calls) + "],\n};")
        files[f"m{i}.js"] = "\n".join([f"// module m{i}", *head, "", *body]) + "\n"
    return files


def test_a_linked_view_runs_as_node_runs_its_modules(tmp_path: Path) -> None:
    files = {
        "m0.js": 'import { a, b as bee } from "./m1.js";\nimport { c } from "./m2.js";\n'
                 'globalThis.ran.push("m0");\nconst secret = 0;\n'
                 "export default { run: () => [a(), bee, c(), secret] };\n",
        "m1.js": 'import { c } from "./m2.js";\nglobalThis.ran.push("m1");\nconst secret = 1;\n'
                 "export function a() { return `a${secret}${c()}`; }\nexport const b = secret + 10;\n",
        "m2.js": 'globalThis.ran.push("m2");\nconst secret = 2;\nexport function c() { return secret; }\n',
    }
    [out] = run_both(tmp_path, [files])
    assert out["native"] == out["linked"] == ["a12", 11, 2, 0]  # each module its own `secret`
    assert out["nativeOrder"] == out["linkedOrder"] == ["m2", "m1", "m0"]  # m2 once, first


def test_a_vendored_library_links_as_node_runs_it(tmp_path: Path) -> None:
    files = {
        "m0.js": 'import { lib } from "./vendor/lib.js";\nglobalThis.ran.push("m0");\n'
                 "export default { run: () => [lib(2)] };\n",
        "vendor/lib.js": '// copied in\nexport const lib = (() => {\nvar lib=function(){"use strict";'
                         'return function(x){return x*21}}();\nreturn lib;\n})();\n'
                         'globalThis.ran.push("lib");\n',
    }
    [out] = run_both(tmp_path, [files])
    assert out["native"] == out["linked"] == [42]
    assert out["nativeOrder"] == out["linkedOrder"] == ["lib", "m0"]


def test_seeded_random_module_graphs_link_to_what_node_runs(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    graphs = [random_graph(rng) for _ in range(40)]
    for k, out in enumerate(run_both(tmp_path, graphs)):
        assert out["linked"] == out["native"], graphs[k]
        assert out["linkedOrder"] == out["nativeOrder"], graphs[k]


END = "export default 1;\n"  # the entry's default export, in the cases below


@pytest.mark.parametrize(("files", "says"), [
    ({"m0.js": 'import { a } from "./m1.js";\n' + END, "m1.js": 'import { b } from "./m0.js";\n'},
     "an import cycle: m0.js -> m1.js -> m0.js"),
    ({"m0.js": 'import { nope } from "./m1.js";\n' + END, "m1.js": "export const a = 1;\n"},
     "m0.js imports nope from m1.js, which does not export it"),
    ({"m0.js": 'import { a } from "./gone.js";\n' + END}, "cannot read gone.js (imported by m0.js)"),
    ({"m0.js": 'import { a } from "lodash";\n' + END}, "m0.js:1: an import the linker does not read"),
    ({"m0.js": 'import { a } from "./../x.js";\n' + END}, "a .js file beside m0.js"),
    ({"m0.js": 'import { a } from "./lib/x.js";\n' + END}, "a .js file beside m0.js or in vendor/"),
    ({"m0.js": 'import { a } from "./vendor/v.js";\n' + END, "vendor/v.js": 'import { b } from "./m1.js";\n'},
     "vendor/v.js: a module in vendor/ imports nothing"),
    ({"m0.js": 'import a from "./m1.js";\n' + END}, "m0.js:1: an import the linker does not read"),
    ({"m0.js": 'import { default as a } from "./m1.js";\n' + END}, "cannot read the imported name"),
    ({"m0.js": "export let x = 1;\n" + END}, "m0.js:1: 'export let x = 1;' is not a statement"),
    ({"m0.js": "export default function render() {}\n"}, "m0.js:1:"),
    ({"m0.js": "export { a };\n" + END}, "m0.js:1:"),
    ({"m0.js": "const x = 1;\n  export const y = 2;\n" + END}, "m0.js:2:"),
    ({"m0.js": 'const m = import("./m1.js");\n' + END}, "m0.js:1:"),
    ({"m0.js": "export const a = 1;\n"}, "m0.js has no export default"),
    ({"m0.js": "const __jt_0 = 1;\n" + END}, "the prefix __jt_ is the linker's own"),
    ({"m0.js": 'import { a } from "./m1.js";\nimport { a } from "./m2.js";\n' + END,
      "m1.js": "export const a = 1;\n", "m2.js": "export const a = 2;\n"}, "m0.js:2: a is imported twice"),
    ({"m0.js": 'import { a } from "./m1.js";\nexport function a() {}\n' + END,
      "m1.js": "export const a = 1;\n"}, "m0.js: a both imported and exported"),
    ({"m0.js": "export const a = 1;\nexport function a() {}\n" + END}, "m0.js:2: a is exported twice"),
])
def test_what_the_linker_cannot_read_is_a_short_error_naming_the_file(files: dict[str, str],
                                                                      says: str) -> None:
    with pytest.raises(LinkError) as err:
        link("m0.js", reader(files))
    assert says in str(err.value) and len(str(err.value)) < 300


def test_fuzz_random_text_links_or_is_a_link_error() -> None:
    """Mutated widget modules and token soup: a linked module or a LinkError, nothing else."""
    rng = random.Random(SEED)
    real = {p.name: p.read_text(encoding="utf-8") for p in WIDGETS.glob("*.js")}
    tokens = ["import", "export", "default", "{", "}", "from", '"./view_common.js"', "'./x.js'", "as", ",",
              ";", "\n", " ", "function", "const", "let", "class", "async", "(", ")", "=", "__jt_", "h",
              "import(", "import.meta", "*", "\t", "fmt", "`", '"', "/*", "//"]
    outcomes = {"linked": 0, "refused": 0}
    for _ in range(700):
        files = dict(real)
        name = rng.choice(sorted(files))
        text = files[name]
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(0, len(text))
            if rng.random() < 0.5:
                text = text[:at] + "".join(rng.choice(tokens) for _ in range(rng.randint(1, 6))) + text[at:]
            else:
                text = text[:at] + text[at + rng.randint(1, 40):]
        files[name] = text
        entry = rng.choice(["job_view.js", "serve_view.js", "array_view.js", name])
        try:
            out = link(entry, reader(files))
        except LinkError as exc:
            assert 0 < len(str(exc)) < 400
            outcomes["refused"] += 1
        else:
            assert out.rstrip().endswith(".default;")
            outcomes["linked"] += 1
    assert outcomes["linked"] > 50 and outcomes["refused"] > 50, outcomes


def test_parse_keeps_line_numbers_and_reads_only_the_statements_at_the_start_of_a_line() -> None:
    text = ('import {\n  a,\n  b as c,\n} from "./x.js";\n'
            "const s = `import { z } from './y.js'`;\nexport async function f() {}\nexport default { f };\n")
    module = parse("m.js", text)
    assert module.imports == (("x.js", (("a", "a"), ("b", "c"))),)
    assert module.exports == ("f", "default")
    assert module.body.split("\n")[4:7] == ["const s = `import { z } from './y.js'`;",
                                           "async function f() {}", "const __jt_default = { f };"]
    assert len(module.body.split("\n")) == len(text.split("\n"))
