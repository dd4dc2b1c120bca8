// Builds the labextension (tsc, jupyter-builder) only when its sources changed since the
// last build: a sha256 over every source file, stamped in .build-stamp next to this package.
// Used by the wheel build (hatch-jupyter-builder's build_cmd) and by tests/bootstrap.sh, so an
// unchanged tree costs a hash of a few files instead of a build.
import { createHash } from "node:crypto";
import { execSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const repo = join(pkg, "..");
const stamp = join(pkg, ".build-stamp");
const output = join(repo, "jupyter_tiers", "labextension", "package.json");
const mode = process.argv.includes("--dev") ? "build" : "build:prod";

function files(dir, keep = () => true) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === "node_modules") return [];
    return statSync(path).isDirectory() ? files(path, keep) : keep(name) ? [path] : [];
  });
}

// uPlot's copy in the widgets' vendor/ follows the version package.json pins (vendor-uplot.mjs).
execSync("node scripts/vendor-uplot.mjs", { cwd: pkg, stdio: "inherit" });

const sources = [
  ...files(join(pkg, "src")),
  ...files(join(pkg, "style")),
  ...files(join(pkg, "scripts")),
  ...["package.json", "tsconfig.json", "yarn.lock"].map((f) => join(pkg, f)),
  ...files(join(repo, "jupyter_tiers", "faces", "widgets"), (n) => /\.(js|css|json)$/.test(n)),
].sort();

const hash = createHash("sha256");
for (const path of sources) {
  hash.update(relative(repo, path) + "\0");
  hash.update(readFileSync(path));
  hash.update("\0");
}
const want = `${hash.digest("hex")} ${mode}`;

if (existsSync(output) && existsSync(stamp) && readFileSync(stamp, "utf8").trim() === want) {
  console.log("[labextension] sources unchanged since the last build: skipped");
} else {
  console.log(`[labextension] building (jlpm ${mode})`);
  execSync(`jlpm ${mode}`, { cwd: pkg, stdio: "inherit" });
  writeFileSync(stamp, want + "\n");
}
