import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * What the server notes in memory and writes in batches must still reach the store: a device's
 * contact over its socket (lastSeenAt), and the delivery time of a command nobody answered.
 */
describe.each(backends)('writes made in batches (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  beforeAll(async () => {
    server = await startTestServer(backend);
    tenant = await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => server?.close());

  async function connected() {
    const token = await deviceToken(server.url, tenant.token, `p-${randomUUID()}`);
    const created = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    const sessionId = String(created.body.sessionId);
    const socket = await TestSocket.open(server.url, sessionId, token);
    await socket.ofType('welcome');
    return { sessionId, socket };
  }

  const session = async (id: string) =>
    (await call(server.url, 'GET', `/sessions/${id}`, { token: tenant.token })).body;

  it("moves lastSeenAt with the device's contact over the socket, within about a second", async () => {
    const { sessionId, socket } = await connected();
    const before = Number((await session(sessionId)).lastSeenAt);
    await new Promise((r) => setTimeout(r, 1100));
    socket.send({ type: 'heartbeat' });
    const deadline = Date.now() + 5000;
    let seen = before;
    while (seen <= before && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      seen = Number((await session(sessionId)).lastSeenAt);
    }
    expect(seen).toBeGreaterThan(before);
    await socket.close();
  });

  it('writes the delivery time of a command the device has not answered', async () => {
    const { sessionId, socket } = await connected();
    const sent = await call(server.url, 'POST', `/sessions/${sessionId}/realtime/commands`, {
      token: tenant.token,
      json: { name: 'text', data: 'no answer' },
    });
    expect(sent.body.status).toBe('delivered');
    const commandId = String(sent.body.commandId);
    await socket.ofType('command');
    // Read from the store itself: this process also shows it delivered before the write.
    const stored = async () =>
      server.services.storage.db
        .selectFrom('commands')
        .select(['status', 'delivered_at'])
        .where('command_id', '=', commandId)
        .executeTakeFirstOrThrow();
    const deadline = Date.now() + 5000;
    let row = await stored();
    while (row.status === 'queued' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      row = await stored();
    }
    expect(row.status).toBe('delivered');
    expect(Number(row.delivered_at)).toBe(Number(sent.body.deliveredAt));
    await socket.close();
  });
});

/**
 * An ingestion group's writes that nobody waits for (`Storage.pipeline`: the contact, the webhook
 * fan-out rows) still decide its fate: when one fails, the group's transaction writes nothing, its
 * requests are refused, and the next group is written as usual.
 */
describe.each(backends)('a pipelined write that fails in an ingestion group (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  let failing = false;
  beforeAll(async () => {
    server = await startTestServer(backend);
    tenant = await createTenant(server.url, server.adminToken);
    const { storage, events } = server.services;
    events.onStored(async (trx) => {
      if (failing)
        await storage.pipeline(trx, { sql: 'insert into no_such_table values (1)', parameters: [] });
    });
  });
  afterAll(async () => server?.close());

  it('writes nothing of the group, and the next group goes through', async () => {
    const token = await deviceToken(server.url, tenant.token, `p-${randomUUID()}`);
    const created = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    const sessionId = String(created.body.sessionId);
    const post = (id: string) =>
      call(server.url, 'POST', `/sessions/${sessionId}/events`, {
        token,
        json: { events: [{ id, eventType: 'Custom', timestamp: Date.now() }] },
      });
    failing = true;
    const refused = await post('lost');
    failing = false;
    expect(refused.status).toBeGreaterThanOrEqual(500);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    const kept = await post('kept');
    expect(kept.status).toBe(200);
    expect(kept.body).toEqual({ accepted: 1, duplicates: 0 });
    const view = await call<{ events: { id: string }[] }>(server.url, 'GET', `/sessions/${sessionId}`, {
      token: tenant.token,
    });
    expect(view.body.events.map((e) => e.id)).toEqual(['kept']);
  });
});
