import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { waitFor } from '../helpers/receiver.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * Load shedding (CONTRACT §16): the server shares this test's event loop, so the test makes the
 * loop lag itself — busy-waits of 250 ms with one turn of the loop between them, the turn in which
 * the server reads and answers requests — and checks what a client sees while it lasts and after.
 */

const BLOCK_MS = 250;

/** Keeps the event loop lagging until the returned function is called (and resolves once it stopped). */
function lagTheLoop(): () => Promise<void> {
  let on = true;
  const running = (async () => {
    while (on) {
      const end = performance.now() + BLOCK_MS;
      while (performance.now() < end) {
        // busy: nothing else runs on this thread meanwhile
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  return async () => {
    on = false;
    await running;
  };
}

describe.each(backends)('load shedding (%s)', (backend) => {
  let server: TestServer;
  let t: TenantFixture;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_MAX_EVENT_LOOP_DELAY_MS: '100' });
    // Starting (this file's imports, the store's migrations) may hold the loop past 100 ms: the server
    // is ready once a sample of the delay has seen a calm loop.
    await waitFor(async () => (await call(server.url, 'GET', '/readyz')).status === 200, 10_000, 'ready');
    t = await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => server?.close());

  it('while the loop lags: API requests and upgrades get 503 overloaded with Retry-After, /readyz 503, /healthz 200; after it, all 200 again', async () => {
    const base = server.url;
    // A device connected before the lag: open sockets are not shed.
    const token = await deviceToken(base, t.token, 'player-1');
    const created = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(created.status).toBe(201);
    const sessionId = String(created.body.sessionId);
    const socket = await TestSocket.open(base, sessionId, token);
    await socket.ofType('welcome');
    expect((await call(base, 'GET', '/webhooks', { token: t.token })).status).toBe(200);

    const stop = lagTheLoop();
    try {
      await waitFor(async () => (await call(base, 'GET', '/readyz')).status === 503, 10_000, 'readyz 503');
      const ready = await call(base, 'GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ status: 503, code: 'overloaded' });

      const api = await call(base, 'GET', '/webhooks', { token: t.token });
      expect(api.status).toBe(503);
      expect(api.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(api.headers.get('retry-after')).toBe('2');
      expect(api.body).toMatchObject({ type: 'about:blank', status: 503, code: 'overloaded' });
      expect(String(api.body.detail)).toMatch(/overloaded/);
      // Shed before authentication: a request without a token is refused the same way.
      expect((await call(base, 'POST', '/sessions/x/events', { json: {} })).body).toMatchObject({
        code: 'overloaded',
      });
      await expect(TestSocket.open(base, sessionId, token)).rejects.toThrow('HTTP 503');

      expect((await call(base, 'GET', '/healthz')).status).toBe(200);
      const metrics = await call(base, 'GET', '/metrics');
      expect(metrics.status).toBe(200);
      const shed = Number(/^liveline_overloaded_total (\d+)$/m.exec(metrics.text)?.[1]);
      expect(shed).toBeGreaterThanOrEqual(3);
      const delay = Number(/^liveline_event_loop_delay_seconds (\S+)$/m.exec(metrics.text)?.[1]);
      expect(delay).toBeGreaterThan(0.1);
    } finally {
      await stop();
    }

    await waitFor(async () => (await call(base, 'GET', '/readyz')).status === 200, 10_000, 'readyz 200');
    expect((await call(base, 'GET', '/webhooks', { token: t.token })).status).toBe(200);
    // The socket opened before the lag is still open, and a new one is accepted again.
    expect(socket.closed).toBeNull();
    socket.ws.close();
    const again = await TestSocket.open(base, sessionId, token);
    await again.ofType('welcome');
    again.ws.close();
  });
});

describe('load shedding off (LIVELINE_MAX_EVENT_LOOP_DELAY_MS=0)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite', { LIVELINE_MAX_EVENT_LOOP_DELAY_MS: '0' });
  });
  afterAll(async () => server?.close());

  it('the same lag sheds nothing', async () => {
    const t = await createTenant(server.url, server.adminToken);
    const stop = lagTheLoop();
    try {
      // Long enough for two samples of the delay (one a second) to have seen the lag.
      const until = Date.now() + 2500;
      while (Date.now() < until) {
        expect((await call(server.url, 'GET', '/webhooks', { token: t.token })).status).toBe(200);
        expect((await call(server.url, 'GET', '/readyz')).status).toBe(200);
      }
      const metrics = await call(server.url, 'GET', '/metrics');
      expect(Number(/^liveline_event_loop_delay_seconds (\S+)$/m.exec(metrics.text)?.[1])).toBeGreaterThan(
        0.1,
      );
      expect(metrics.text).toMatch(/^liveline_overloaded_total 0$/m);
    } finally {
      await stop();
    }
  });
});
