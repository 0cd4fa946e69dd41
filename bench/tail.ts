// Live tail fan-out (CONTRACT §11, issue 13): R readers of one tenant's whole stream
// (`GET /events/stream`, default 100) while D devices ingest E events/s between them (default 10
// devices, 10,000 events/s, batches of 100, open loop) for S seconds. Every reader must get every
// event (counted by its `id:` lines); latency is measured on probe events (one per batch of the
// first device, its text carrying a sequence number), from the start of the POST that stored it to
// its arrival at each reader. Ingestion without readers, in the same run, is the limit: the ratio
// says what R readers cost the server.
// `node --import tsx bench/tail.ts [--readers R] [--rate E] [--seconds S]` (BENCH_TAIL_POLL_MS sets the
// server's LIVELINE_TAIL_POLL_MS).
import http from 'node:http';
import { Pool } from 'undici';
import { createBenchTenant, createSessions, type DeviceSpec } from './lib/fleet.ts';
import { percentile, startBenchServer } from './lib.ts';

const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as 'sqlite' | 'postgres';
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const READERS = arg('readers', 100);
const RATE = arg('rate', 10_000);
const SECONDS = arg('seconds', 10);
const DEVICES = 10;
const BATCH = 100;

interface Reader {
  events: number;
  /** Probe number → arrival time. */
  probes: Map<number, number>;
  req: http.ClientRequest;
}

function openReader(url: string, token: string): Promise<Reader> {
  return new Promise((resolve, reject) => {
    const reader: Reader = { events: 0, probes: new Map(), req: null as unknown as http.ClientRequest };
    reader.req = http.get(
      `${url}/events/stream`,
      { headers: { authorization: `Bearer ${token}` }, agent: false },
      (res) => {
        if (res.statusCode !== 200) reject(new Error(`tail answered ${res.statusCode}`));
        res.setEncoding('utf8');
        let tailOfChunk = '';
        res.on('data', (chunk: string) => {
          const now = performance.now();
          const text = tailOfChunk + chunk;
          // Counting `id:` lines and finding probe markers with indexOf: no parse per event.
          let at = text.indexOf('\nid: ');
          while (at !== -1) {
            reader.events++;
            at = text.indexOf('\nid: ', at + 5);
          }
          let p = text.indexOf('"custom01":"probe-');
          while (p !== -1) {
            const end = text.indexOf('"', p + 18);
            if (end === -1) break;
            reader.probes.set(Number(text.slice(p + 18, end)), now);
            p = text.indexOf('"custom01":"probe-', end);
          }
          // Keep the last partial line so a marker split across chunks is still seen.
          const cut = text.lastIndexOf('\n');
          tailOfChunk = text.slice(cut);
        });
        resolve(reader);
      },
    );
    reader.req.once('error', reject);
  });
}

/** D devices post batches of 100 at RATE events/s for SECONDS, open loop; probe sends noted. */
async function ingest(
  phase: string,
  url: string,
  devices: DeviceSpec[],
  seconds: number,
  probeSent: Map<number, number>,
) {
  const pool = new Pool(url, { connections: devices.length * 2 });
  const perSecond = RATE / BATCH;
  const total = Math.round(perSecond * seconds);
  const start = performance.now();
  let probe = 0;
  let stored = 0;
  /** Each request's time to its answer (the events durable). */
  const answered: number[] = [];
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const device = devices[i % devices.length];
    const withProbe = i % devices.length === 0;
    const n = probe;
    if (withProbe) probe++;
    const events = Array.from({ length: BATCH }, (_, k) => ({
      id: `${phase}${i}-${k}`,
      eventType: 'Custom',
      timestamp: Date.now(),
      custom01: withProbe && k === 0 ? `probe-${n}` : 'x',
    }));
    const sentAt = performance.now();
    if (withProbe) probeSent.set(n, sentAt);
    inflight.push(
      pool
        .request({
          method: 'POST',
          path: `/sessions/${device.sessionId}/Events`,
          headers: { authorization: `Bearer ${device.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ events }),
        })
        .then(async (res) => {
          const answer = JSON.parse(await res.body.text()) as { accepted?: number };
          if (res.statusCode === 200) stored += answer.accepted ?? 0;
          answered.push(performance.now() - sentAt);
        }),
    );
  }
  await Promise.all(inflight);
  const elapsed = (performance.now() - start) / 1000;
  await pool.close();
  answered.sort((x, y) => x - y);
  return { stored, elapsed, answered };
}

const server = await startBenchServer(
  backend,
  process.env.BENCH_TAIL_POLL_MS ? { LIVELINE_TAIL_POLL_MS: process.env.BENCH_TAIL_POLL_MS } : {},
);
try {
  const tenant = await createBenchTenant(server.url, server.adminToken);
  const devices = await createSessions(server.url, server.url, tenant, DEVICES);
  // The limit: the same load with nobody reading.
  const alone = await ingest('alone', server.url, devices, Math.min(SECONDS, 5), new Map());
  const readers = await Promise.all(
    Array.from({ length: READERS }, () => openReader(server.url, tenant.token)),
  );
  await new Promise((r) => setTimeout(r, 500));
  const probeSent = new Map<number, number>();
  const tailed = await ingest('tailed', server.url, devices, SECONDS, probeSent);
  // Give the readers up to 10 s to get what was stored.
  const deadline = performance.now() + 10_000;
  while (readers.some((r) => r.events < tailed.stored) && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const latencies: number[] = [];
  let missingProbes = 0;
  for (const reader of readers) {
    for (const [n, sent] of probeSent) {
      const got = reader.probes.get(n);
      if (got === undefined) missingProbes++;
      else latencies.push(got - sent);
    }
  }
  latencies.sort((x, y) => x - y);
  const fewest = Math.min(...readers.map((r) => r.events));
  for (const r of readers) r.req.destroy();
  console.log(
    JSON.stringify({
      bench: 'tail',
      backend,
      readers: READERS,
      targetRate: RATE,
      seconds: SECONDS,
      storedPerSecond: Math.round(tailed.stored / tailed.elapsed),
      storedPerSecondWithoutReaders: Math.round(alone.stored / alone.elapsed),
      ratio: Number((tailed.stored / tailed.elapsed / (alone.stored / alone.elapsed)).toFixed(2)),
      stored: tailed.stored,
      fewestReceivedByAReader: fewest,
      // A reader starting without Last-Event-ID may also get events committed just before it
      // connected (PostgreSQL: those above the oldest running transaction); never fewer.
      everyEventToEveryReader: fewest >= tailed.stored && missingProbes === 0,
      probes: probeSent.size,
      // The floor under the tail's latency, same run: a batch's POST until it is durable.
      ingestAnswerMs: {
        p50: Number(percentile(tailed.answered, 50).toFixed(1)),
        p99: Number(percentile(tailed.answered, 99).toFixed(1)),
      },
      latencyMs: {
        p50: Number(percentile(latencies, 50).toFixed(1)),
        p99: Number(percentile(latencies, 99).toFixed(1)),
        max: Number((latencies.at(-1) ?? Number.NaN).toFixed(1)),
      },
    }),
  );
} finally {
  await server.stop();
}
