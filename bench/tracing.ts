// The cost of tracing: event ingestion and command issue throughput with tracing off, on (every
// request traced) and sampled (OTEL_TRACES_SAMPLER=parentbased_traceidratio, 10 %), exporting to a
// local OTLP receiver in this process that answers every export at once; in rounds on fresh servers
// (the order turning each round), printed side by side with the ratios to off.
import fs from 'node:fs';
import http from 'node:http';
import { call, createTenant, deviceToken } from '../packages/server/test/helpers/api.ts';
import { startBenchServer } from './lib.ts';

const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as 'sqlite' | 'postgres';
const seconds = Number(process.env.BENCH_SECONDS ?? 4);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8);
const batch = Number(process.env.BENCH_BATCH ?? 100);
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);

// The collector: counts exports and their bytes, answers 200 (an OTLP success) at once.
let exports = 0;
let exportBytes = 0;
const collector = http.createServer((req, res) => {
  req.on('data', (c: Buffer) => {
    exportBytes += c.length;
  });
  req.on('end', () => {
    exports++;
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
const endpoint = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
function post(base: string, path: string, token: string, body: unknown) {
  return new Promise<number>((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = http.request(
      `${base}${path}`,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

/** CPU time (user + system, ms, all threads) the server process has used so far (Linux: /proc/<pid>/stat). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * `concurrency` loops doing `one(i, n)` until `seconds` pass: the number done per second, and the
 * server's CPU time per one done (steadier than throughput on a shared machine).
 */
async function closedLoop(
  pid: number | undefined,
  one: (worker: number, n: number) => Promise<number>,
  expected: number,
) {
  const cpuBefore = cpuMs(pid);
  let done = 0;
  const until = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let n = 0; performance.now() < until; n++) {
        const status = await one(worker, n);
        if (status !== expected) throw new Error(`unexpected status ${status}`);
        done++;
      }
    }),
  );
  return {
    perSecond: done / ((performance.now() - t0) / 1000),
    cpuMsPerOne: (cpuMs(pid) - cpuBefore) / done,
  };
}

type Mode = 'off' | 'on' | 'sampled';
const MODES: Mode[] = ['off', 'on', 'sampled'];

async function measure(mode: Mode) {
  const server = await startBenchServer(backend, {
    LIVELINE_QUOTA_PENDING_COMMANDS: '0',
    OTEL_EXPORTER_OTLP_ENDPOINT: mode === 'off' ? '' : endpoint,
    OTEL_SERVICE_NAME: 'liveline-bench',
    ...(mode === 'sampled'
      ? { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' }
      : { OTEL_TRACES_SAMPLER: '', OTEL_TRACES_SAMPLER_ARG: '' }),
  });
  try {
    const base = server.url;
    const tenant = await createTenant(base, server.adminToken, { name: 'bench' });
    const sessions: string[] = [];
    for (let i = 0; i < concurrency; i++) {
      const token = await deviceToken(base, tenant.token, `bench-${i}`);
      const s = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
      sessions.push(String(s.body.sessionId));
    }
    const events = (worker: number, n: number) =>
      Array.from({ length: batch }, (_, k) => ({
        id: `${worker}-${n}-${k}`,
        eventType: 'Custom',
        timestamp: Date.now(),
        custom01: 'bench',
      }));
    const ingest = (worker: number, n: number) =>
      post(base, `/sessions/${sessions[worker]}/events`, tenant.token, { events: events(worker, n) });
    const command = (worker: number, n: number) =>
      post(base, `/sessions/${sessions[worker]}/realtime/commands`, tenant.token, {
        name: 'text',
        data: `c${n}`,
      });
    // A short warm-up of each path (JIT, statement caches), then the measured runs.
    for (let n = 0; n < 20; n++) {
      await ingest(0, -1 - n);
      await command(0, n);
    }
    const pid = server.child.pid;
    const ingested = await closedLoop(pid, ingest, 200);
    const commands = await closedLoop(pid, command, 202);
    return {
      eventsPerSecond: Math.round(ingested.perSecond * batch),
      /** Server CPU per 1,000 events. */
      cpuMsPer1000Events: Number(((ingested.cpuMsPerOne / batch) * 1000).toFixed(1)),
      commandsPerSecond: Math.round(commands.perSecond),
      /** Server CPU per command. */
      cpuMsPerCommand: Number(commands.cpuMsPerOne.toFixed(3)),
    };
  } finally {
    await server.stop();
  }
}

type Result = Awaited<ReturnType<typeof measure>>;
const results: Record<Mode, Result>[] = [];
for (let round = 0; round < rounds; round++) {
  // The order turns each round, so a drift of the machine does not favour one mode.
  const order = [...MODES.slice(round % MODES.length), ...MODES.slice(0, round % MODES.length)];
  const r = {} as Record<Mode, Result>;
  for (const mode of order) r[mode] = await measure(mode);
  results.push(r);
}
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ratio = (a: number, b: number) => Number((a / b).toFixed(3));
const ratios = (r: Record<Mode, Result>, mode: Mode) => ({
  ingest: ratio(r[mode].eventsPerSecond, r.off.eventsPerSecond),
  command: ratio(r[mode].commandsPerSecond, r.off.commandsPerSecond),
  ingestCpu: ratio(r[mode].cpuMsPer1000Events, r.off.cpuMsPer1000Events),
  commandCpu: ratio(r[mode].cpuMsPerCommand, r.off.cpuMsPerCommand),
});
console.log(
  JSON.stringify({
    benchmark: 'tracing',
    backend,
    seconds,
    concurrency,
    batch,
    rounds: results.map((r) => ({ ...r, onRatio: ratios(r, 'on'), sampledRatio: ratios(r, 'sampled') })),
    median: Object.fromEntries(
      (['on', 'sampled'] as const).map((mode) => [
        mode,
        {
          ingestRatio: median(results.map((r) => ratios(r, mode).ingest)),
          commandRatio: median(results.map((r) => ratios(r, mode).command)),
          ingestCpuRatio: median(results.map((r) => ratios(r, mode).ingestCpu)),
          commandCpuRatio: median(results.map((r) => ratios(r, mode).commandCpu)),
        },
      ]),
    ),
    otlpExports: exports,
    otlpBytes: exportBytes,
  }),
);
agent.destroy();
collector.close();
