import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken } from '../helpers/api.ts';
import { type ServerProcess, startProcess } from '../helpers/process.ts';
import { startReceiver, waitFor } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, backends, freshStore } from '../helpers/server.ts';

/**
 * An alert is written with the event that triggers it (CONTRACT §13: in the event's transaction,
 * at-least-once like every webhook): the server is SIGKILLed right after answering the ingestion
 * that triggers, while the receiver is down, and after a restart on the same store the
 * `alert.triggered` delivery is there and arrives.
 */
describe.each(backends)('alert.triggered survives a SIGKILL right after the ingest (%s)', (backend) => {
  const stores: ReturnType<typeof freshStore>[] = [];
  const processes: ServerProcess[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const p of processes.splice(0)) p.child.kill('SIGKILL');
    for (const close of closers.splice(0)) await close();
    for (const s of stores.splice(0)) await s.destroy();
  });

  it('the triggering event and its alert.triggered are durable together', async () => {
    const store = freshStore(backend);
    stores.push(store);
    const receiver = await startReceiver();
    closers.push(() => receiver.stop());
    const env = {
      ...store.env,
      LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
      // The default durability (synchronous=FULL on SQLite), not the tests' faster setting.
      LIVELINE_SQLITE_SYNCHRONOUS: 'FULL',
      LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
      LIVELINE_WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1,1,1,1,1,1',
      // A delivery the killed process had claimed (its attempt on the receiver that was down) is
      // free again after the lease, not after the default minute (a Node 22 CI run waited for it).
      LIVELINE_WEBHOOK_TIMEOUT_MS: '1000',
      LIVELINE_WEBHOOK_LEASE_S: '2',
      LIVELINE_WEBHOOK_POLL_MS: '100',
    };
    let server = await startProcess(env, { timeoutMs: 60_000 });
    processes.push(server);
    const tenant = await createTenant(server.url, ADMIN_TOKEN);
    const hook = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: receiver.url, types: ['alert.triggered'] },
    });
    expect(hook.status).toBe(201);
    const rule = await call(server.url, 'POST', '/alerts', {
      token: tenant.token,
      json: { name: 'Low battery', eventType: 'Health', field: 'batteryLevel', op: 'lt', value: 15 },
    });
    expect(rule.status).toBe(201);
    const token = await deviceToken(server.url, tenant.token, 'crash-player');
    const session = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    const sessionId = String(session.body.sessionId);

    // Nothing can be delivered before the kill: the receiver is down.
    await receiver.stop();
    const event = { id: 'low-1', eventType: 'Health', timestamp: Date.now(), batteryLevel: 7 };
    const ingest = await call(server.url, 'POST', `/sessions/${sessionId}/Events`, {
      token,
      json: { events: [event] },
    });
    expect(ingest.status).toBe(200);
    server.child.kill('SIGKILL');
    await server.exited;

    await receiver.restart();
    server = await startProcess(env, { timeoutMs: 60_000 });
    processes.push(server);
    await waitFor(() => receiver.received.length >= 1, 20_000, 'alert.triggered after the restart');
    const signer = new Webhook(String(hook.body.secret));
    const message = signer.verify(receiver.received[0].body, receiver.received[0].headers) as {
      type: string;
      data: Record<string, unknown>;
    };
    expect(message).toMatchObject({
      type: 'alert.triggered',
      data: {
        alertId: rule.body.alertId,
        sessionId,
        playerId: 'crash-player',
        event: { id: 'low-1', batteryLevel: 7 },
      },
    });
    const incidents = await call(server.url, 'GET', `/alerts/${rule.body.alertId}/incidents`, {
      token: tenant.token,
    });
    expect(incidents.body).toMatchObject({ totalCount: 1, incidents: [{ status: 'open', sessionId }] });
  });
});
