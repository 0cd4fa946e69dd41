/**
 * The device SDK's realtime half (`@liveline/client`) against the real server: every command kind
 * arrives typed and ends acknowledged, refusals, queued and expired commands, replacement by a second
 * connection, events tied to a stream, and many devices at once.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  AspectRatio,
  type CameraSettings,
  CameraView,
  type CommandValue,
  type DeviceErrorEvent,
  LivelineDevice,
  type LivelineDeviceOptions,
  LookType,
  Resolution,
  type StreamStartRequest,
} from '../../../client/src/index.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe.each(backends)('the client SDK’s realtime channel against the real server (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  const devices: LivelineDevice[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_COMMAND_SWEEP_MS: '100' });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
  });
  afterEach(async () => {
    await Promise.all(devices.splice(0).map((device) => device.close()));
  });
  afterAll(async () => server?.close());

  async function newDevice(playerId: string, options: Partial<LivelineDeviceOptions> = {}) {
    const token = await deviceToken(base, tenant.token, playerId);
    const device = new LivelineDevice({
      baseUrl: base,
      token,
      flushIntervalMs: 60_000,
      retry: { initialDelayMs: 20, maxDelayMs: 200 },
      ...options,
    });
    devices.push(device);
    return { device, token };
  }

  /** A device with a started session, connected. */
  async function connectedDevice(playerId = `p-${Math.random().toString(36).slice(2)}`) {
    const { device, token } = await newDevice(playerId);
    const info = await device.startSession();
    await device.connect();
    return { device, token, info, sessionId: info.sessionId };
  }

  const commands = (sessionId: string) => `/sessions/${sessionId}/realtime/commands`;
  const send = (method: string, sessionId: string, path: string, json?: unknown) =>
    call<Json>(base, method, `${commands(sessionId)}${path}`, { token: tenant.token, json });
  const status = async (sessionId: string, commandId: unknown) =>
    (await call<Json>(base, 'GET', `${commands(sessionId)}/${commandId}`, { token: tenant.token })).body;
  const session = async (sessionId: string) =>
    (await call<Json>(base, 'GET', `/sessions/${sessionId}`, { token: tenant.token })).body;
  const settled = (sessionId: string, commandId: unknown) =>
    expect.poll(async () => (await status(sessionId, commandId)).status, { timeout: 5000 });
  /** The first read of the session (with its events) that `shows` what is waited for, as it was read. */
  async function sessionOnce(sessionId: string, shows: (s: Json) => boolean, timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await session(sessionId);
      if (shows(s)) return s;
      if (Date.now() > deadline) throw new Error(`the session never showed it: ${JSON.stringify(s)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('delivers each of the seven commands typed, and each ends acknowledged', async () => {
    const { device, sessionId } = await connectedDevice();
    const seen: unknown[] = [];
    let stream: StreamStartRequest | null = null;
    device.onStreamStart((request) => {
      stream = request;
      seen.push(['stream.start', request]);
    });
    device.onStreamStop(() => {
      seen.push(['stream.stop']);
    });
    device.onRecordStart((request) => {
      seen.push(['record.start', request]);
    });
    device.onRecordStop(() => {
      seen.push(['record.stop']);
    });
    device.onCamera((controls: CameraSettings) => {
      seen.push(['camera', controls]);
    });
    device.onText((text) => {
      seen.push(['text', text]);
    });
    device.onCommand((name, variables: Record<string, CommandValue>) => {
      seen.push([name, variables]);
    });

    const start = await send('POST', sessionId, '/stream', { resolution: 2, aspectratio: 1 });
    expect(start.status).toBe(202);
    expect(start.body.name).toBe('stream.start');
    // The SDK may acknowledge before the server reads the command back for its answer.
    expect(['delivered', 'acknowledged']).toContain(start.body.status);
    await settled(sessionId, start.body.commandId).toBe('acknowledged');
    const streamingSessionId = (start.body.data as Json).streamingSessionId;
    expect(stream).toEqual({
      resolution: Resolution.P1080,
      aspectratio: AspectRatio.R9x16,
      streamingSessionId,
    });
    // The first answer that shows the stream streaming already holds its StreamStarted: the state and
    // its event commit in one transaction, and the session is read before its events.
    const streaming = await sessionOnce(sessionId, (s) => (s.stream as Json).state === 'streaming');
    expect(streaming.stream).toMatchObject({ streamingSessionId, resolution: 2, aspectratio: 1 });
    expect((streaming.events as Json[]).filter((e) => e.eventType === 'StreamStarted')).toEqual([
      expect.objectContaining({ streamingSessionId, resolution: 2, aspectratio: 1 }),
    ]);

    const record = await send('PUT', sessionId, '/record');
    expect(record.status).toBe(202);
    await settled(sessionId, record.body.commandId).toBe('acknowledged');
    const recordingId = (record.body.data as Json).recordingId;
    await expect
      .poll(async () => (await session(sessionId)).recording)
      .toMatchObject({
        state: 'recording',
        recordingId,
      });

    const recordStop = await send('PUT', sessionId, '/record/stop');
    await settled(sessionId, recordStop.body.commandId).toBe('acknowledged');
    const streamStop = await send('PUT', sessionId, '/stream/stop');
    await settled(sessionId, streamStop.body.commandId).toBe('acknowledged');
    await expect.poll(async () => (await session(sessionId)).stream).toMatchObject({ state: 'idle' });

    const camera = await send('POST', sessionId, '', {
      name: 'camera',
      data: {
        controls: [
          { name: 'fieldOfView', value: '75.5' },
          { name: 'cameraView', value: '1' },
          { name: 'lookType', value: '2' },
          { name: 'heightOffset', value: '-12' },
        ],
      },
    });
    const text = await send('POST', sessionId, '', { name: 'text', data: 'hello headset' });
    const custom = await send('POST', sessionId, '', {
      name: 'set-difficulty',
      data: {
        names: ['level', 'speed', 'hardcore', 'label'],
        types: ['int', 'float', 'bool', 'string'],
        values: ['3', '1.25', 'true', 'nightmare'],
      },
    });
    for (const sent of [camera, text, custom]) {
      expect(sent.status).toBe(202);
      await settled(sessionId, sent.body.commandId).toBe('acknowledged');
    }
    expect(seen).toEqual([
      ['stream.start', { resolution: 2, aspectratio: 1, streamingSessionId }],
      ['record.start', { recordingId }],
      ['record.stop'],
      ['stream.stop'],
      [
        'camera',
        {
          fieldOfView: 75.5,
          cameraView: CameraView.ThirdPerson,
          lookType: LookType.LookPosition,
          heightOffset: -12,
        },
      ],
      ['text', 'hello headset'],
      ['set-difficulty', { level: 3, speed: 1.25, hardcore: true, label: 'nightmare' }],
    ]);
  });

  it('a throwing handler fails the command with its error; record start while not streaming is 409', async () => {
    const { device, sessionId } = await connectedDevice();
    device.onText(() => {
      throw new Error('the headset is off');
    });
    const sent = await send('POST', sessionId, '', { name: 'text', data: 'hello?' });
    await settled(sessionId, sent.body.commandId).toBe('failed');
    expect((await status(sessionId, sent.body.commandId)).error).toBe('the headset is off');
    const unhandled = await send('POST', sessionId, '', {
      name: 'custom',
      data: { names: ['a'], types: ['int'], values: ['1'] },
    });
    await settled(sessionId, unhandled.body.commandId).toBe('failed');
    expect(String((await status(sessionId, unhandled.body.commandId)).error)).toContain('onCommand');
    const record = await send('PUT', sessionId, '/record');
    expect(record.status).toBe(409);
    expect(record.body.code).toBe('not_streaming');
  });

  it('a stream refused by the app goes back to idle', async () => {
    const { device, sessionId } = await connectedDevice();
    device.onStreamStart(async () => {
      throw new Error('no encoder');
    });
    const start = await send('POST', sessionId, '/stream', { resolution: 0, aspectratio: 0 });
    await settled(sessionId, start.body.commandId).toBe('failed');
    await expect.poll(async () => (await session(sessionId)).stream).toMatchObject({ state: 'idle' });
  });

  it('queues a command for a disconnected device and delivers it after reconnecting; an expired one never arrives', async () => {
    const { device, sessionId } = await connectedDevice();
    const texts: string[] = [];
    device.onText((text) => {
      texts.push(text);
    });
    await device.disconnect();
    await expect.poll(async () => (await session(sessionId)).connected).toBe(false);
    const expiring = await send('POST', sessionId, '?ttlSeconds=1', { name: 'text', data: 'too late' });
    expect(expiring.body.status).toBe('queued');
    await settled(sessionId, expiring.body.commandId).toBe('expired');
    const queued = await send('POST', sessionId, '?ttlSeconds=60', { name: 'text', data: 'waiting for you' });
    expect(queued.body.status).toBe('queued');
    await device.connect();
    await settled(sessionId, queued.body.commandId).toBe('acknowledged');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(texts).toEqual(['waiting for you']);
    expect((await status(sessionId, expiring.body.commandId)).status).toBe('expired');
  });

  it('a command sent while the connection is down arrives once the SDK reconnects by itself', async () => {
    const { device } = await newDevice(`p-${Math.random().toString(36).slice(2)}`, {
      random: () => 1,
      retry: { initialDelayMs: 1000, maxDelayMs: 1000 },
    });
    const { sessionId } = await device.startSession();
    await device.connect();
    const texts: string[] = [];
    device.onText((text) => {
      texts.push(text);
    });
    const disconnected: unknown[] = [];
    device.on('disconnected', (e) => disconnected.push(e));
    // A network loss: the server's side of every socket drops (this test's device is the only one).
    for (const socket of server.app.websocketServer.clients) socket.terminate();
    await expect.poll(async () => (await session(sessionId)).connected).toBe(false);
    const sent = await send('POST', sessionId, '', { name: 'text', data: 'after the outage' });
    expect(sent.body.status).toBe('queued');
    await settled(sessionId, sent.body.commandId).toBe('acknowledged');
    expect(texts).toEqual(['after the outage']);
    expect(disconnected).toEqual([{ code: 1006, reason: '', willReconnect: true }]);
    expect(device.connected).toBe(true);
  });

  it('a second device on the same session replaces the first, which sees 4001 and stops', async () => {
    const { device: first, info, token, sessionId } = await connectedDevice();
    const replaced: unknown[] = [];
    const disconnected: unknown[] = [];
    first.on('replaced', (e) => replaced.push(e));
    first.on('disconnected', (e) => disconnected.push(e));
    const firstTexts: string[] = [];
    first.onText((text) => {
      firstTexts.push(text);
    });

    const second = new LivelineDevice({ baseUrl: base, token, flushIntervalMs: 60_000 });
    devices.push(second);
    second.resumeSession(info);
    const secondTexts: string[] = [];
    second.onText((text) => {
      secondTexts.push(text);
    });
    await second.connect();
    await waitFor(() => replaced.length === 1);
    expect(replaced).toEqual([{ sessionId }]);
    expect(disconnected).toEqual([
      { code: 4001, reason: 'replaced by a newer connection', willReconnect: false },
    ]);
    expect(first.connected).toBe(false);

    const sent = await send('POST', sessionId, '', { name: 'text', data: 'to the new one' });
    await settled(sessionId, sent.body.commandId).toBe('acknowledged');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(secondTexts).toEqual(['to the new one']);
    expect(firstTexts).toEqual([]);
    expect(second.connected).toBe(true);
    expect(first.connected).toBe(false);
  });

  it('events sent over the socket during a stream carry its streamingSessionId', async () => {
    const { device, sessionId } = await connectedDevice();
    device.onStreamStart(() => {});
    device.onStreamStop(() => {});
    const errors: DeviceErrorEvent[] = [];
    device.on('error', (e) => errors.push(e));
    const before = device.track({ eventType: 'Custom', custom01: 'before' });
    await device.flush();
    const start = await send('POST', sessionId, '/stream', { resolution: 1, aspectratio: 0 });
    await settled(sessionId, start.body.commandId).toBe('acknowledged');
    const streamingSessionId = (start.body.data as Json).streamingSessionId;
    // The command shows `acknowledged` a moment before the stream state becomes `streaming`.
    await expect.poll(async () => (await session(sessionId)).stream).toMatchObject({ state: 'streaming' });
    const during = device.track({ eventType: 'Health', fps: 72, batteryLevel: 80 });
    await device.flush();
    const stop = await send('PUT', sessionId, '/stream/stop');
    await settled(sessionId, stop.body.commandId).toBe('acknowledged');
    await expect.poll(async () => (await session(sessionId)).stream).toMatchObject({ state: 'idle' });

    // The app starts its own stream too.
    const own = await device.startStream({ resolution: Resolution.P720, aspectratio: AspectRatio.R1x1 });
    const duringOwn = device.track({ eventType: 'Custom', custom01: 'own stream' });
    await device.flush();
    await device.stopStream();
    expect(errors).toEqual([]);

    const byId = new Map(((await session(sessionId)).events as Json[]).map((e) => [e.id, e]));
    expect(byId.get(before.id)).not.toHaveProperty('streamingSessionId');
    expect(byId.get(during.id)).toMatchObject({ streamingSessionId, fps: 72 });
    expect(byId.get(duringOwn.id)).toMatchObject({ streamingSessionId: own.streamingSessionId });
    expect(device.stats()).toMatchObject({ sent: 3, rejected: 0, buffered: 0 });
  });

  it('50 concurrent devices each receive exactly their own commands, in order', async () => {
    const count = 50;
    const perDevice = 5;
    const fleet = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const connected = await connectedDevice(`fleet-${i}`);
        const texts: string[] = [];
        connected.device.onText((text) => {
          texts.push(text);
        });
        return { ...connected, texts };
      }),
    );
    const sent = await Promise.all(
      fleet.map(async ({ sessionId }, i) => {
        const ids: unknown[] = [];
        for (let n = 0; n < perDevice; n++) {
          const res = await send('POST', sessionId, '', { name: 'text', data: `device ${i} message ${n}` });
          expect(res.status).toBe(202);
          ids.push(res.body.commandId);
        }
        return ids;
      }),
    );
    await waitFor(() => fleet.every((d) => d.texts.length >= perDevice), 20_000);
    fleet.forEach((d, i) => {
      expect(d.texts).toEqual(Array.from({ length: perDevice }, (_, n) => `device ${i} message ${n}`));
    });
    await Promise.all(
      fleet.map(async ({ sessionId }, i) => {
        for (const id of sent[i]) await settled(sessionId, id).toBe('acknowledged');
      }),
    );
  });
});
