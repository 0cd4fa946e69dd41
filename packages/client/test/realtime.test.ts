import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  AspectRatio,
  CameraView,
  type DeviceErrorEvent,
  type DeviceEvents,
  type DisconnectedInfo,
  type LivelineDevice,
  type LivelineDeviceOptions,
  LivelineError,
  LookType,
  type ReconnectingInfo,
  Resolution,
  standardWebSocketConnector,
} from '../src/index.ts';
import { eventIdsOf, fakeLivelineFixture } from './fake-liveline.ts';

/** Timers may fire a millisecond or so early; lower bounds on delays allow for that. */
const SLACK_MS = 5;

const fx = fakeLivelineFixture();
const device = (options?: Partial<LivelineDeviceOptions>) => fx.device(options);

/** A device with a session, connected. */
async function connected(options: Partial<LivelineDeviceOptions> = {}) {
  const d = device(options);
  const { sessionId } = await d.startSession();
  await d.connect();
  return { device: d, sessionId };
}

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(2);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Everything a device emits, by event name. */
function recorder(d: LivelineDevice) {
  const seen = {
    connected: [] as DeviceEvents['connected'][],
    disconnected: [] as DisconnectedInfo[],
    reconnecting: [] as ReconnectingInfo[],
    replaced: [] as DeviceEvents['replaced'][],
    errors: [] as DeviceErrorEvent[],
    commands: [] as DeviceEvents['command'][],
  };
  d.on('connected', (e) => seen.connected.push(e));
  d.on('disconnected', (e) => seen.disconnected.push(e));
  d.on('reconnecting', (e) => seen.reconnecting.push(e));
  d.on('replaced', (e) => seen.replaced.push(e));
  d.on('error', (e) => seen.errors.push(e));
  d.on('command', (e) => seen.commands.push(e));
  return seen;
}

async function ackOf(commandId: string) {
  await waitFor(() => fx.fake.socketMessages('ack').some((m) => m.commandId === commandId));
  return fx.fake.socketMessages('ack').filter((m) => m.commandId === commandId);
}

describe('connecting', () => {
  it('opens the session’s realtimeUrl with the token in the Authorization header and resolves on welcome', async () => {
    fx.fake.heartbeatIntervalMs = 12_345;
    const d = device();
    const seen = recorder(d);
    const { sessionId } = await d.startSession();
    expect(d.connected).toBe(false);
    await d.connect();
    expect(d.connected).toBe(true);
    const connection = fx.fake.connections[0];
    expect(connection.url).toBe(`/client/v1/sessions/${sessionId}/realtime`);
    expect(connection.headers.authorization).toBe(`Bearer ${fx.fake.token}`);
    expect(seen.connected).toEqual([{ sessionId, heartbeatIntervalMs: 12_345 }]);
    // Connecting again while connected is a no-op.
    await d.connect();
    expect(fx.fake.connections).toHaveLength(1);
  });

  it('rejects connect() without a session, and after close()', async () => {
    const d = device();
    await expect(d.connect()).rejects.toMatchObject({ code: 'no_session' });
    await d.close();
    await expect(d.connect()).rejects.toMatchObject({ code: 'closed' });
  });

  it('sends a heartbeat every heartbeatIntervalMs from the welcome', async () => {
    fx.fake.heartbeatIntervalMs = 40;
    const d = device();
    await d.startSession();
    const welcomedAt = performance.now();
    await d.connect();
    await waitFor(() => fx.fake.connections[0].heartbeats.length >= 5);
    const beats = fx.fake.connections[0].heartbeats;
    // The n-th beat is due n intervals after the welcome and never comes earlier. The gap between two
    // receipts may be shorter than an interval: a beat read late (the event loop busy) and the next
    // one on time.
    for (let i = 0; i < beats.length; i++) {
      expect(beats[i] - welcomedAt).toBeGreaterThanOrEqual(40 * (i + 1) - SLACK_MS);
      if (i > 0) expect(beats[i] - beats[i - 1]).toBeLessThan(40 * 3);
    }
    expect(fx.fake.connections[0].received.filter((m) => m.type === 'heartbeat')[0]).toEqual({
      type: 'heartbeat',
    });
    await d.disconnect();
    const count = beats.length;
    await sleep(120);
    expect(fx.fake.connections[0].heartbeats.length).toBe(count);
  });

  it('reconnects with exponential backoff while the upgrade fails, then resumes the same session', async () => {
    fx.fake.scriptUpgrades({ status: 503 }, { status: 502 }, 'drop', { status: 503 });
    const d = device({ retry: { initialDelayMs: 30, maxDelayMs: 100 } });
    const seen = recorder(d);
    const { sessionId } = await d.startSession();
    await d.connect();
    expect(fx.fake.upgradeAttempts).toHaveLength(5);
    expect(seen.reconnecting).toEqual([
      { attempt: 1, delayMs: 30, code: 1006 },
      { attempt: 2, delayMs: 60, code: 1006 },
      { attempt: 3, delayMs: 100, code: 1006 },
      { attempt: 4, delayMs: 100, code: 1006 },
    ]);
    const gaps = fx.fake.upgradeAttempts.slice(1).map((at, i) => at - fx.fake.upgradeAttempts[i]);
    [30, 60, 100, 100].forEach((delay, i) => {
      expect(gaps[i]).toBeGreaterThanOrEqual(delay - SLACK_MS);
    });
    expect(fx.fake.connections.map((c) => c.sessionId)).toEqual([sessionId]);
    expect(seen.errors).toEqual([]);
  });

  it('draws each delay uniformly below the cap (full jitter)', async () => {
    fx.fake.scriptUpgrades({ status: 503 }, { status: 503 }, { status: 503 });
    const draws = [0.5, 0.25, 0];
    const d = device({ random: () => draws.shift() ?? 0, retry: { initialDelayMs: 40, maxDelayMs: 1000 } });
    const seen = recorder(d);
    await d.startSession();
    await d.connect();
    expect(seen.reconnecting.map((r) => r.delayMs)).toEqual([20, 20, 0]);
  });

  it('reconnects when a welcomed connection drops, and resets the backoff after the welcome', async () => {
    const d = device({ retry: { initialDelayMs: 20, maxDelayMs: 1000 } });
    const seen = recorder(d);
    const { sessionId } = await d.startSession();
    fx.fake.scriptUpgrades({ status: 503 }, { status: 503 });
    await d.connect();
    expect(seen.reconnecting.map((r) => r.delayMs)).toEqual([20, 40]);
    fx.fake.connections[0].ws.terminate();
    await waitFor(() => fx.fake.connections.length === 2 && d.connected);
    expect(seen.disconnected).toEqual([{ code: 1006, reason: '', willReconnect: true }]);
    expect(seen.reconnecting.at(-1)).toEqual({ attempt: 1, delayMs: 20, code: 1006 });
    expect(seen.connected).toHaveLength(2);
    expect(fx.fake.connections[1].sessionId).toBe(sessionId);
  });

  it('reconnects promptly after 1012 (server restarting), then backs off if the server is still away', async () => {
    const d = device({ retry: { initialDelayMs: 25, maxDelayMs: 1000 } });
    const seen = recorder(d);
    await d.startSession();
    await d.connect();
    fx.fake.scriptUpgrades({ status: 503 });
    fx.fake.connections[0].ws.close(1012, 'server restarting');
    await waitFor(() => fx.fake.connections.length === 2 && d.connected);
    expect(seen.disconnected[0]).toEqual({ code: 1012, reason: 'server restarting', willReconnect: true });
    expect(seen.reconnecting).toEqual([
      { attempt: 1, delayMs: 25, code: 1012 },
      { attempt: 2, delayMs: 50, code: 1006 },
    ]);
  });

  it('stops reconnecting when replaced by a newer connection (4001) and says so', async () => {
    const { device: d, sessionId } = await connected();
    const seen = recorder(d);
    const intruder = new WebSocket(
      `${fx.fake.baseUrl.replace('http', 'ws')}/client/v1/sessions/${sessionId}/realtime`,
      {
        headers: { authorization: `Bearer ${fx.fake.token}` },
      },
    );
    await waitFor(() => seen.replaced.length === 1);
    expect(seen.replaced).toEqual([{ sessionId }]);
    expect(seen.disconnected).toEqual([
      { code: 4001, reason: 'replaced by a newer connection', willReconnect: false },
    ]);
    expect(d.connected).toBe(false);
    await sleep(100);
    expect(fx.fake.upgradeAttempts).toHaveLength(2);
    expect(seen.reconnecting).toEqual([]);
    intruder.terminate();
  });

  it('a second device resuming the session replaces the first', async () => {
    const { device: first, sessionId } = await connected();
    const seen = recorder(first);
    const info = first.session;
    if (!info) throw new Error('no session');
    const second = device();
    second.resumeSession(info);
    expect(() => second.resumeSession(info)).toThrow(LivelineError);
    await second.connect();
    await waitFor(() => seen.replaced.length === 1);
    expect(seen.replaced).toEqual([{ sessionId }]);
    expect(first.connected).toBe(false);
    expect(second.connected).toBe(true);
    expect(fx.fake.connections.map((c) => c.sessionId)).toEqual([sessionId, sessionId]);
  });

  it.each([
    [4003, 'forbidden'],
    [4004, 'not_found'],
    [4009, 'session_ended'],
  ])(
    'treats close code %i as permanent: error %s, connect() rejects, no retries',
    async (closeCode, code) => {
      fx.fake.scriptUpgrades({ close: closeCode });
      const d = device();
      const seen = recorder(d);
      await d.startSession();
      const error = await d.connect().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LivelineError);
      expect(error).toMatchObject({ code, status: 0, retryable: false });
      expect(seen.errors.map((e) => e.error.code)).toEqual([code]);
      expect(seen.errors[0].rejectedEvents).toEqual([]);
      await sleep(60);
      expect(fx.fake.upgradeAttempts).toHaveLength(1);
      expect(seen.reconnecting).toEqual([]);
    },
  );

  it('stops on a 401 upgrade refusal and reconnects after setToken()', async () => {
    fx.fake.scriptUpgrades({ status: 401 });
    const d = device();
    const seen = recorder(d);
    await d.startSession();
    await expect(d.connect()).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    await sleep(50);
    expect(fx.fake.upgradeAttempts).toHaveLength(1);
    d.setToken(fx.fake.token);
    await waitFor(() => d.connected);
    expect(seen.errors.map((e) => e.error.code)).toEqual(['unauthorized']);
    expect(fx.fake.upgradeAttempts).toHaveLength(2);
  });

  it('disconnect() closes with 1000 and stops reconnecting; connect() opens again', async () => {
    const { device: d } = await connected();
    const seen = recorder(d);
    await d.disconnect();
    expect(d.connected).toBe(false);
    await waitFor(() => fx.fake.connections[0].closed !== null);
    expect(fx.fake.connections[0].closed).toEqual({ code: 1000, reason: 'client closed' });
    expect(seen.disconnected).toEqual([{ code: 1000, reason: 'client closed', willReconnect: false }]);
    await sleep(50);
    expect(fx.fake.upgradeAttempts).toHaveLength(1);
    await d.connect();
    expect(fx.fake.connections).toHaveLength(2);
  });

  it('disconnect() before the welcome rejects the pending connect()', async () => {
    fx.fake.autoWelcome = false;
    const d = device();
    await d.startSession();
    const pending = d.connect().catch((error: unknown) => error);
    await fx.fake.waitForConnection(1);
    await d.disconnect();
    expect(await pending).toMatchObject({ code: 'disconnected' });
    await waitFor(() => fx.fake.connections[0].closed !== null);
  });

  it('close() closes the socket with 1000 and stops its timers', async () => {
    fx.fake.heartbeatIntervalMs = 20;
    const { device: d } = await connected();
    d.startHealthReporting(() => ({ fps: 72 }), 20);
    await d.close();
    await waitFor(() => fx.fake.connections[0].closed !== null);
    expect(fx.fake.connections[0].closed?.code).toBe(1000);
    const beats = fx.fake.connections[0].heartbeats.length;
    const buffered = d.stats().buffered;
    await sleep(80);
    expect(fx.fake.connections[0].heartbeats.length).toBe(beats);
    expect(d.stats().buffered).toBe(buffered);
    expect(fx.fake.upgradeAttempts).toHaveLength(1);
  });

  it('endSession() flushes, closes the channel, then ends the session', async () => {
    const { device: d, sessionId } = await connected();
    d.track({ eventType: 'Custom', custom01: 'last' });
    await d.endSession();
    expect(fx.fake.connections[0].closed?.code).toBe(1000);
    expect(fx.fake.storedIds(sessionId)).toHaveLength(1);
    expect(fx.fake.sessions.get(sessionId)?.endedAt).not.toBeNull();
  });

  it('terminates a connection the server stopped pinging and reconnects', async () => {
    fx.fake.heartbeatIntervalMs = 20;
    const { device: d } = await connected();
    const seen = recorder(d);
    fx.fake.connections[0].ws.ping();
    // No frame or ping for three intervals: the peer is gone.
    fx.fake.connections[0].ws.pause();
    await waitFor(() => seen.connected.length === 1, 2000);
    expect(seen.disconnected[0]).toMatchObject({ code: 1006, willReconnect: true });
    expect(fx.fake.connections).toHaveLength(2);
  });
});

describe('commands', () => {
  it('gives each handler its typed payload and acknowledges after it resolves', async () => {
    const { device: d, sessionId } = await connected();
    const calls: unknown[] = [];
    d.onText((text, cmd) => {
      calls.push(['text', text, cmd.name]);
    });
    d.onCommand((name, variables) => {
      calls.push(['custom', name, variables]);
    });
    d.onCamera((controls) => {
      calls.push(['camera', controls]);
    });
    d.onStreamStart((request) => {
      calls.push(['stream.start', request]);
    });
    d.onStreamStop((cmd) => {
      calls.push(['stream.stop', cmd.data]);
    });
    d.onRecordStart((request) => {
      calls.push(['record.start', request]);
    });
    d.onRecordStop(async () => {
      await sleep(5);
      calls.push(['record.stop']);
    });
    const ids = [
      fx.fake.sendCommand(sessionId, { name: 'text', data: 'hello headset' }),
      fx.fake.sendCommand(sessionId, {
        name: 'jump',
        data: {
          names: ['height', 'count', 'loud', 'label', 'neg'],
          types: ['float', 'int', 'bool', 'string', 'int'],
          values: ['2.5', '3', 'false', 'a b', '-7'],
        },
      }),
      fx.fake.sendCommand(sessionId, {
        name: 'camera',
        data: {
          controls: [
            { name: 'fieldOfView', value: '90.5' },
            { name: 'cameraView', value: '2' },
            { name: 'lookType', value: '1' },
            { name: 'heightOffset', value: '-100' },
          ],
        },
      }),
      fx.fake.sendCommand(sessionId, {
        name: 'stream.start',
        data: { resolution: 2, aspectratio: 1, streamingSessionId: 'stream-1' },
      }),
      fx.fake.sendCommand(sessionId, { name: 'record.start', data: { recordingId: 'rec-1' } }),
      fx.fake.sendCommand(sessionId, { name: 'record.stop', data: {} }),
      fx.fake.sendCommand(sessionId, { name: 'stream.stop', data: {} }),
    ];
    await waitFor(() => fx.fake.socketMessages('ack').length === ids.length);
    expect(fx.fake.socketMessages('ack')).toEqual(
      ids.map((commandId) => ({ type: 'ack', commandId, ok: true })),
    );
    expect(calls).toEqual([
      ['text', 'hello headset', 'text'],
      ['custom', 'jump', { height: 2.5, count: 3, loud: false, label: 'a b', neg: -7 }],
      [
        'camera',
        {
          fieldOfView: 90.5,
          cameraView: CameraView.ObjectAttached,
          lookType: LookType.Player,
          heightOffset: -100,
        },
      ],
      [
        'stream.start',
        { resolution: Resolution.P1080, aspectratio: AspectRatio.R9x16, streamingSessionId: 'stream-1' },
      ],
      ['record.start', { recordingId: 'rec-1' }],
      ['record.stop'],
      ['stream.stop', {}],
    ]);
  });

  it('refuses a command whose handler throws or rejects, with the error message', async () => {
    const { device: d, sessionId } = await connected();
    d.onText((text) => {
      if (text === 'sync') throw new Error('cannot show text now');
      return Promise.reject(new Error('async refusal'));
    });
    const a = fx.fake.sendCommand(sessionId, { name: 'text', data: 'sync' });
    const b = fx.fake.sendCommand(sessionId, { name: 'text', data: 'async' });
    expect(await ackOf(a)).toEqual([{ type: 'ack', commandId: a, ok: false, error: 'cannot show text now' }]);
    expect(await ackOf(b)).toEqual([{ type: 'ack', commandId: b, ok: false, error: 'async refusal' }]);
  });

  it('refuses commands nobody handles, naming the registration method, and malformed ones', async () => {
    const { device: d, sessionId } = await connected();
    const off = d.onCamera(() => {});
    off();
    const camera = fx.fake.sendCommand(sessionId, {
      name: 'camera',
      data: { controls: [{ name: 'fieldOfView', value: '60' }] },
    });
    const custom = fx.fake.sendCommand(sessionId, {
      name: 'jump',
      data: { names: ['a'], types: ['int'], values: ['1'] },
    });
    d.onText(() => {});
    const bad = fx.fake.sendCommand(sessionId, { name: 'text', data: { not: 'a string' } });
    const [cameraAck] = await ackOf(camera);
    expect(cameraAck).toMatchObject({ ok: false });
    expect(cameraAck.error).toContain('onCamera');
    expect(cameraAck.error).toContain('"camera"');
    expect((await ackOf(custom))[0].error).toContain('onCommand');
    expect((await ackOf(bad))[0].error).toMatch(/^Malformed "text" command/);
  });

  it('runs handlers one at a time in arrival order and acks each only once it has finished', async () => {
    const { device: d, sessionId } = await connected();
    const log: string[] = [];
    let release: () => void = () => {};
    d.onText(async (text) => {
      log.push(`start ${text}`);
      if (text === 'slow') await new Promise<void>((resolve) => (release = resolve));
      log.push(`end ${text}`);
    });
    const slow = fx.fake.sendCommand(sessionId, { name: 'text', data: 'slow' });
    const fast = fx.fake.sendCommand(sessionId, { name: 'text', data: 'fast' });
    await waitFor(() => log.length === 1);
    await sleep(30);
    expect(log).toEqual(['start slow']);
    expect(fx.fake.socketMessages('ack')).toEqual([]);
    release();
    await waitFor(() => fx.fake.socketMessages('ack').length === 2);
    expect(log).toEqual(['start slow', 'end slow', 'start fast', 'end fast']);
    expect(fx.fake.socketMessages('ack').map((m) => m.commandId)).toEqual([slow, fast]);
  });

  it('hands a repeated commandId to the app once, and answers each repeat again', async () => {
    const { device: d, sessionId } = await connected({ retry: { initialDelayMs: 5, maxDelayMs: 5 } });
    const seen = recorder(d);
    const texts: string[] = [];
    d.onText((text) => {
      texts.push(text);
    });
    const id = fx.fake.sendCommand(sessionId, { name: 'text', data: 'once' });
    await waitFor(() => fx.fake.socketMessages('ack').length === 1);
    // A repeat on the same connection: answered again from memory.
    fx.fake.sendCommand(sessionId, { name: 'text', data: 'once', commandId: id });
    await waitFor(() => fx.fake.socketMessages('ack').length === 2);
    // The server re-sends an unanswered command on a new connection (at-least-once).
    fx.fake.connections[0].ws.terminate();
    await waitFor(() => d.connected && fx.fake.connections.length === 2);
    fx.fake.sendCommand(sessionId, { name: 'text', data: 'once', commandId: id });
    await waitFor(() => fx.fake.connections[1].received.some((m) => m.type === 'ack'));
    expect(texts).toEqual(['once']);
    expect(seen.commands.map((c) => c.commandId)).toEqual([id]);
    expect(fx.fake.socketMessages('ack')).toEqual([
      { type: 'ack', commandId: id, ok: true },
      { type: 'ack', commandId: id, ok: true },
      { type: 'ack', commandId: id, ok: true },
    ]);
  });

  it('does not run a repeat that arrives while the first is still being handled', async () => {
    const { device: d, sessionId } = await connected();
    let calls = 0;
    let release: () => void = () => {};
    d.onText(async () => {
      calls++;
      await new Promise<void>((resolve) => (release = resolve));
    });
    const id = fx.fake.sendCommand(sessionId, { name: 'text', data: 'x' });
    await waitFor(() => calls === 1);
    fx.fake.sendCommand(sessionId, { name: 'text', data: 'x', commandId: id });
    await sleep(30);
    release();
    await waitFor(() => fx.fake.socketMessages('ack').length === 1);
    await sleep(30);
    expect(calls).toBe(1);
    expect(fx.fake.socketMessages('ack')).toHaveLength(1);
  });

  it('reports server errors about acks through on("error")', async () => {
    const { device: d } = await connected();
    const seen = recorder(d);
    fx.fake.connections[0].ws.send(
      JSON.stringify({
        type: 'error',
        code: 'command_expired',
        message: 'The command expired before this ack arrived.',
        commandId: 'c-1',
      }),
    );
    await waitFor(() => seen.errors.length === 1);
    expect(seen.errors[0].error).toMatchObject({ code: 'command_expired', status: 0 });
    expect(seen.errors[0].error.detail).toContain('c-1');
  });
});

describe('events over the socket', () => {
  it('sends batches as events messages while connected, answered by events.ack', async () => {
    const { device: d, sessionId } = await connected();
    const a = d.track({ eventType: 'Custom', custom01: 'a' });
    const b = d.track({ eventType: 'Health', fps: 72 });
    await d.flush();
    const [message] = fx.fake.socketMessages('events');
    expect(message).toMatchObject({ type: 'events', events: [a, b] });
    expect(typeof message.requestId).toBe('string');
    expect(fx.fake.eventRequests()).toEqual([]);
    expect(fx.fake.storedIds(sessionId)).toEqual([a.id, b.id]);
    expect(d.stats()).toMatchObject({ sent: 2, buffered: 0 });
  });

  it('treats an error answer like the HTTP 400: drops the named event, resends the rest', async () => {
    const { device: d, sessionId } = await connected();
    const seen = recorder(d);
    const good1 = d.track({ eventType: 'Custom', custom01: 'ok' });
    const bad = d.track({ eventType: 'Health', cpuUsage: 400 });
    const good2 = d.track({ eventType: 'Custom', custom01: 'ok too' });
    await d.flush();
    const sent = fx.fake.socketMessages('events').map((m) => eventIdsOf(m));
    expect(sent).toEqual([
      [good1.id, bad.id, good2.id],
      [good1.id, good2.id],
    ]);
    expect(fx.fake.storedIds(sessionId)).toEqual([good1.id, good2.id]);
    expect(seen.errors).toHaveLength(1);
    expect(seen.errors[0].error).toMatchObject({ status: 400, code: 'validation_failed' });
    expect(seen.errors[0].rejections).toEqual([
      { event: bad, errors: [{ path: 'cpuUsage', message: 'must be <= 100' }] },
    ]);
    expect(d.stats()).toMatchObject({ sent: 2, rejected: 1, buffered: 0 });
  });

  it('falls back to HTTP, same ids, when the socket gives no answer in time', async () => {
    fx.fake.answerSocketEvents = false;
    const { device: d, sessionId } = await connected({ requestTimeoutMs: 100 });
    const event = d.track({ eventType: 'Custom', custom01: 'x' });
    await d.flush();
    expect(fx.fake.socketMessages('events').map((m) => eventIdsOf(m))).toEqual([[event.id]]);
    expect(fx.fake.batches()).toEqual([[event.id]]);
    expect(fx.fake.storedIds(sessionId)).toEqual([event.id]);
  });

  it('sends over HTTP when disabled, or when a batch is too large for one frame', async () => {
    const { device: d, sessionId } = await connected({ eventsOverSocket: false });
    d.track({ eventType: 'Custom', custom01: 'x' });
    await d.flush();
    expect(fx.fake.socketMessages('events')).toEqual([]);
    expect(fx.fake.batches()).toHaveLength(1);
    const big = await connected({ batchSize: 1000 });
    for (let i = 0; i < 300; i++) big.device.track({ eventType: 'Custom', custom01: 'x'.repeat(1000) });
    await big.device.flush();
    expect(fx.fake.socketMessages('events')).toEqual([]);
    expect(fx.fake.storedIds(big.sessionId)).toHaveLength(300);
    expect(fx.fake.storedIds(sessionId)).toHaveLength(1);
  });

  it('flushes the offline buffer on reconnect, without a flush() call', async () => {
    const { device: d, sessionId } = await connected({ retry: { initialDelayMs: 50, maxDelayMs: 50 } });
    fx.fake.scriptUpgrades({ status: 503 });
    fx.fake.connections[0].ws.terminate();
    await waitFor(() => !d.connected);
    const tracked = [1, 2, 3].map((n) => d.track({ eventType: 'Custom', custom01: `offline ${n}` }));
    await waitFor(() => fx.fake.storedIds(sessionId).length === 3);
    expect(fx.fake.storedIds(sessionId)).toEqual(tracked.map((e) => e.id));
    expect(fx.fake.socketMessages('events').map((m) => eventIdsOf(m))).toEqual([tracked.map((e) => e.id)]);
    expect(fx.fake.eventRequests()).toEqual([]);
  });

  it('wakes an HTTP backoff when the channel comes back', async () => {
    const d = device({ retry: { initialDelayMs: 10_000, maxDelayMs: 10_000 } });
    const { sessionId } = await d.startSession();
    fx.fake.failNext({ status: 503 });
    const event = d.track({ eventType: 'Custom', custom01: 'x' });
    const flushed = d.flush();
    await waitFor(() => fx.fake.eventRequests().length === 1);
    await d.connect();
    await flushed;
    expect(fx.fake.storedIds(sessionId)).toEqual([event.id]);
    expect(fx.fake.socketMessages('events')).toHaveLength(1);
  });
});

describe('streams started in the app', () => {
  it('starts and stops streams and recordings through the device routes', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    await expect(d.startRecording()).rejects.toMatchObject({ status: 409, code: 'not_streaming' });
    const { streamingSessionId } = await d.startStream({
      resolution: Resolution.P720,
      aspectratio: AspectRatio.R16x9,
    });
    expect(typeof streamingSessionId).toBe('string');
    const { recordingId } = await d.startRecording();
    expect(await d.stopRecording()).toEqual({ recordingId });
    expect(await d.stopStream()).toEqual({ streamingSessionId });
    const paths = fx.fake.requests.map((r) => `${r.method} ${r.path}`).slice(1);
    const base = `POST /client/v1/sessions/${sessionId}`;
    expect(paths).toEqual([
      `${base}/record/start`,
      `${base}/stream/start`,
      `${base}/record/start`,
      `${base}/record/stop`,
      `${base}/stream/stop`,
    ]);
    expect(fx.fake.requests[2].body).toEqual({ resolution: 1, aspectratio: 0 });
  });

  it('needs a session', async () => {
    await expect(device().startStream({ resolution: 0, aspectratio: 0 })).rejects.toMatchObject({
      code: 'no_session',
    });
  });
});

describe('health reporting', () => {
  it('tracks a Health event each interval from a sync or async provider, until stopped', async () => {
    const d = device();
    let n = 0;
    d.startHealthReporting(() => ({ fps: 72, batteryLevel: 90 - n++ }), 20);
    await waitFor(() => d.pendingEvents().length >= 2);
    expect(d.pendingEvents().slice(0, 2)).toMatchObject([
      { eventType: 'Health', fps: 72, batteryLevel: 90 },
      { eventType: 'Health', fps: 72, batteryLevel: 89 },
    ]);
    d.startHealthReporting(async () => ({ cpuUsage: 12 }), 20);
    const before = d.pendingEvents().length;
    await waitFor(() => d.pendingEvents().length > before);
    expect(d.pendingEvents().at(-1)).toMatchObject({ eventType: 'Health', cpuUsage: 12 });
    d.stopHealthReporting();
    const stopped = d.pendingEvents().length;
    await sleep(60);
    expect(d.pendingEvents()).toHaveLength(stopped);
    expect(() => d.startHealthReporting(() => ({}), 0)).toThrow(RangeError);
  });
});

describe('standardWebSocketConnector', () => {
  it('connects with the token as ?access_token= and handles commands', async () => {
    const d = device({
      connector: standardWebSocketConnector(WebSocket),
    });
    const { sessionId } = await d.startSession();
    await d.connect();
    expect(fx.fake.connections[0].url).toBe(
      `/client/v1/sessions/${sessionId}/realtime?access_token=${fx.fake.token}`,
    );
    expect(fx.fake.connections[0].headers.authorization).toBeUndefined();
    d.onText(() => {});
    const id = fx.fake.sendCommand(sessionId, { name: 'text', data: 'hi' });
    expect(await ackOf(id)).toEqual([{ type: 'ack', commandId: id, ok: true }]);
    fx.fake.connections[0].ws.close(4009, 'ended');
    await waitFor(() => !d.connected);
    expect(fx.fake.upgradeAttempts).toHaveLength(1);
  });
});
