/**
 * The device SDK's screenshots and built-in Health against the real server (CONTRACT §14, issue 14):
 * the tenant's `screenshot` command taken through the app's provider, uploaded and acknowledged;
 * screenshots on demand and on an interval; Health sent with no app code at all, with `fps` from
 * `device.frame()` and fields added by the app's hook.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  LivelineDevice,
  type LivelineDeviceOptions,
  screenshotFromBuffer,
  screenshotFromCanvas,
} from '../../../client/src/index.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { greyJpeg } from '../helpers/jpeg.ts';
import { greyPng } from '../helpers/png.ts';
import { waitFor } from '../helpers/receiver.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

describe.each(backends)('SDK screenshots and built-in Health against the real server (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let token: string;
  const devices: LivelineDevice[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_RATE_LIMIT_DEVICE_RPS: '0' });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
    token = await deviceToken(base, tenant.token, 'sdk-shots');
  });
  afterEach(async () => {
    await Promise.all(devices.splice(0).map((device) => device.close()));
  });
  afterAll(async () => server?.close());

  function device(options: Partial<LivelineDeviceOptions> = {}) {
    const created = new LivelineDevice({ baseUrl: base, token, flushIntervalMs: 20, ...options });
    devices.push(created);
    return created;
  }

  const tenantGet = (path: string) => call<Json>(base, 'GET', path, { token: tenant.token });
  async function eventsOf(sessionId: string, eventType: string) {
    const res = await call<{ events: Json[] }>(
      base,
      'GET',
      `/sessions/${sessionId}/events?eventType=${eventType}`,
      {
        token: tenant.token,
      },
    );
    expect(res.status).toBe(200);
    return res.body.events;
  }
  async function imageBytes(sessionId: string, imageId: string) {
    const res = await fetch(`${base}/sessions/${sessionId}/screenshots/${imageId}`, {
      headers: { authorization: `Bearer ${tenant.token}` },
    });
    expect(res.status).toBe(200);
    return { type: res.headers.get('content-type'), bytes: Buffer.from(await res.arrayBuffer()) };
  }
  async function commandSettles(sessionId: string, commandId: string) {
    let command: Json = {};
    await waitFor(
      async () => {
        command = (await tenantGet(`/sessions/${sessionId}/realtime/commands/${commandId}`)).body;
        return command.status === 'acknowledged' || command.status === 'failed';
      },
      5000,
      'the command to settle',
    );
    return command;
  }

  it("answers the tenant's screenshot command: taken from a supplied buffer, uploaded, then acked", async () => {
    const png = greyPng(48, 27);
    const d = device({ screenshotProvider: screenshotFromBuffer(png, 'image/png') });
    const { sessionId } = await d.startSession();
    await d.connect();
    const sent = await call<Json>(base, 'POST', `/sessions/${sessionId}/realtime/commands`, {
      token: tenant.token,
      json: { name: 'screenshot', data: {} },
    });
    expect(sent.status, sent.text).toBe(202);
    expect(sent.body).toMatchObject({ name: 'screenshot', status: 'delivered' });
    const settled = await commandSettles(sessionId, String(sent.body.commandId));
    expect(settled.status).toBe('acknowledged');
    // Acked after the upload: the event is there by then, with the header's size.
    const [shot] = await eventsOf(sessionId, 'Screenshot');
    expect(shot).toMatchObject({ eventType: 'Screenshot', width: 48, height: 27 });
    const image = await imageBytes(sessionId, String(shot.imageId));
    expect(image.type).toBe('image/png');
    expect(image.bytes.equals(png)).toBe(true);
  });

  it('refuses the command when the app gave no provider, and checks its data', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    await d.connect();
    const sent = await call<Json>(base, 'POST', `/sessions/${sessionId}/realtime/commands`, {
      token: tenant.token,
      json: { name: 'screenshot', data: { format: 'png' } },
    });
    expect(sent.status).toBe(202);
    const settled = await commandSettles(sessionId, String(sent.body.commandId));
    expect(settled).toMatchObject({ status: 'failed', error: expect.stringMatching(/screenshotProvider/) });
    for (const data of [
      { format: 'gif' },
      { quality: 1 },
      'now',
      { names: ['a'], types: ['int'], values: ['1'] },
    ]) {
      const bad = await call<Json>(base, 'POST', `/sessions/${sessionId}/realtime/commands`, {
        token: tenant.token,
        json: { name: 'screenshot', data },
      });
      expect(bad.status, JSON.stringify(data)).toBe(400);
      expect(bad.body.code).toBe('validation_failed');
    }
  });

  it('takes screenshots on demand and on an interval; a canvas provider hands over toBlob', async () => {
    const jpeg = greyJpeg(64, 48);
    // A stand-in for a DOM canvas: the helper only calls toBlob.
    const canvas = {
      toBlob(callback: (blob: Blob | null) => void, type?: string) {
        expect(type).toBe('image/jpeg');
        callback(new Blob([new Uint8Array(jpeg)], { type: 'image/jpeg' }));
      },
    };
    const d = device({ screenshotProvider: screenshotFromCanvas(canvas), screenshotIntervalMs: 150 });
    await expect(d.takeScreenshot()).rejects.toMatchObject({ code: 'no_session' });
    const { sessionId } = await d.startSession();
    const stored = await d.takeScreenshot({ streamingSessionId: '0190a0b0-3333-7000-8000-000000000003' });
    expect(stored).toMatchObject({
      sessionId,
      width: 64,
      height: 48,
      streamingSessionId: '0190a0b0-3333-7000-8000-000000000003',
    });
    expect((await imageBytes(sessionId, stored.imageId)).bytes.equals(jpeg)).toBe(true);
    await waitFor(
      async () => (await eventsOf(sessionId, 'Screenshot')).length >= 3,
      5000,
      'interval screenshots',
    );
    await d.endSession();
    const count = (await eventsOf(sessionId, 'Screenshot')).length;
    await new Promise((r) => setTimeout(r, 400));
    expect((await eventsOf(sessionId, 'Screenshot')).length).toBe(count); // stopped with the session
    await expect(device().takeScreenshot()).rejects.toMatchObject({ code: 'no_screenshot_provider' });
  });

  it('ends the session only after the interval screenshot in flight is stored, and stores none after', async () => {
    const jpeg = greyJpeg(32, 32);
    let taking = 0;
    let release: () => void = () => {};
    const canvas = {
      toBlob(callback: (blob: Blob | null) => void) {
        taking++;
        // The first interval shot is slow (an app rendering a large frame): the session ends meanwhile.
        release = () => callback(new Blob([new Uint8Array(jpeg)], { type: 'image/jpeg' }));
      },
    };
    const d = device({ screenshotProvider: screenshotFromCanvas(canvas), screenshotIntervalMs: 50 });
    const { sessionId } = await d.startSession();
    await waitFor(async () => taking === 1, 5000, 'the first interval shot to start');
    const ending = d.endSession();
    setTimeout(() => release(), 300);
    await ending;
    const stored = (await eventsOf(sessionId, 'Screenshot')).length;
    expect(stored).toBe(1); // the shot in flight, uploaded before the session ended
    await new Promise((r) => setTimeout(r, 400));
    expect((await eventsOf(sessionId, 'Screenshot')).length).toBe(stored);
    expect(taking).toBe(1);
  });

  it('sends Health by itself, with no app code: memory and CPU from the platform', async () => {
    const d = device({ healthIntervalMs: 150 });
    const { sessionId } = await d.startSession();
    await waitFor(async () => (await eventsOf(sessionId, 'Health')).length >= 2, 5000, 'built-in Health');
    const [health] = await eventsOf(sessionId, 'Health');
    expect(health.memoryUsage).toBeGreaterThan(1);
    expect(health.cpuUsage).toBeGreaterThanOrEqual(0);
    expect(health.cpuUsage).toBeLessThanOrEqual(100);
    expect(health.fps).toBeUndefined(); // no frames reported
  });

  it('counts frames the app reports as fps, and lets the app add and override fields', async () => {
    const d = device({
      healthIntervalMs: 300,
      health: (fields) => ({ ...fields, batteryLevel: 77, memoryUsage: 123 }),
    });
    const { sessionId } = await d.startSession();
    const frames = setInterval(() => d.frame(), 10);
    try {
      await waitFor(async () => (await eventsOf(sessionId, 'Health')).length >= 2, 5000, 'Health with fps');
    } finally {
      clearInterval(frames);
    }
    const [, second] = await eventsOf(sessionId, 'Health');
    expect(second).toMatchObject({ batteryLevel: 77, memoryUsage: 123 });
    expect(second.fps).toBeGreaterThan(10);
    expect(second.fps).toBeLessThan(150);
  });

  it('is off with healthIntervalMs 0, and replaced by startHealthReporting', async () => {
    const off = device({ healthIntervalMs: 0 });
    const a = await off.startSession();
    const replaced = device({ healthIntervalMs: 100 });
    const b = await replaced.startSession();
    replaced.startHealthReporting(() => ({ fps: 72 }), 100);
    await waitFor(async () => (await eventsOf(b.sessionId, 'Health')).length >= 2, 5000, "the app's Health");
    await off.flush();
    expect(await eventsOf(a.sessionId, 'Health')).toEqual([]);
    for (const health of await eventsOf(b.sessionId, 'Health')) expect(health).toMatchObject({ fps: 72 });
    expect((await eventsOf(b.sessionId, 'Health')).every((h) => h.memoryUsage === undefined)).toBe(true);
  });
});
