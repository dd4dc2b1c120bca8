// Copies uPlot (npm package `uplot`, MIT, pinned in package.json) from node_modules into
// jupyter_tiers/faces/widgets/vendor/, where both hosts load it: the notebook widgets through
// esm_link.py (one module string, no CDN) and the sidebar through webpack. The minified IIFE build
// is wrapped as `export const uPlot = ...` (the one export form esm_link.py reads); the files are
// checked in, so a clone runs without Node; tests/unit/test_chart_vendor.py checks they match
// what this script makes from node_modules. Run: jlpm vendor (also run by build:if-changed).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(pkg, "node_modules", "uplot");
const out = join(pkg, "..", "jupyter_tiers", "faces", "widgets", "vendor");

export function vendored(srcDir) {
  const version = JSON.parse(readFileSync(join(srcDir, "package.json"), "utf8")).version;
  const iife = readFileSync(join(srcDir, "dist", "uPlot.iife.min.js"), "utf8").trimEnd();
  const js =
    `// uPlot ${version} (https://github.com/leeoniya/uPlot, MIT: LICENSE.uplot beside this file), its\n` +
    "// dist/uPlot.iife.min.js wrapped as one ES module export by labextension/scripts/vendor-uplot.mjs.\n" +
    "// Generated: do not edit; run `jlpm vendor` in labextension/ after changing the pinned version.\n" +
    "export const uPlot = (() => {\n" + iife + "\nreturn uPlot;\n})();\n";
  return {
    "uplot.js": js,
    "uplot.css": `/* uPlot ${version} dist/uPlot.min.css (MIT), copied by labextension/scripts/vendor-uplot.mjs */\n` +
      readFileSync(join(srcDir, "dist", "uPlot.min.css"), "utf8").trimEnd() + "\n",
    "LICENSE.uplot": readFileSync(join(srcDir, "LICENSE"), "utf8"),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!existsSync(src)) {
    console.error("[vendor] labextension/node_modules/uplot is missing: run jlpm install first");
    process.exit(1);
  }
  mkdirSync(out, { recursive: true });
  const check = process.argv.includes("--check");
  let stale = [];
  for (const [name, text] of Object.entries(vendored(src))) {
    const path = join(out, name);
    const same = existsSync(path) && readFileSync(path, "utf8") === text;
    if (same) continue;
    if (check) stale.push(name);
    else writeFileSync(path, text);
  }
  if (stale.length) {
    console.error(`[vendor] out of date with node_modules/uplot: ${stale.join(", ")} (run jlpm vendor)`);
    process.exit(1);
  }
}
