import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * CONTRACT §5, §14: a `Screenshot` event names its image (`imageUrl` or `imageId`). One without either
 * is refused as a whole batch, over HTTP and over the realtime channel, with an error that names both
 * fields; nothing of the batch is stored.
 */
describe.each(backends)('Screenshot events need imageUrl or imageId (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  let device: string;

  beforeAll(async () => {
    server = await startTestServer(backend);
    tenant = await createTenant(server.url, server.adminToken);
    device = await deviceToken(server.url, tenant.token, 'screenshot-player');
  });
  afterAll(async () => server?.close());

  const newSession = async () =>
    String(
      (await call(server.url, 'POST', '/client/v1/sessions', { token: device, json: {} })).body.sessionId,
    );
  const storedIds = async (sessionId: string) =>
    (
      await server.services.storage.db
        .selectFrom('events')
        .select('event_id')
        .where('session_id', '=', sessionId)
        .execute()
    ).map((r) => r.event_id);

  it('answers 400 naming both fields over HTTP, and stores nothing of the batch', async () => {
    const sessionId = await newSession();
    const t = Date.now();
    const res = await call(server.url, 'POST', `/sessions/${sessionId}/events`, {
      token: device,
      json: {
        events: [
          { id: 'ok', eventType: 'Custom', timestamp: t },
          { id: 'shot', eventType: 'Screenshot', timestamp: t, width: 640, height: 480 },
        ],
      },
    });
    expect(res.status, res.text).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({
      code: 'validation_failed',
      errors: [{ path: 'events[1]', message: 'must have `imageUrl` or `imageId`' }],
    });
    expect(String(res.body.detail)).toContain('imageUrl');
    expect(await storedIds(sessionId)).toEqual([]);

    // Either field, or both, is enough; the tenant reads them back as sent.
    const ok = await call(server.url, 'POST', `/sessions/${sessionId}/events`, {
      token: device,
      json: {
        events: [
          { id: 'url', eventType: 'Screenshot', timestamp: t, imageUrl: 'https://cdn.example.com/a.png' },
          { id: 'img', eventType: 'Screenshot', timestamp: t, imageId: 'img-1', width: 1, height: 1 },
          {
            id: 'both',
            eventType: 'Screenshot',
            timestamp: t,
            imageUrl: 'https://x.example/b',
            imageId: 'i2',
          },
        ],
      },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual({ accepted: 3, duplicates: 0 });
    expect((await storedIds(sessionId)).sort()).toEqual(['both', 'img', 'url']);
  });

  it('answers the same refusal over the realtime channel', async () => {
    const sessionId = await newSession();
    const socket = await TestSocket.open(server.url, sessionId, device);
    try {
      await socket.next((m) => m.type === 'welcome');
      socket.ws.send(
        JSON.stringify({
          type: 'events',
          requestId: 'r1',
          events: [{ id: 'shot', eventType: 'Screenshot', timestamp: Date.now() }],
        }),
      );
      const answer = await socket.next((m) => m.type === 'error' || m.type === 'events.ack');
      expect(answer).toMatchObject({
        type: 'error',
        code: 'validation_failed',
        errors: [{ path: 'events[0]', message: 'must have `imageUrl` or `imageId`' }],
      });
      expect(await storedIds(sessionId)).toEqual([]);
    } finally {
      socket.ws.close();
    }
  });
});
