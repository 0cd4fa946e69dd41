// Event ingestion throughput: C concurrent devices (32), each posting batches of B events (100, then
// 1,000) to its own session over keep-alive HTTP, for D seconds. Prints events/s (accepted, durable)
// and latency, once per number of webhook endpoints taking every event (BENCH_ENDPOINTS, default 0, 1
// and 5, each on a fresh server, with its ratio to the 0-endpoint figure of the same run), and before
// each batch size the store's raw insert limit for the same rows (`rawLimit`), with the ratio to it.
// Then the dispatcher: ingest → receipt latency under a paced load, and deliveries/s draining a
// backlog, to a local receiver, for per-event and batch endpoints. And alert rules (CONTRACT §13):
// ingestion with BENCH_ALERT_RULES rules on the tenant (default 20) against none, in rounds
// (BENCH_ALERT_ROUNDS, default 2; which phase goes first alternates), each phase on a fresh server:
// the throughput ratio and the server's CPU per event of each pair, and their medians.
// BENCH_STORED_SESSIONS=N first stores N ended sessions of the tenant (a store with a history).

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { EVENTS_TABLE } from '../packages/server/src/modules/events/ingest.ts';
import { DATABASE_FILE } from '../packages/server/src/storage/data-dir.ts';
import BetterSqlite3 from '../packages/server/src/storage/dialects/better-sqlite3.js';
import { openStorage } from '../packages/server/src/storage/index.ts';
import { call, createTenant } from '../packages/server/test/helpers/api.ts';
import { seedEndedSessions } from './lib/seed.ts';
import { percentile, startBenchServer } from './lib.ts';

const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as 'sqlite' | 'postgres';
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
/** Events per request: each size is measured beside the raw insert limit of the same rows. */
const batchSizes = (process.env.BENCH_BATCH ?? '100,1000')
  .split(',')
  .filter((s) => s.trim() !== '')
  .map(Number);
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
/** Endpoint counts to run ingestion with; BENCH_WEBHOOK=1 (the older knob) means "1". */
const endpointCounts = (process.env.BENCH_ENDPOINTS ?? (process.env.BENCH_WEBHOOK === '1' ? '1' : '0,1,5'))
  .split(',')
  .filter((s) => s.trim() !== '')
  .map(Number);
/**
 * Rounds of the endpoint phases: odd rounds in the order given, even ones reversed, so a phase's place
 * in the run (the first one after the raw insert limit's phase, say) weighs on every count alike; each
 * round's ratio is to that round's phase without endpoints, and their mean is printed at the end.
 */
const endpointRounds = Math.max(1, Number(process.env.BENCH_ENDPOINT_ROUNDS ?? 2));
/** Dispatcher figures: `single` (one delivery per event), `batch` (`batch: true`); empty to skip. */
const dispatchModes = (process.env.BENCH_DISPATCH ?? 'single,batch').split(',').filter((s) => s !== '');
/** The paced load of the latency phase (events/s, in batches of 20 from 5 devices), and its length. */
const dispatchRate = Number(process.env.BENCH_DISPATCH_RATE ?? 1000);
const dispatchSeconds = Number(process.env.BENCH_DISPATCH_SECONDS ?? 5);
/** Events ingested at once for the throughput phase; the drain is given BENCH_DRAIN_SECONDS at most. */
const backlogEvents = Number(process.env.BENCH_BACKLOG ?? 20_000);
const drainSeconds = Number(process.env.BENCH_DRAIN_SECONDS ?? 30);
/** Ended sessions of the tenant stored before each ingestion phase (a store with a history). */
const storedSessions = Number(process.env.BENCH_STORED_SESSIONS ?? 0);

/** Alert-rule counts to compare with none (empty: skip), and how many alternating rounds of each. */
const alertRuleCounts = (process.env.BENCH_ALERT_RULES ?? '20')
  .split(',')
  .filter((s) => s.trim() !== '')
  .map(Number)
  .filter((n) => n > 0);
const alertRounds = Number(process.env.BENCH_ALERT_ROUNDS ?? 2);

const WEBHOOK_ENV = { LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true', LIVELINE_WEBHOOK_POLL_MS: '100' };

/**
 * A local receiver answering 204 at once. It notes each request and each event in it (the event
 * ids of a `session.event` or a `session.events` batch) with the time it arrived.
 */
async function startReceiver() {
  let requests = 0;
  const events = new Map<string, number>();
  let parse = false;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      requests++;
      res.writeHead(204).end();
      if (!parse) return;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        type: string;
        data: { id?: string; events?: { data: { id: string } }[] };
      };
      const ids = body.type === 'session.events' ? body.data.events!.map((e) => e.data.id) : [body.data.id!];
      for (const id of ids) if (!events.has(id)) events.set(id, at);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/`,
    get requests() {
      return requests;
    },
    events,
    /** Read event ids from bodies (the dispatcher phases); the ingestion flood only counts requests. */
    track(on: boolean) {
      parse = on;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function poster(base: string, agent: http.Agent) {
  return (path: string, tok: string, body: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        `${base}${path}`,
        {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${tok}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => {
            text += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
}

async function setup(
  endpoints: number,
  options: {
    batch?: boolean;
    devices: number;
    receiver: Awaited<ReturnType<typeof startReceiver>>;
    alertRules?: number;
  },
) {
  const server = await startBenchServer(backend, endpoints > 0 ? WEBHOOK_ENV : {});
  const base = server.url;
  const { tenantId, token } = await createTenant(base, server.adminToken, { name: 'bench' });
  await seedEndedSessions(server, tenantId, storedSessions);
  for (let i = 0; i < endpoints; i++) {
    const hook = await call(base, 'POST', '/webhooks', {
      token,
      json: { url: `${options.receiver.url}?e=${i}`, batch: options.batch === true },
    });
    if (hook.status !== 201) throw new Error(`webhook registration failed: ${hook.text}`);
  }
  for (const rule of alertRules(options.alertRules ?? 0)) {
    const res = await call(base, 'POST', '/alerts', { token, json: rule });
    if (res.status !== 201) throw new Error(`alert rule failed: ${res.text}`);
  }
  const devices = await Promise.all(
    Array.from({ length: options.devices }, async (_, i) => {
      const dt = await call(base, 'POST', '/client-tokens', { token, json: { playerId: `bench-${i}` } });
      const s = await call(base, 'POST', '/client/v1/sessions', { token: String(dt.body.token), json: {} });
      return { token: String(dt.body.token), sessionId: String(s.body.sessionId) };
    }),
  );
  return { server, base, devices };
}

/**
 * `n` alert rules as a fleet tenant would set them: most watch the Health events this benchmark
 * sends (so every event is evaluated against them), none is met by its steady values (battery 81,
 * fps 72, CPU 33 %, 1.8 GB): the cost of watching, not of alerting.
 */
function alertRules(n: number) {
  const health: [string, string, number][] = [
    ['batteryLevel', 'lt', 15],
    ['batteryLevel', 'lt', 5],
    ['batteryLevel', 'lte', 10],
    ['fps', 'lt', 45],
    ['fps', 'lt', 30],
    ['fps', 'lte', 20],
    ['cpuUsage', 'gt', 90],
    ['cpuUsage', 'gte', 99],
    ['memoryUsage', 'gt', 3000],
    ['memoryUsage', 'gt', 3500],
    ['memoryUsage', 'gte', 4000],
    ['errorCount', 'gt', 0],
    ['fps', 'gt', 500],
    ['batteryLevel', 'eq', 0],
    ['cpuUsage', 'gt', 80],
    ['fps', 'lt', 50],
  ];
  const rules: Record<string, unknown>[] = health.map(([field, op, value], i) => ({
    name: `health ${i}`,
    eventType: 'Health',
    field,
    op,
    value,
    forSeconds: i % 2 === 0 ? 0 : 30,
  }));
  for (const severity of ['Critical', 'Error', 'Warning', 'Information'])
    rules.push({
      name: `errors ${severity}`,
      eventType: 'Error',
      field: 'severity',
      op: 'eq',
      value: severity,
    });
  return Array.from({ length: n }, (_, i) => ({ ...rules[i % rules.length], name: `rule ${i}` }));
}

// Bodies are built as text: the load generator shares two cores with the server, so it must be cheap.
const FIELDS = '"eventType":"Health","fps":72,"cpuUsage":33.3,"batteryLevel":81,"memoryUsage":1800';
let seq = 0;
function batchBody(n: number, now: number, ids?: string[]) {
  const parts = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const id = `e${seq++}`;
    ids?.push(id);
    parts[i] = `{"id":"${id}","timestamp":${now},${FIELDS}}`;
  }
  return `{"events":[${parts.join(',')}]}`;
}

/** CPU time (user + system, ms) the server process has used so far (Linux: /proc/<pid>/stat). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return Number.NaN;
  }
}

/** Ingestion at saturation with `endpoints` endpoints taking every event, `batchSize` events a request. */
async function ingestion(endpoints: number, rules: number, batchSize: number) {
  const receiver = await startReceiver();
  const { server, base, devices } = await setup(endpoints, {
    devices: concurrency,
    receiver,
    alertRules: rules,
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const post = poster(base, agent);
  try {
    const latencies: number[] = [];
    let accepted = 0;
    const cpuBefore = cpuMs(server.child.pid);
    const start = performance.now();
    const deadline = start + seconds * 1000;
    await Promise.all(
      devices.map(async (d) => {
        while (performance.now() < deadline) {
          const text = batchBody(batchSize, Date.now());
          const t0 = performance.now();
          const res = await post(`/sessions/${d.sessionId}/Events`, d.token, text);
          latencies.push(performance.now() - t0);
          if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${res.text.slice(0, 300)}`);
          accepted += (JSON.parse(res.text) as { accepted: number }).accepted;
        }
      }),
    );
    const elapsed = (performance.now() - start) / 1000;
    const cpu = cpuMs(server.child.pid) - cpuBefore;
    latencies.sort((a, b) => a - b);
    return {
      benchmark: 'ingest',
      backend,
      endpoints,
      alertRules: rules,
      concurrency,
      batchSize,
      seconds: Number(elapsed.toFixed(1)),
      events: accepted,
      eventsPerSecond: Math.round(accepted / elapsed),
      requestP50Ms: Number(percentile(latencies, 50).toFixed(1)),
      requestP99Ms: Number(percentile(latencies, 99).toFixed(1)),
      /** The server process's CPU time (all its threads) per 1,000 events: steadier than throughput on a shared machine. */
      serverCpuMsPer1000Events: Number(((cpu / accepted) * 1000).toFixed(1)),
      /** Webhook requests the receiver got while ingestion ran (deliveries share the store with it). */
      deliveriesDuringFlood: receiver.requests,
    };
  } finally {
    agent.destroy();
    await server.stop();
    await receiver.close();
  }
}

/**
 * The dispatcher against a local receiver, one endpoint taking every event (`batch` or not):
 * 1. latency: 5 devices post 20-event batches at `dispatchRate` events/s in all; per event, the time
 *    from its request's start to its receipt (p50, p99), with the receipt rate;
 * 2. throughput: `backlogEvents` events ingested as fast as they go, then the time until the last
 *    one is received: events delivered per second, and webhook requests per second.
 */
async function dispatch(mode: string) {
  const batch = mode === 'batch';
  const receiver = await startReceiver();
  receiver.track(true);
  const devicesN = 5;
  const { server, base, devices } = await setup(1, { batch, devices: devicesN, receiver });
  const agent = new http.Agent({ keepAlive: true, maxSockets: devicesN });
  const post = poster(base, agent);
  try {
    // 1. Paced load.
    const sentAt = new Map<string, number>();
    const perRequest = 20;
    const intervalMs = (1000 * perRequest * devicesN) / dispatchRate;
    const deadline = performance.now() + dispatchSeconds * 1000;
    await Promise.all(
      devices.map(async (d, i) => {
        let next = performance.now() + (intervalMs * i) / devicesN;
        while (next < deadline) {
          const wait = next - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          const ids: string[] = [];
          const text = batchBody(perRequest, Date.now(), ids);
          const t0 = performance.now();
          for (const id of ids) sentAt.set(id, t0);
          const res = await post(`/sessions/${d.sessionId}/Events`, d.token, text);
          if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${res.text.slice(0, 300)}`);
          next += intervalMs;
        }
      }),
    );
    const until = performance.now() + 10_000;
    while (receiver.events.size < sentAt.size && performance.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const lat: number[] = [];
    for (const [id, t0] of sentAt) {
      const at = receiver.events.get(id);
      if (at !== undefined) lat.push(at - t0);
    }
    lat.sort((a, b) => a - b);
    const paced = {
      events: sentAt.size,
      received: lat.length,
      ingestToReceiptP50Ms: Number(percentile(lat, 50).toFixed(1)),
      ingestToReceiptP99Ms: Number(percentile(lat, 99).toFixed(1)),
      ingestToReceiptMaxMs: Number((lat[lat.length - 1] ?? Number.NaN).toFixed(1)),
    };

    // 2. A backlog, drained.
    receiver.events.clear();
    const requestsBefore = receiver.requests;
    const backlogIds: string[] = [];
    const perDevice = Math.ceil(backlogEvents / devicesN / 1000);
    const t0 = performance.now();
    await Promise.all(
      devices.map(async (d) => {
        for (let i = 0; i < perDevice; i++) {
          const res = await post(
            `/sessions/${d.sessionId}/Events`,
            d.token,
            batchBody(1000, Date.now(), backlogIds),
          );
          if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${res.text.slice(0, 300)}`);
        }
      }),
    );
    const ingested = performance.now();
    const drainUntil = ingested + drainSeconds * 1000;
    while (receiver.events.size < backlogIds.length && performance.now() < drainUntil) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const last = Math.max(...receiver.events.values());
    const elapsedS = (last - t0) / 1000;
    const requests = receiver.requests - requestsBefore;
    return {
      benchmark: 'webhook-dispatch',
      backend,
      mode,
      pacedEventsPerSecond: dispatchRate,
      pacedSeconds: dispatchSeconds,
      ...paced,
      backlogEvents: backlogIds.length,
      backlogIngestSeconds: Number(((ingested - t0) / 1000).toFixed(2)),
      backlogDelivered: receiver.events.size,
      backlogSeconds: Number(elapsedS.toFixed(2)),
      eventsDeliveredPerSecond: Math.round(receiver.events.size / elapsedS),
      requestsPerSecond: Math.round(requests / elapsedS),
    };
  } finally {
    agent.destroy();
    await server.stop();
    await receiver.close();
  }
}

/**
 * The store's limit for the same rows, without HTTP: the devices' sessions set up through a server
 * as for `ingestion`, then, with that server idle, the rows it would store (same columns, a body of
 * the same JSON) inserted straight into its store from this process for `seconds`. A transaction
 * takes one batch from every device (`concurrency` × `batchSize` rows, at most 20,000): what a perfect
 * group commit would get, so the ratio counts everything the server adds to the inserts and to their
 * commits. SQLite: better-sqlite3 on the same file with the server's pragmas (WAL, synchronous FULL
 * unless LIVELINE_SQLITE_SYNCHRONOUS says NORMAL), one prepared statement run per row, one writer (as
 * the server's writer thread). PostgreSQL: the store's own multi-row insert (`unnest`, `ON CONFLICT DO
 * NOTHING`), as many transactions in flight as the server allows.
 */
async function rawLimit(batchSize: number) {
  const receiver = await startReceiver();
  const { server, devices } = await setup(0, { devices: concurrency, receiver });
  const deadline = performance.now() + seconds * 1000;
  let rows = 0;
  const started = performance.now();
  const perTransaction = Math.max(1, Math.min(concurrency, Math.floor(20_000 / batchSize)));
  /** One batch from each of `perTransaction` devices. */
  const rowsOf = () => {
    const now = Date.now();
    const values: unknown[][] = [];
    for (let d = 0; d < perTransaction; d++) {
      const { sessionId } = devices[d % devices.length];
      for (let i = 0; i < batchSize; i++) {
        const id = `r${seq++}`;
        values.push([sessionId, id, 'Health', now, null, now, `{"id":"${id}","timestamp":${now},${FIELDS}}`]);
      }
    }
    return values;
  };
  try {
    if (backend === 'sqlite') {
      const db = new BetterSqlite3(path.join(server.dataDir, DATABASE_FILE));
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${process.env.LIVELINE_SQLITE_SYNCHRONOUS ?? 'FULL'}`);
      db.pragma('busy_timeout = 5000');
      const cols = EVENTS_TABLE.columns.map((c) => `"${c.name}"`).join(', ');
      const insert = db.prepare(
        `insert into events (${cols}) values (${EVENTS_TABLE.columns.map(() => '?').join(', ')}) on conflict do nothing`,
      );
      const group = db.transaction((values: unknown[][]) => {
        for (const v of values) insert.run(v);
      });
      while (performance.now() < deadline) {
        const values = rowsOf();
        group(values);
        rows += values.length;
      }
      db.close();
    } else {
      const storage = await openStorage({
        databaseUrl: process.env.DATABASE_URL ?? null,
        databaseSchema: server.schema ?? 'public',
        dataDir: server.dataDir,
        sqliteSynchronous: 'FULL',
      });
      await Promise.all(
        Array.from({ length: storage.writeConcurrency }, async () => {
          while (performance.now() < deadline) {
            const values = rowsOf();
            await storage.db
              .transaction()
              .execute((trx) => storage.bulk.insertIgnoringConflicts(trx, EVENTS_TABLE, values));
            rows += values.length;
          }
        }),
      );
      await storage.close();
    }
  } finally {
    await server.stop();
    await receiver.close();
  }
  return Math.round(rows / ((performance.now() - started) / 1000));
}

for (const batchSize of endpointCounts.length > 0 ? batchSizes : []) {
  const limit = await rawLimit(batchSize);
  console.log(
    JSON.stringify({ benchmark: 'ingest-raw-insert-limit', backend, batchSize, rowsPerSecond: limit }),
  );
  const ratios = new Map<number, number[]>();
  for (let round = 1; round <= endpointRounds; round++) {
    const order = round % 2 === 1 ? endpointCounts : [...endpointCounts].reverse();
    const results = new Map<number, Awaited<ReturnType<typeof ingestion>>>();
    for (const n of order) results.set(n, await ingestion(n, 0, batchSize));
    const baseline = results.get(0)?.eventsPerSecond ?? null;
    for (const n of endpointCounts) {
      const result = results.get(n)!;
      const ratio = baseline === null ? null : Number((result.eventsPerSecond / baseline).toFixed(2));
      if (ratio !== null && n !== 0) ratios.set(n, [...(ratios.get(n) ?? []), ratio]);
      const ratioToRaw = Number((result.eventsPerSecond / limit).toFixed(2));
      console.log(
        JSON.stringify({
          ...result,
          round,
          order: order.join(','),
          ratioToNoEndpoint: ratio,
          rawInsertLimit: limit,
          ratioToRaw,
        }),
      );
    }
  }
  for (const [endpoints, list] of ratios) {
    const mean = Number((list.reduce((a, b) => a + b, 0) / list.length).toFixed(2));
    console.log(
      JSON.stringify({
        benchmark: 'ingest-endpoint-ratio',
        backend,
        batchSize,
        endpoints,
        ratios: list,
        mean,
      }),
    );
  }
}
for (const rules of alertRuleCounts) {
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  for (let round = 1; round <= alertRounds; round++) {
    // Which goes first alternates: a phase runs right after the last one's server stopped.
    const size = batchSizes[0];
    const first = round % 2 === 1 ? await ingestion(0, 0, size) : await ingestion(0, rules, size);
    const second = round % 2 === 1 ? await ingestion(0, rules, size) : await ingestion(0, 0, size);
    const [without, withRules] = round % 2 === 1 ? [first, second] : [second, first];
    const ratio = Number((withRules.eventsPerSecond / without.eventsPerSecond).toFixed(2));
    const cpuRatio = Number(
      (withRules.serverCpuMsPer1000Events / without.serverCpuMsPer1000Events).toFixed(2),
    );
    ratios.push(ratio);
    cpuRatios.push(cpuRatio);
    console.log(JSON.stringify({ ...without, round }));
    console.log(JSON.stringify({ ...withRules, round, ratioToNoRules: ratio, cpuPerEventRatio: cpuRatio }));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  console.log(
    JSON.stringify({
      benchmark: 'ingest-alert-rules',
      backend,
      alertRules: rules,
      ratios,
      medianRatio: median(ratios),
      cpuPerEventRatios: cpuRatios,
      medianCpuPerEventRatio: median(cpuRatios),
    }),
  );
}
for (const mode of dispatchModes) console.log(JSON.stringify(await dispatch(mode)));
