#!/usr/bin/env node
// Builds the console and viewer pages into packages/console/dist (Vite).
//   node packages/console/scripts/build.mjs              always builds (npm install runs this: `prepare`)
//   node packages/console/scripts/build.mjs --if-missing builds only when dist is missing (`npm start`)
// Without Vite (an install that left out devDependencies) it says so and exits 0: the server then
// answers /console and /viewer with 503 and this command.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const root = path.resolve(import.meta.dirname, '..');
const built = ['console', 'viewer'].every((page) =>
  fs.existsSync(path.join(root, 'dist', page, 'index.html')),
);
if (process.argv.includes('--if-missing') && built) process.exit(0);

let vite;
try {
  vite = await import('vite');
} catch {
  console.warn(
    'liveline console: Vite is not installed (devDependencies left out?), so /console and /viewer are not built.\n' +
      '  Install with devDependencies, then run: npm run build -w @liveline/console',
  );
  process.exit(0);
}
const started = Date.now();
await vite.build({ root, configFile: path.join(root, 'vite.config.ts'), logLevel: 'warn' });

// Each script and stylesheet also compressed (gzip and brotli, at the highest levels, once): the
// server sends the smallest one the browser accepts without compressing on every request.
const assets = path.join(root, 'dist', 'assets');
let plain = 0;
let gzipped = 0;
for (const name of fs.readdirSync(assets)) {
  if (!/\.(js|css)$/.test(name)) continue;
  const body = fs.readFileSync(path.join(assets, name));
  const gz = zlib.gzipSync(body, { level: 9 });
  fs.writeFileSync(path.join(assets, `${name}.gz`), gz);
  fs.writeFileSync(
    path.join(assets, `${name}.br`),
    zlib.brotliCompressSync(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } }),
  );
  plain += body.length;
  gzipped += gz.length;
}
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;
// What each page loads: the files its HTML names (entry, shared chunks, styles).
const weights = ['console', 'viewer'].map((page) => {
  const html = fs.readFileSync(path.join(root, 'dist', page, 'index.html'), 'utf8');
  const files = [...new Set([...html.matchAll(/\/assets\/([^"]+\.(?:js|css))"/g)].map((m) => m[1]))];
  const size = (suffix) => files.reduce((n, f) => n + fs.statSync(path.join(assets, f + suffix)).size, 0);
  return `/${page} ${kb(size(''))} (${kb(size('.gz'))} gzipped)`;
});
console.log(
  `liveline console: built in ${Date.now() - started} ms into packages/console/dist: ${weights.join(', ')}; ` +
    `all scripts and styles ${kb(plain)} (${kb(gzipped)} gzipped)`,
);
