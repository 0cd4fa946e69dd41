// `npm run bench`: every benchmark, each in its own child process (its own server), on SQLite
// and, when DATABASE_URL is set, on PostgreSQL. Prints one JSON line per result.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const benches = [
  'ingest.ts',
  'commands.ts',
  'tracing.ts',
  'queries.ts',
  'sqlite-event-loop.ts',
  'thread-hop.ts',
  'fuzz.ts',
];
/** Benchmarks of the SQLite driver (or of the machine) in one process without a server: run once. */
const sqliteOnly = new Set(['sqlite-event-loop.ts', 'thread-hop.ts']);
const backends = process.env.DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];
let failed = false;
for (const bench of benches) {
  for (const backend of backends) {
    if (sqliteOnly.has(bench) && backend !== 'sqlite') continue;
    const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, bench)], {
      env: { ...process.env, BENCH_BACKEND: backend },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (run.status !== 0) failed = true;
  }
}
// Commands at fleet scale (docs/performance.md): each file with its arguments; each bounds its own time.
const fleetBenches: string[][] = [
  ['command-load.ts', '--durable-relay'],
  ['command-load.ts', '--find-max', '--durable-relay'],
  ['idle-sockets.ts'],
  ['cohort-commands.ts'],
  ['tail.ts'],
];
for (const [bench, ...args] of fleetBenches) {
  for (const backend of backends) {
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', path.join(import.meta.dirname, bench), ...args],
      { env: { ...process.env, BENCH_BACKEND: backend }, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    if (run.status !== 0) failed = true;
  }
}
process.exit(failed ? 1 : 0);
