import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken } from '../helpers/api.ts';
import { type ServerProcess, startProcess } from '../helpers/process.ts';
import { type Receiver, startReceiver, waitFor } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, backends, freshStore } from '../helpers/server.ts';

/**
 * At-least-once across a crash: the server is SIGKILLed while deliveries are in flight; after a
 * restart on the same store every event reaches the receiver (claims of the dead process expire
 * with their lease). Duplicates are allowed, and counted.
 */
describe.each(backends)('webhook delivery across a SIGKILL (%s)', (backend) => {
  const stores: ReturnType<typeof freshStore>[] = [];
  const processes: ServerProcess[] = [];
  const receivers: Receiver[] = [];
  afterEach(async () => {
    for (const p of processes.splice(0)) p.child.kill('SIGKILL');
    for (const r of receivers.splice(0)) await r.close();
    for (const s of stores.splice(0)) await s.destroy();
  });

  it('loses no delivery when the server dies mid-dispatch', async () => {
    const store = freshStore(backend);
    stores.push(store);
    const env = {
      ...store.env,
      LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
      LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
      LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
      LIVELINE_WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1,1,1,1,1,1',
      LIVELINE_WEBHOOK_TIMEOUT_MS: '1000',
      LIVELINE_WEBHOOK_LEASE_S: '2',
      LIVELINE_WEBHOOK_POLL_MS: '100',
    };
    // A slow receiver keeps deliveries in flight.
    const receiver = await startReceiver({ delayMs: 50 });
    receivers.push(receiver);
    const first = await startProcess(env);
    processes.push(first);
    const tenant = await createTenant(first.url, ADMIN_TOKEN);
    const hook = await call(first.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: receiver.url },
    });
    expect(hook.status).toBe(201);
    const secret = String(hook.body.secret);
    const token = await deviceToken(first.url, tenant.token, 'kill-test');
    const session = await call(first.url, 'POST', '/client/v1/sessions', { token, json: {} });
    const sessionId = String(session.body.sessionId);

    const ids: string[] = [];
    for (let b = 0; b < 6; b++) {
      const events = Array.from({ length: 100 }, (_, i) => ({
        id: `k${b}-${i}`,
        eventType: 'Custom',
        timestamp: Date.now(),
        custom01: 'x',
      }));
      const res = await call(first.url, 'POST', `/sessions/${sessionId}/Events`, { token, json: { events } });
      expect(res.status).toBe(200);
      ids.push(...events.map((e) => e.id));
    }
    await waitFor(() => receiver.received.length >= 60, 20_000, 'dispatch to be under way');
    first.child.kill('SIGKILL');
    await first.exited;
    const atKill = new Set(receiver.received.map((r) => r.id)).size;
    expect(atKill).toBeLessThan(ids.length);

    const second = await startProcess(env);
    processes.push(second);
    const wh = new Webhook(secret);
    const delivered = () =>
      new Set(
        receiver.received.map((r) => (wh.verify(r.body, r.headers) as { data: { id: string } }).data.id),
      );
    await waitFor(() => delivered().size >= ids.length, 60_000, 'every event after the restart');
    const got = delivered();
    expect(ids.filter((id) => !got.has(id))).toEqual([]);
    const duplicates = receiver.received.length - new Set(receiver.received.map((r) => r.id)).size;
    // Duplicates are allowed (at-least-once): those in flight at the kill may arrive twice.
    console.log(
      `[${backend}] webhooks SIGKILL: ${ids.length} events, ${atKill} delivered before the kill, ${receiver.received.length} requests, ${duplicates} duplicates`,
    );
    expect(duplicates).toBeLessThanOrEqual(64);
    // A duplicate carries the webhook-id of its first send, so receivers can drop it.
    const byId = new Map<string, string>();
    for (const r of receiver.received) {
      const body = byId.get(r.id);
      if (body !== undefined) expect(r.body).toBe(body);
      byId.set(r.id, r.body);
    }
  }, 120_000);
});
