import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken } from '../helpers/api.ts';
import { type ServerProcess, startProcess } from '../helpers/process.ts';
import { ADMIN_TOKEN, backends, freshStore } from '../helpers/server.ts';

/**
 * Accepted means durable (CONTRACT §5): the server process is SIGKILLed while ingestion requests
 * are in flight; every batch that got a 200 must be there after a restart on the same store, and
 * resending every batch stores no duplicates.
 */
describe.each(backends)('durability of acknowledged events (%s)', (backend) => {
  const stores: ReturnType<typeof freshStore>[] = [];
  const processes: ServerProcess[] = [];
  afterEach(async () => {
    for (const p of processes.splice(0)) p.child.kill('SIGKILL');
    for (const s of stores.splice(0)) await s.destroy();
  });

  it('every event acknowledged before a SIGKILL is there after restart, once', async () => {
    const store = freshStore(backend);
    stores.push(store);
    // The default durability setting (synchronous=FULL on SQLite), not the tests' faster one.
    const env = {
      ...store.env,
      LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
      LIVELINE_SQLITE_SYNCHRONOUS: 'FULL',
      LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
    };
    const first = await startProcess(env);
    processes.push(first);
    const tenant = await createTenant(first.url, ADMIN_TOKEN);
    const token = await deviceToken(first.url, tenant.token, 'crash-test');
    const session = await call(first.url, 'POST', '/client/v1/sessions', { token, json: {} });
    const sessionId = String(session.body.sessionId);

    const batches = Array.from({ length: 400 }, (_, b) => ({
      events: Array.from({ length: 50 }, (_, i) => ({
        id: `b${b}-e${i}`,
        eventType: 'Custom',
        timestamp: Date.now(),
        custom01: `batch ${b}`,
      })),
    }));
    const acknowledged: number[] = [];
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const post = (b: number) =>
      new Promise<void>((resolve) => {
        const body = JSON.stringify(batches[b]);
        const req = http.request(
          `${first.url}/sessions/${sessionId}/Events`,
          {
            method: 'POST',
            agent,
            headers: {
              authorization: `Bearer ${token}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            res.resume();
            res.on('end', () => {
              if (res.statusCode === 200) acknowledged.push(b);
              resolve();
            });
            res.on('error', () => resolve());
          },
        );
        req.on('error', () => resolve());
        req.end(body);
      });
    // Eight devices' worth of traffic; the kill lands while requests are in flight.
    let next = 0;
    let killed = false;
    const worker = async () => {
      while (next < batches.length && !killed) {
        const b = next++;
        await post(b);
        if (acknowledged.length >= 100 && !killed) {
          killed = true;
          first.child.kill('SIGKILL');
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    agent.destroy();
    first.child.kill('SIGKILL');
    await first.exited;
    expect(acknowledged.length).toBeGreaterThanOrEqual(100);
    expect(acknowledged.length).toBeLessThan(batches.length);

    const second = await startProcess(env);
    processes.push(second);
    const stored = await call<{ events: { id: string }[] }>(second.url, 'GET', `/sessions/${sessionId}`, {
      token: (await createTenant(second.url, ADMIN_TOKEN)).token,
    });
    // Another tenant cannot see it; the owner's token (still valid: keys live in the store) can.
    expect(stored.status).toBe(404);
    const owner = await call<{ events: { id: string }[] }>(second.url, 'GET', `/sessions/${sessionId}`, {
      token: tenant.token,
    });
    expect(owner.status).toBe(200);
    const ids = new Set(owner.body.events.map((e) => e.id));
    const missing = acknowledged
      .flatMap((b) => batches[b].events.map((e) => e.id))
      .filter((id) => !ids.has(id));
    expect(missing).toEqual([]);

    // The device resends everything; acknowledged batches are all duplicates, nothing is stored twice.
    let duplicates = 0;
    for (const [b, batch] of batches.entries()) {
      const res = await call(second.url, 'POST', `/sessions/${sessionId}/Events`, { token, json: batch });
      expect(res.status).toBe(200);
      duplicates += Number(res.body.duplicates);
      if (acknowledged.includes(b)) expect(res.body).toEqual({ accepted: 0, duplicates: 50 });
    }
    expect(duplicates).toBeGreaterThanOrEqual(acknowledged.length * 50);
    const after = await call<{ events: { id: string }[] }>(second.url, 'GET', `/sessions/${sessionId}`, {
      token: tenant.token,
    });
    expect(after.body.events).toHaveLength(batches.length * 50);
    expect(new Set(after.body.events.map((e) => e.id)).size).toBe(batches.length * 50);
  }, 120_000);
});
