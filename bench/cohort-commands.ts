// Cohort-wide commands (CONTRACT §12): D connected devices in one cohort (default 1,000), one
// cohort command at a time (`POST /cohorts/{id}/realtime/commands`, a `text`), R rounds. For each:
// the time to the 202, to the last device's receipt of its command, and until the batch view
// (`GET /cohorts/{id}/realtime/batches/{batchId}`, polled every 5 ms) counts every command
// acknowledged. The first round is the cold one (each session's command queue is read once).
// Devices ack every command as the SDK does.
import { Pool } from 'undici';
import { createBenchTenant, createSessions, openDevices } from './lib/fleet.ts';
import { startBenchServer } from './lib.ts';

const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as 'sqlite' | 'postgres';
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const devices = arg('devices', 1000);
const rounds = arg('rounds', 5);
const COHORT = 'bench-cohort';

const server = await startBenchServer(backend);
const pool = new Pool(server.url, { connections: 4 });
try {
  const tenant = await createBenchTenant(server.url, server.adminToken);
  const specs = await createSessions(server.url, server.url, tenant, devices, { cohort: COHORT });
  /** Receipts per round tag: how many, and the latest. */
  const receipts = new Map<string, { count: number; last: number }>();
  const sockets = await openDevices(specs, (data, at) => {
    const r = receipts.get(data) ?? { count: 0, last: 0 };
    r.count++;
    r.last = Math.max(r.last, at);
    receipts.set(data, r);
  });
  const request = async (method: string, path: string, body?: unknown) => {
    const res = await pool.request({
      method: method as 'GET' | 'POST',
      path,
      headers: { authorization: `Bearer ${tenant.token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.body.text();
    if (res.statusCode >= 300) throw new Error(`${method} ${path} → ${res.statusCode}: ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const until = async (done: () => boolean | Promise<boolean>, what: string) => {
    const deadline = performance.now() + 60_000;
    while (!(await done())) {
      if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return performance.now();
  };
  const results = [];
  for (let round = 0; round < rounds; round++) {
    const tag = `round-${round}`;
    const t0 = performance.now();
    const answer = await request('POST', `/cohorts/${COHORT}/realtime/commands`, { name: 'text', data: tag });
    const answeredAt = performance.now();
    if (answer.accepted !== devices) throw new Error(`accepted ${answer.accepted} of ${devices}`);
    await until(() => (receipts.get(tag)?.count ?? 0) >= devices, 'every device');
    const lastReceipt = receipts.get(tag)!.last;
    const ackedAt = await until(async () => {
      const view = await request('GET', `/cohorts/${COHORT}/realtime/batches/${answer.batchId}?limit=1`);
      return (view.counts as Record<string, number>).acknowledged === devices;
    }, 'every ack');
    results.push({
      round,
      answerMs: Math.round(answeredAt - t0),
      lastDeviceMs: Math.round(lastReceipt - t0),
      allAcknowledgedMs: Math.round(ackedAt - t0),
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  const warm = results
    .slice(1)
    .map((r) => r.lastDeviceMs)
    .sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      benchmark: 'cohort-commands',
      backend,
      devices,
      rounds: results,
      warmLastDeviceMedianMs: warm.length ? warm[Math.floor(warm.length / 2)] : null,
    }),
  );
  for (const s of sockets) s.close();
} finally {
  await pool.close();
  await server.stop();
}
