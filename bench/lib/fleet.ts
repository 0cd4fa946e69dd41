// A fleet of devices for the benchmarks: a tenant, device tokens and sessions made through liveline's
// API (in parallel, over one keep-alive pool), and device sockets that behave as the SDK does:
// wait for `welcome`, send `{type:"heartbeat"}` every `heartbeatIntervalMs` of the welcome, answer the
// server's pings (the `ws` package does), and ack every command.
import { Pool } from 'undici';
import WebSocket from 'ws';
import { createTenant } from '../../packages/server/test/helpers/api.ts';

/** What a device needs to connect: its session and where its realtime socket is. */
export interface DeviceSpec {
  sessionId: string;
  /** ws:// URL of the session's realtime channel. */
  wsUrl: string;
  /** Device token (absent for the relay, which has no auth). */
  token?: string;
}

/** Runs `fn` over `items` with at most `limit` in flight; results in order. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T, i: number) => Promise<R>) {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

export const wsBase = (httpUrl: string) => httpUrl.replace(/^http/, 'ws');

async function postJson(pool: Pool, path: string, token: string, body: unknown) {
  const res = await pool.request({
    method: 'POST',
    path,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`POST ${path} → ${res.statusCode}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

export interface Tenant {
  tenantId: string;
  token: string;
}

export async function createBenchTenant(base: string, adminToken: string): Promise<Tenant> {
  const { tenantId, token } = await createTenant(base, adminToken, { name: 'fleet bench' });
  return { tenantId, token };
}

/**
 * Mints `count` device tokens (one player each) and opens one session per device, through
 * `POST /client-tokens` and `POST /client/v1/sessions` on `base`; sockets will connect to `socketBase`.
 */
export async function createSessions(
  base: string,
  socketBase: string,
  tenant: Tenant,
  count: number,
  options: {
    concurrency?: number;
    prefix?: string;
    /** The tenant cohort every session belongs to (set in its device token). */
    cohort?: string;
    onProgress?: (done: number) => void;
  } = {},
): Promise<DeviceSpec[]> {
  const concurrency = options.concurrency ?? 32;
  const pool = new Pool(base, { connections: concurrency });
  let done = 0;
  try {
    return await mapLimit(
      Array.from({ length: count }, (_, i) => i),
      concurrency,
      async (i) => {
        const minted = await postJson(pool, '/client-tokens', tenant.token, {
          playerId: `${options.prefix ?? 'fleet'}-${i}`,
          ...(options.cohort ? { tenantCohortId: options.cohort } : {}),
        });
        const token = String(minted.token);
        const session = await postJson(pool, '/client/v1/sessions', token, {
          device: { model: 'bench', os: 'linux', sdkVersion: 'bench' },
        });
        const sessionId = String(session.sessionId);
        done++;
        if (options.onProgress && done % 1000 === 0) options.onProgress(done);
        return { sessionId, token, wsUrl: `${wsBase(socketBase)}/client/v1/sessions/${sessionId}/realtime` };
      },
    );
  } finally {
    await pool.close();
  }
}

/** Devices of the relay: no tokens, no sessions to create, just ids. */
export function relayDevices(relayUrl: string, count: number): DeviceSpec[] {
  return Array.from({ length: count }, (_, i) => {
    const sessionId = `relay-${i}`;
    return { sessionId, wsUrl: `${wsBase(relayUrl)}/client/v1/sessions/${sessionId}/realtime` };
  });
}

export interface DeviceSocket {
  spec: DeviceSpec;
  ws: WebSocket;
  heartbeatIntervalMs: number;
  close(): void;
}

/**
 * Connects a device socket and resolves on `welcome`. `onCommand(data, t)` gets each command's `data`
 * with the time it arrived (performance.now(), before anything else is done with the frame); the
 * device then acks it as the SDK does. Heartbeats go out at the welcome's interval.
 */
export function openDevice(
  spec: DeviceSpec,
  onCommand: ((data: string, receivedAt: number) => void) | null,
  timeoutMs = 30_000,
): Promise<DeviceSocket> {
  const ws = new WebSocket(spec.wsUrl, {
    perMessageDeflate: false,
    headers: spec.token ? { authorization: `Bearer ${spec.token}` } : {},
  });
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  const stopHeartbeat = () => clearInterval(heartbeat);
  return new Promise<DeviceSocket>((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`${spec.sessionId}: no welcome within ${timeoutMs} ms`));
    }, timeoutMs);
    ws.on('message', (raw) => {
      const receivedAt = performance.now();
      const message = JSON.parse(raw.toString()) as {
        type?: string;
        commandId?: string;
        data?: unknown;
        heartbeatIntervalMs?: number;
      };
      if (typeof message.data === 'string') {
        // A command: liveline's `command` frame, or the relay's verbatim request body.
        onCommand?.(message.data, receivedAt);
        ws.send(JSON.stringify({ type: 'ack', commandId: message.commandId ?? message.data, ok: true }));
        return;
      }
      if (message.type === 'welcome') {
        clearTimeout(timer);
        const interval =
          message.heartbeatIntervalMs && message.heartbeatIntervalMs > 0
            ? message.heartbeatIntervalMs
            : 15000;
        heartbeat = setInterval(() => {
          if (ws.readyState === ws.OPEN) ws.send('{"type":"heartbeat"}');
        }, interval);
        resolve({
          spec,
          ws,
          heartbeatIntervalMs: interval,
          close() {
            stopHeartbeat();
            ws.terminate();
          },
        });
      }
    });
    ws.on('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      reject(new Error(`${spec.sessionId}: upgrade refused with HTTP ${res.statusCode}`));
    });
    ws.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    ws.on('close', stopHeartbeat);
  });
}

/** Opens every device's socket, `concurrency` handshakes at a time. */
export function openDevices(
  specs: DeviceSpec[],
  onCommand: ((data: string, receivedAt: number) => void) | null,
  concurrency = 100,
) {
  return mapLimit(specs, concurrency, (spec) => openDevice(spec, onCommand));
}
