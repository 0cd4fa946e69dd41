// Event-loop blocking by SQLite: a steady stream of small write transactions (one command row per
// commit, as command inserts are) at R commits/s through the Storage, while
// `perf_hooks.monitorEventLoopDelay` measures how long the event loop is held up, and a reader
// does a point select every few milliseconds. Compares, in one process, each way SQLite can be
// driven: `direct` (better-sqlite3 on the event loop, as before the worker), `worker+worker-reads`
// (every statement in the worker thread) and `worker+main-reads` (the default: writes and
// transactions in the worker, other selects on a main-thread read-only connection). The modes take
// turns, D seconds each, for N rounds (a shared disk's fsync rate drifts: turns spread the drift
// over every mode), each turn on a fresh store. Prints one JSON line per mode and one with the
// ratios to `direct`. synchronous=FULL unless BENCH_SYNCHRONOUS=NORMAL.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  createHistogram,
  type IntervalHistogram,
  monitorEventLoopDelay,
  type RecordableHistogram,
} from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSqliteStorage, type SqliteOptions } from '../packages/server/src/storage/dialects/sqlite.ts';
import { migrate } from '../packages/server/src/storage/index.ts';
import type { Storage } from '../packages/server/src/storage/storage.ts';
import { percentile } from './lib.ts';

const rate = Number(process.env.BENCH_COMMITS_PER_SECOND ?? 2000);
const seconds = Number(process.env.BENCH_SECONDS ?? 3);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const synchronous = (process.env.BENCH_SYNCHRONOUS ?? 'FULL') as SqliteOptions['synchronous'];
/** Most transactions waiting at once; beyond, the generator skips ticks (the store is saturated). */
const maxOutstanding = 256;
const readEveryMs = 5;

type Mode = 'direct' | 'worker+worker-reads' | 'worker+main-reads';
const modes: Mode[] = ['direct', 'worker+worker-reads', 'worker+main-reads'];

const ms = (ns: number) => Number((ns / 1e6).toFixed(2));
const round = (x: number) => Number(x.toFixed(2));

interface Totals {
  /** Event-loop delays of this mode's turns, merged. */
  delay: RecordableHistogram;
  commitLatencies: number[];
  readLatencies: number[];
  committed: number;
  skipped: number;
  elapsed: number;
}

/** Adds `from`'s distribution to `into`, at the resolution of its percentile steps. */
function mergeInto(into: RecordableHistogram, from: IntervalHistogram) {
  let previous = 0;
  for (const [p, value] of from.percentiles) {
    const n = Math.round(((p - previous) / 100) * from.count);
    for (let i = 0; i < n; i++) into.record(Math.max(1, Math.round(value)));
    previous = p;
  }
}

/** One turn of `mode`, added to its totals. */
async function run(mode: Mode, totals: Totals) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-bench-loop-'));
  const storage: Storage = await createSqliteStorage({
    dataDir,
    synchronous,
    thread: mode === 'direct' ? 'main' : 'worker',
    reads: mode === 'worker+main-reads' ? 'main' : 'worker',
  });
  try {
    await migrate(storage);
    const { db } = storage;
    let seq = 0;
    const insertOne = () => {
      const now = Date.now();
      const n = seq++;
      return db.transaction().execute(async (trx) => {
        await trx
          .insertInto('commands')
          .values({
            command_id: `c${n}`,
            session_id: `s${n % 64}`,
            tenant_id: 't',
            name: 'text',
            data: '{"text":"hello"}',
            status: 'queued',
            issued_at: now,
            expires_at: now + 60_000,
            delivered_at: null,
            settled_at: null,
            error: null,
            idempotency_key: null,
            request_hash: null,
          })
          .execute();
      });
    };
    // Warm up: statements prepared, the worker's code compiled.
    for (let i = 0; i < 200; i++) await insertOne();

    const commitLatencies: number[] = [];
    const readLatencies: number[] = [];
    let outstanding = 0;
    let committed = 0;
    let skipped = 0;
    // A fresh monitor per turn (re-enabling one counts the pause as a delay), merged afterwards.
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    histogram.enable();
    const start = performance.now();
    const end = start + seconds * 1000;
    const inFlight = new Set<Promise<void>>();

    const reader = (async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await db
          .selectFrom('commands')
          .select(['command_id', 'status'])
          .where('command_id', '=', `c${Math.floor(Math.random() * Math.max(1, seq))}`)
          .executeTakeFirst();
        readLatencies.push(performance.now() - t0);
        await sleep(readEveryMs);
      }
    })();

    // Open loop: every tick, start the transactions due by now (the rate does not slow down when
    // the store does, as clients' requests would not).
    let issued = 0;
    while (performance.now() < end) {
      const due = Math.floor(((performance.now() - start) / 1000) * rate);
      while (issued < due) {
        issued++;
        if (outstanding >= maxOutstanding) {
          skipped++;
          continue;
        }
        outstanding++;
        const t0 = performance.now();
        const p: Promise<void> = insertOne().then(() => {
          commitLatencies.push(performance.now() - t0);
          committed++;
          outstanding--;
          inFlight.delete(p);
        });
        inFlight.add(p);
      }
      await sleep(1);
    }
    const elapsed = (performance.now() - start) / 1000;
    histogram.disable();
    mergeInto(totals.delay, histogram);
    // Counted within the window; the backlog is then drained (outside the figures).
    totals.committed += committed;
    totals.commitLatencies.push(...commitLatencies);
    totals.readLatencies.push(...readLatencies);
    await Promise.all([...inFlight, reader]);
    totals.skipped += skipped;
    totals.elapsed += elapsed;
  } finally {
    await storage.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

const totals = new Map<Mode, Totals>(
  modes.map((m) => [
    m,
    {
      delay: createHistogram(),
      commitLatencies: [],
      readLatencies: [],
      committed: 0,
      skipped: 0,
      elapsed: 0,
    },
  ]),
);
for (let round = 0; round < rounds; round++) {
  for (const mode of modes) await run(mode, totals.get(mode)!);
}
const results = modes.map((mode) => {
  const t = totals.get(mode)!;
  t.commitLatencies.sort((a, b) => a - b);
  t.readLatencies.sort((a, b) => a - b);
  const result = {
    benchmark: 'sqlite-event-loop',
    mode,
    synchronous,
    targetCommitsPerSecond: rate,
    seconds: round(t.elapsed),
    commitsPerSecond: Math.round(t.committed / t.elapsed),
    skipped: t.skipped,
    loopDelayP50Ms: ms(t.delay.percentile(50)),
    loopDelayP99Ms: ms(t.delay.percentile(99)),
    loopDelayMaxMs: ms(t.delay.max),
    commitP50Ms: round(percentile(t.commitLatencies, 50)),
    commitP99Ms: round(percentile(t.commitLatencies, 99)),
    readP50Ms: round(percentile(t.readLatencies, 50)),
    readP99Ms: round(percentile(t.readLatencies, 99)),
  };
  console.log(JSON.stringify(result));
  return result;
});
const [direct] = results;
const ratio = (a: number, b: number) => (b === 0 ? null : Number((a / b).toFixed(2)));
console.log(
  JSON.stringify({
    benchmark: 'sqlite-event-loop-ratios',
    against: 'direct',
    modes: Object.fromEntries(
      results.slice(1).map((r) => [
        r.mode,
        {
          loopDelayP99: ratio(r.loopDelayP99Ms, direct.loopDelayP99Ms),
          loopDelayMax: ratio(r.loopDelayMaxMs, direct.loopDelayMaxMs),
          commitsPerSecond: ratio(r.commitsPerSecond, direct.commitsPerSecond),
          commitP99: ratio(r.commitP99Ms, direct.commitP99Ms),
          readP99: ratio(r.readP99Ms, direct.readP99Ms),
        },
      ]),
    ),
  }),
);
