// What one hop to a worker thread and back costs on this machine: the price SQLite's writer thread
// (packages/server/src/storage/dialects/sqlite-thread.ts) pays per transaction, measured without SQLite.
// A message shaped like a one-command `atomically` request goes to an idle worker, which answers at
// once; one every `BENCH_HOP_INTERVAL_MS` (default 1 ms, a paced load: the worker is asleep each
// time, as it is between the command log's groups). Printed: the time `postMessage` itself takes on
// the sending thread, and the process's CPU per round trip, beside the same pacing with no message
// (the timers' own cost). On a virtual machine waking a sleeping thread can cost far more than on
// bare metal; docs/performance.md has the figures.
//
//   node --import tsx bench/thread-hop.ts
import { Worker } from 'node:worker_threads';

const hops = Number(process.env.BENCH_HOPS ?? 3000);
const intervalMs = Number(process.env.BENCH_HOP_INTERVAL_MS ?? 1);

const request = {
  op: 'atomically',
  statements: [
    {
      sql:
        'insert into commands (command_id, session_id, tenant_id, name, data, status, issued_at, expires_at, ' +
        'delivered_at, settled_at, error, idempotency_key, request_hash, batch_id) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      params: [
        '019a0000-0000-7000-8000-000000000001',
        '019a0000-0000-7000-8000-000000000002',
        '019a0000-0000-7000-8000-000000000003',
        'text',
        '"hello"',
        'queued',
        Date.now(),
        Date.now() + 30_000,
        null,
        null,
        null,
        null,
        null,
        null,
      ],
    },
  ],
};

/** Paced ticks: `each` runs once per tick; returns the process's CPU per tick and `each`'s own time. */
async function paced(each: (i: number) => void) {
  let spent = 0;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < hops; i++) {
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
    const t = performance.now();
    each(i);
    spent += performance.now() - t;
  }
  const cpu = process.cpuUsage(cpu0);
  return { cpuUsPerTick: (cpu.user + cpu.system) / hops, callUs: (1000 * spent) / hops };
}

const worker = new Worker(
  `const { parentPort } = require('node:worker_threads');
   parentPort.on('message', (m) => parentPort.postMessage({ id: m.id, ok: true, results: [[]] }));`,
  { eval: true },
);
let answered = 0;
worker.on('message', () => {
  answered++;
});
await new Promise((resolve) => worker.once('online', resolve));

const timers = await paced(() => {});
const hop = await paced((id) => worker.postMessage({ ...request, id }));
await new Promise((resolve) => setTimeout(resolve, 100));
await worker.terminate();

const round = (x: number) => Number(x.toFixed(1));
const result = {
  benchmark: 'thread-hop',
  hops,
  intervalMs,
  answered,
  postMessageUs: round(hop.callUs),
  cpuUsPerHop: round(hop.cpuUsPerTick - timers.cpuUsPerTick),
  cpuUsPerTimerTick: round(timers.cpuUsPerTick),
};
process.stderr.write(
  `thread hop (${hops} at one per ${intervalMs} ms): postMessage ${result.postMessageUs} µs on the sender; ` +
    `CPU per round trip ${result.cpuUsPerHop} µs beyond the timer's ${result.cpuUsPerTimerTick} µs\n`,
);
process.stdout.write(`${JSON.stringify(result)}\n`);
