// Bundles the `liveline` CLI (and so the server) into one JavaScript file with esbuild, for the tests
// that start real processes: loading it costs a third to a half of the CPU that loading the TypeScript
// through tsx does (1.0 to 2.5 s less per process, on Node 24 and 20), and the suite starts hundreds.
// Users run the TypeScript through tsx (`npm start`, `bin/liveline.js`); the tests of those paths still
// do. npm packages stay external (imported from node_modules at run time); the workspace packages are
// bundled in.
//
// The output sits at the same depth below packages/server as src/cli, so the paths the code finds from
// its own location (the console's build, package.json, the SQLite worker beside its driver) hold.
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

const SERVER = path.resolve(import.meta.dirname, '..');
const PACKAGES = path.dirname(SERVER);
export const BUNDLE_DIR = path.join(SERVER, 'dist', 'cli');
export const BUNDLE = path.join(BUNDLE_DIR, 'liveline.mjs');
// Plain JavaScript the worker thread loads by path (storage/dialects/sqlite-thread.ts).
const WORKER_FILES = ['sqlite-worker.js', 'better-sqlite3.js'];

function dependencies(pkg) {
  const json = JSON.parse(fs.readFileSync(path.join(PACKAGES, pkg, 'package.json'), 'utf8'));
  return Object.keys({ ...json.dependencies, ...json.optionalDependencies });
}

/** Builds the bundle (about half a second); replaces the files atomically, so a run in progress is unharmed. */
export async function bundle() {
  const external = ['server', 'client', 'protocol', 'tenant']
    .flatMap(dependencies)
    .filter((name) => !name.startsWith('@liveline/'));
  fs.mkdirSync(BUNDLE_DIR, { recursive: true });
  const suffix = `.${process.pid}.tmp`;
  await build({
    entryPoints: [path.join(SERVER, 'src/cli/main.ts')],
    outfile: BUNDLE + suffix,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: [...external, './sqlite-worker.js'],
    // CommonJS dependencies bundled in ESM call require(): give the bundle one.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    },
    sourcemap: 'inline',
    logLevel: 'warning',
  });
  fs.renameSync(BUNDLE + suffix, BUNDLE);
  for (const file of WORKER_FILES) {
    fs.copyFileSync(path.join(SERVER, 'src/storage/dialects', file), path.join(BUNDLE_DIR, file + suffix));
    fs.renameSync(path.join(BUNDLE_DIR, file + suffix), path.join(BUNDLE_DIR, file));
  }
  return BUNDLE;
}

if (process.argv[1] === import.meta.filename) console.log(await bundle());
