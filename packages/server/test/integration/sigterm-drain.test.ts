import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { call, createTenant, deviceToken } from '../helpers/api.ts';
import { exitWithin, type ServerProcess, sleep, startProcess } from '../helpers/process.ts';
import { type Backend, backends, freshStore } from '../helpers/server.ts';

/**
 * CONTRACT §9: on SIGTERM the server stops accepting, finishes what is in flight, closes every device
 * socket with 1012 and exits 0 within 10 s. Here with 1,000 devices connected to a real `liveline
 * start` process, commands and events flowing both ways when the signal arrives, and a few devices
 * that never answer the close; a restart on the same store then shows that everything the server
 * answered with a 2xx or an `events.ack` was kept.
 */

const SOCKETS = 1000;
/** Of them, devices that stop reading (a headset gone to sleep): they never answer the server's close. */
const FROZEN = 10;
const ADMIN = 'sigterm-drain-admin-token';

type Json = Record<string, unknown>;

/** Runs `fn` over `items`, `n` at a time. */
async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

interface Device {
  sessionId: string;
  token: string;
  ws: WebSocket;
  /** The close code the device saw. */
  closed: Promise<number>;
}

/** Connects a device socket that acknowledges every command; resolves on `welcome`. */
function connect(url: string, sessionId: string, token: string, onMessage: (m: Json) => void) {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/client/v1/sessions/${sessionId}/realtime`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  return new Promise<Device>((resolve, reject) => {
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as Json;
      if (m.type === 'welcome') resolve({ sessionId, token, ws, closed });
      else if (m.type === 'command')
        ws.send(JSON.stringify({ type: 'ack', commandId: m.commandId, ok: true }));
      onMessage(m);
    });
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

/**
 * A device socket that completes the upgrade, reads its `welcome`, then reads nothing more (nor answers
 * anything). `rest()` resumes reading and resolves with every frame the server sent (the welcome
 * first), once the server ended the connection.
 */
function frozen(url: string, sessionId: string, token: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  let received = Buffer.alloc(0);
  const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('error', () => {});
  socket.write(
    [
      `GET /client/v1/sessions/${sessionId}/realtime HTTP/1.1`,
      `Host: ${hostname}:${port}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
      'Sec-WebSocket-Version: 13',
      `Authorization: Bearer ${token}`,
      '',
      '',
    ].join('\r\n'),
  );
  return new Promise<{ socket: net.Socket; rest: () => Promise<Buffer> }>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const text = received.toString('latin1');
      if (!text.startsWith('HTTP/1.1 101')) {
        if (text.includes('\r\n\r\n')) reject(new Error(text.split('\r\n')[0]));
        return;
      }
      if (!text.includes('"type":"welcome"')) return;
      socket.off('data', onData);
      socket.pause();
      // Every frame from the first on (the welcome and whatever came with it in the same read), so
      // that the frames are parsed from a frame boundary.
      const frames = received.subarray(text.indexOf('\r\n\r\n') + 4);
      resolve({
        socket,
        rest: async () => {
          let after = frames;
          socket.on('data', (d: Buffer) => {
            after = Buffer.concat([after, d]);
          });
          socket.resume();
          await ended;
          return after;
        },
      });
    };
    socket.on('data', onData);
  });
}

/** The code of the close frame among server frames (unmasked), or null. */
function closeCode(data: Buffer): number | null {
  let at = 0;
  while (at + 2 <= data.length) {
    const opcode = data[at] & 0x0f;
    let length = data[at + 1] & 0x7f;
    let start = at + 2;
    if (length === 126) {
      length = data.readUInt16BE(start);
      start += 2;
    } else if (length === 127) {
      length = Number(data.readBigUInt64BE(start));
      start += 8;
    }
    if (opcode === 0x8) return length >= 2 ? data.readUInt16BE(start) : null;
    at = start + length;
  }
  return null;
}

describe.each(backends)('SIGTERM with 1,000 connected devices (%s)', (backend: Backend) => {
  const running: ServerProcess[] = [];
  const stores: ReturnType<typeof freshStore>[] = [];
  const sockets: WebSocket[] = [];
  const rawSockets: net.Socket[] = [];
  afterEach(async () => {
    for (const ws of sockets.splice(0)) ws.terminate();
    for (const socket of rawSockets.splice(0)) socket.destroy();
    for (const p of running.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      await p.exited;
    }
    for (const s of stores.splice(0)) await s.destroy();
  });

  it('closes every socket with 1012, keeps every answered request and exits 0 within 10 s', async () => {
    const store = freshStore(backend);
    stores.push(store);
    const env = {
      ...store.env,
      LIVELINE_ADMIN_TOKEN: ADMIN,
      // The point is the drain, not the limits: 1,000 devices on one test machine share one address.
      LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
      LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
    };
    const first = await startProcess(env, { timeoutMs: 60_000 });
    running.push(first);
    const { url } = first;
    const tenant = await createTenant(url, ADMIN);

    // 1,000 live sessions of 50 players (a player may hold several sessions), each with its socket.
    const tokens = await Promise.all(
      Array.from({ length: 50 }, (_, i) => deviceToken(url, tenant.token, `drain-player-${i}`)),
    );
    const sessionIds: { sessionId: string; token: string }[] = [];
    await pool(
      Array.from({ length: SOCKETS }, (_, i) => tokens[i % tokens.length]),
      25,
      async (token) => {
        const res = await call(url, 'POST', '/client/v1/sessions', { token, json: {} });
        expect(res.status, res.text).toBe(201);
        sessionIds.push({ sessionId: String(res.body.sessionId), token });
      },
    );

    // What the server confirmed, to look for after the restart.
    const ackedFrames = new Map<string, { sessionId: string; ids: string[] }>(); // by requestId
    const sentFrames = new Map<string, { sessionId: string; ids: string[] }>();
    const storedBatches: { sessionId: string; ids: string[] }[] = [];
    const acceptedCommands: { sessionId: string; commandId: string; data: string }[] = [];
    let signalledAt = Number.POSITIVE_INFINITY;
    let answeredAfterSignal = 0; // requests sent before the signal whose answer came after it

    const sleepers = await Promise.all(
      sessionIds.slice(0, FROZEN).map(async ({ sessionId, token }) => {
        const sleeper = await frozen(url, sessionId, token);
        rawSockets.push(sleeper.socket);
        return sleeper;
      }),
    );
    const devices: Device[] = [];
    await pool(sessionIds.slice(FROZEN), 50, async ({ sessionId, token }) => {
      const device = await connect(url, sessionId, token, (m) => {
        if (m.type !== 'events.ack') return;
        const frame = sentFrames.get(String(m.requestId));
        if (frame) ackedFrames.set(String(m.requestId), frame);
      });
      sockets.push(device.ws);
      devices.push(device);
    });
    expect(devices).toHaveLength(SOCKETS - FROZEN);

    const pick = () => devices[Math.floor(Math.random() * devices.length)];
    let serial = 0;
    let exited = false;
    void first.exited.then(() => {
      exited = true;
    });

    const sendFrame = (d: Device) => {
      if (d.ws.readyState !== WebSocket.OPEN) return;
      const requestId = `f-${serial++}`;
      const ids = [`${requestId}-a`, `${requestId}-b`];
      sentFrames.set(requestId, { sessionId: d.sessionId, ids });
      d.ws.send(
        JSON.stringify({
          type: 'events',
          requestId,
          events: ids.map((id) => ({ id, eventType: 'Custom', timestamp: Date.now(), custom01: 'ws' })),
        }),
      );
    };
    // Events over the sockets: a frame from 5 random devices every 20 ms.
    const frames = setInterval(() => {
      for (let i = 0; i < 5; i++) sendFrame(pick());
    }, 20);

    // Over HTTP, 20 at a time until the process is gone: device event batches and tenant commands.
    const traffic = Array.from({ length: 20 }, async (_, worker) => {
      while (!exited) {
        const d = pick();
        const n = serial++;
        const sentAt = Date.now();
        let status = 0;
        try {
          if (worker % 2 === 0) {
            const ids = [`h-${n}-a`, `h-${n}-b`, `h-${n}-c`];
            const res = await call(url, 'POST', `/client/v1/sessions/${d.sessionId}/events`, {
              token: d.token,
              json: {
                events: ids.map((id) => ({
                  id,
                  eventType: 'Custom',
                  timestamp: Date.now(),
                  custom01: 'http',
                })),
              },
            });
            status = res.status;
            if (status === 200) storedBatches.push({ sessionId: d.sessionId, ids });
          } else {
            const data = `drain ${n}`;
            const res = await call(url, 'POST', `/sessions/${d.sessionId}/realtime/commands`, {
              token: tenant.token,
              json: { name: 'text', data },
            });
            status = res.status;
            if (status === 202)
              acceptedCommands.push({ sessionId: d.sessionId, commandId: String(res.body.commandId), data });
          }
        } catch {
          // Refused or cut off by the shutdown: not answered, so nothing is promised.
          await sleep(5);
        }
        // Anything else than 2xx while running is a failure of this test's traffic, not of the drain.
        if (sentAt < signalledAt) expect([0, 200, 202, 503]).toContain(status);
        if (sentAt < signalledAt && Date.now() > signalledAt && status >= 200 && status < 300)
          answeredAfterSignal++;
      }
    });

    // The signal comes once every kind of traffic is flowing (soon on a quiet machine).
    const flowing = () =>
      storedBatches.length >= 20 && acceptedCommands.length >= 20 && ackedFrames.size >= 20;
    for (let waited = 0; !flowing() && waited < 30_000; waited += 100) await sleep(100);
    expect(flowing()).toBe(true);
    // And a frame from every device at once, most of them still to be handled when the signal comes.
    for (const d of devices) sendFrame(d);
    signalledAt = Date.now();
    first.child.kill('SIGTERM');
    const exit = await exitWithin(first, 15_000);
    clearInterval(frames);
    await Promise.all(traffic);

    const logged = (levels: RegExp) =>
      first
        .stdout()
        .split('\n')
        .filter((line) => levels.test(line));
    expect(exit.code, [...logged(/^\{"level":(40|50|60)/), first.stderr()].join('\n')).toBe(0);
    // Within 10 s by the server's own clock, from the signal handled to the store closed: exit 0 says
    // so already (past shutdownTimeoutMs it exits 1), and the log lines give the figure. The parent's
    // view adds signal delivery and process teardown on a loaded machine (bounded by exitWithin).
    const at = (msg: string) => {
      const line = logged(new RegExp(`"msg":"${msg}"`))[0];
      expect(line, `no "${msg}" log line`).toBeDefined();
      return Number((JSON.parse(line) as Json).time);
    };
    expect(at('stopped') - at('shutting down')).toBeLessThan(10_000);
    // Nothing failed on the way out (a frame or request cut off by the store closing would log an error).
    expect(logged(/^\{"level":(50|60)/)).toEqual([]);
    // Every device was told the server is restarting.
    const codes = new Map<number, number>();
    for (const code of await Promise.all(devices.map((d) => d.closed)))
      codes.set(code, (codes.get(code) ?? 0) + 1);
    expect(Object.fromEntries(codes)).toEqual({ 1012: SOCKETS - FROZEN });
    // The sleepers were not waited for, but the close frame is there for them when they wake up.
    for (const sleeper of sleepers) expect(closeCode(await sleeper.rest())).toBe(1012);
    // The signal met work in flight.
    expect(answeredAfterSignal).toBeGreaterThan(0);

    // A restart on the same store has everything that was answered.
    const second = await startProcess(env, { timeoutMs: 60_000 });
    running.push(second);
    const expected = new Map<string, Set<string>>();
    for (const { sessionId, ids } of [...storedBatches, ...ackedFrames.values()]) {
      const set = expected.get(sessionId) ?? new Set<string>();
      for (const id of ids) set.add(id);
      expected.set(sessionId, set);
    }
    const missing: string[] = [];
    await pool([...expected.keys()], 20, async (sessionId) => {
      const res = await call<{ events: { id: string }[]; hasMore: boolean }>(
        second.url,
        'GET',
        `/sessions/${sessionId}/events?limit=1000`,
        { token: tenant.token },
      );
      expect(res.status, res.text).toBe(200);
      expect(res.body.hasMore).toBe(false);
      const stored = new Set(res.body.events.map((e) => e.id));
      for (const id of expected.get(sessionId) ?? []) if (!stored.has(id)) missing.push(`${sessionId}/${id}`);
    });
    expect(missing).toEqual([]);
    const lostCommands: string[] = [];
    await pool(acceptedCommands, 20, async ({ sessionId, commandId, data }) => {
      const res = await call(second.url, 'GET', `/sessions/${sessionId}/realtime/commands/${commandId}`, {
        token: tenant.token,
      });
      if (res.status !== 200 || res.body.data !== data) lostCommands.push(`${commandId}: ${res.status}`);
    });
    expect(lostCommands).toEqual([]);

    second.child.kill('SIGTERM');
    expect((await exitWithin(second, 10_000)).code).toBe(0);
  }, 180_000);
});
