// `make web`: bundle src/ into server/web_static/ (shipped in the Python package), and record a
// hash of the sources there so that a test notices a stale build.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const here = import.meta.dirname;
const out = join(here, "..", "server", "web_static");

// The same files, in the same order, as tests/web/test_build.py hashes.
export function sourcesHash() {
  const files = [
    ...readdirSync(join(here, "src")).map((name) => `src/${name}`),
    "build.mjs", "package.json", "package-lock.json",
  ].sort();
  const hash = createHash("sha256");
  for (const file of files) {
    hash.update(`${file}\0`); hash.update(readFileSync(join(here, file))); hash.update("\0");
  }
  return hash.digest("hex");
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(here, "src", "main.js")], bundle: true, format: "esm", platform: "browser",
  target: "es2022", minify: true, legalComments: "eof", outfile: join(out, "app.js"), logLevel: "warning",
});
for (const name of ["index.html", "style.css"]) copyFileSync(join(here, "src", name), join(out, name));
writeFileSync(join(out, "build.json"), JSON.stringify({ sources_sha256: sourcesHash() }, null, 2) + "\n");
console.log(`built ${out}`);
