import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endSession } from '../../src/modules/sessions/store.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * The command path remembers live sessions (`LiveSessions`) and the `sessions.live-check` job reads
 * the ones in use again in the background. A session that ended without this process hearing of it
 * (its `close` message lost in a cut of the bus) takes commands at most until that check.
 */
describe.each(backends)('live sessions remembered for commands (%s)', (backend) => {
  const clock = manualClock(Date.UTC(2026, 10, 29, 12, 0, 0));
  let server: TestServer;
  let tenant: TenantFixture;

  beforeAll(async () => {
    server = await startTestServer(backend, {}, { clock });
    tenant = await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => server?.close());

  async function session() {
    const token = await deviceToken(server.url, tenant.token, `p-${Math.random().toString(36).slice(2)}`);
    const res = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    return String(res.body.sessionId);
  }
  const command = (sessionId: string) =>
    call<{ code?: string }>(server.url, 'POST', `/sessions/${sessionId}/realtime/commands`, {
      token: tenant.token,
      json: { name: 'text', data: 'x' },
    });

  it('a session ended behind its back is refused after the background check, in one read for all', async () => {
    const live = server.services.liveSessions;
    const [kept, ended, unused] = [await session(), await session(), await session()];
    for (const id of [kept, ended, unused]) expect((await command(id)).status).toBe(202);
    // Ended in the store alone, as by another process whose `close` message this one missed.
    await endSession(server.services.storage.db, ended, clock.now(), 'client');
    clock.advance(5_000);
    // Still remembered (the bound is maxAgeMs, 10 s): what a lost message costs until the check.
    for (const id of [kept, ended]) expect((await command(id)).status).toBe(202);
    // The check reads the two in use, and forgets the unused one unread.
    expect(await live.check()).toBe(2);
    const refused = await command(ended);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('session_ended');
    expect((await command(kept)).status).toBe(202);
    expect((await command(unused)).status).toBe(202);
  });
});
