// Event ingestion throughput: C concurrent devices, each posting batches of B events to its own
// session over keep-alive HTTP, for D seconds. Prints events/s (accepted, durable) and latency.
import http from 'node:http';
import { call, createTenant } from '../packages/server/test/helpers/api.ts';
import { percentile, startBenchServer } from './lib.ts';

const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as 'sqlite' | 'postgres';
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const batchSize = Number(process.env.BENCH_BATCH ?? 1000);
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
/** BENCH_WEBHOOK=1: the tenant has one endpoint taking every event (an outbox row per event). */
const withWebhook = process.env.BENCH_WEBHOOK === '1';

const server = await startBenchServer(backend, withWebhook ? { LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true' } : {});
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(204).end());
});
try {
  const base = server.url;
  const { token } = await createTenant(base, server.adminToken, { name: 'bench' });
  if (withWebhook) {
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const address = receiver.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const hook = await call(base, 'POST', '/webhooks', { token, json: { url: `http://127.0.0.1:${port}/` } });
    if (hook.status !== 201) throw new Error(`webhook registration failed: ${hook.text}`);
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const devices = await Promise.all(
    Array.from({ length: concurrency }, async (_, i) => {
      const dt = await call(base, 'POST', '/client-tokens', { token, json: { playerId: `bench-${i}` } });
      const s = await call(base, 'POST', '/client/v1/sessions', { token: String(dt.body.token), json: {} });
      return { token: String(dt.body.token), sessionId: String(s.body.sessionId) };
    }),
  );

  const post = (path: string, tok: string, body: string) =>
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

  const latencies: number[] = [];
  let accepted = 0;
  let seq = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  // Bodies are built as text: the load generator shares two cores with the server, so it must be cheap.
  const fields = '"eventType":"Health","fps":72,"cpuUsage":33.3,"batteryLevel":81,"memoryUsage":1800';
  const body = (now: number) => {
    const parts = new Array<string>(batchSize);
    for (let i = 0; i < batchSize; i++) parts[i] = `{"id":"e${seq++}","timestamp":${now},${fields}}`;
    return `{"events":[${parts.join(',')}]}`;
  };
  await Promise.all(
    devices.map(async (d) => {
      while (performance.now() < deadline) {
        const text = body(Date.now());
        const t0 = performance.now();
        const res = await post(`/sessions/${d.sessionId}/Events`, d.token, text);
        latencies.push(performance.now() - t0);
        if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${res.text.slice(0, 300)}`);
        accepted += (JSON.parse(res.text) as { accepted: number }).accepted;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  const result = {
    benchmark: 'ingest',
    backend,
    webhook: withWebhook,
    concurrency,
    batchSize,
    seconds: Number(elapsed.toFixed(1)),
    events: accepted,
    eventsPerSecond: Math.round(accepted / elapsed),
    requestP50Ms: Number(percentile(latencies, 50).toFixed(1)),
    requestP99Ms: Number(percentile(latencies, 99).toFixed(1)),
  };
  console.log(JSON.stringify(result));
  agent.destroy();
} finally {
  receiver.close();
  await server.stop();
}
