// Command latency: tenant request start → device receipt, for N commands to one connected
// device (sequential, so each measures one trip), then the same with D devices in parallel.
// The device acks every command, as the SDK does.
import http from 'node:http';
import WebSocket from 'ws';
import { call, createTenant } from '../packages/server/test/helpers/api.ts';
import { percentile, startBenchServer } from './lib.ts';

const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as 'sqlite' | 'postgres';
const count = Number(process.env.BENCH_COMMANDS ?? 1000);
const parallelDevices = Number(process.env.BENCH_DEVICES ?? 10);

const server = await startBenchServer(backend);
try {
  const base = server.url;
  const { token } = await createTenant(base, server.adminToken, { name: 'bench' });

  async function connectDevice(i: number) {
    const dt = await call(base, 'POST', '/client-tokens', { token, json: { playerId: `bench-${i}` } });
    const deviceToken = String(dt.body.token);
    const s = await call(base, 'POST', '/client/v1/sessions', { token: deviceToken, json: {} });
    const sessionId = String(s.body.sessionId);
    const ws = new WebSocket(String(s.body.realtimeUrl), {
      headers: { authorization: `Bearer ${deviceToken}` },
    });
    const received = new Map<string, number>();
    const waiters = new Map<string, (t: number) => void>();
    ws.on('message', (data) => {
      const t = performance.now();
      const msg = JSON.parse(data.toString()) as { type: string; data?: string; commandId?: string };
      if (msg.type !== 'command' || !msg.commandId) return;
      ws.send(JSON.stringify({ type: 'ack', commandId: msg.commandId, ok: true }));
      const tag = String(msg.data);
      received.set(tag, t);
      waiters.get(tag)?.(t);
    });
    await new Promise((resolve) => ws.once('message', resolve)); // welcome
    const arrival = (tag: string) =>
      new Promise<number>((resolve) => {
        const seen = received.get(tag);
        if (seen !== undefined) resolve(seen);
        else waiters.set(tag, resolve);
      });
    return { sessionId, ws, arrival };
  }

  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const postJson = (path: string, body: unknown) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
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
          let out = '';
          res.on('data', (c) => {
            out += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: out }));
        },
      );
      req.on('error', reject);
      req.end(text);
    });

  async function measure(device: Awaited<ReturnType<typeof connectDevice>>, n: number, tagPrefix: string) {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const tag = `${tagPrefix}-${i}`;
      const arrived = device.arrival(tag);
      const t0 = performance.now();
      const res = await postJson(`/sessions/${device.sessionId}/realtime/commands`, {
        name: 'text',
        data: tag,
      });
      if (res.status !== 202) throw new Error(`command failed: ${res.status} ${res.text}`);
      out.push((await arrived) - t0);
    }
    return out;
  }

  const stats = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return {
      p50Ms: Number(percentile(sorted, 50).toFixed(2)),
      p99Ms: Number(percentile(sorted, 99).toFixed(2)),
      maxMs: Number(sorted[sorted.length - 1].toFixed(2)),
    };
  };

  const one = await connectDevice(0);
  await measure(one, 50, 'warmup');
  const sequential = await measure(one, count, 'seq');
  const devices = await Promise.all(Array.from({ length: parallelDevices }, (_, i) => connectDevice(i + 1)));
  const perDevice = Math.ceil(count / parallelDevices);
  const t0 = performance.now();
  const parallel = (await Promise.all(devices.map((d, i) => measure(d, perDevice, `par${i}`)))).flat();
  const elapsed = (performance.now() - t0) / 1000;
  console.log(
    JSON.stringify({
      benchmark: 'command-latency',
      backend,
      commands: count,
      sequential: stats(sequential),
      parallel: {
        devices: parallelDevices,
        ...stats(parallel),
        commandsPerSecond: Math.round(parallel.length / elapsed),
      },
    }),
  );
  for (const d of [one, ...devices]) d.ws.close();
  agent.destroy();
} finally {
  await server.stop();
}
