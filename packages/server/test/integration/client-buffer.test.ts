/**
 * The device SDK's offline buffer kept in a directory (`fileEventStorage`) survives an app restart:
 * events buffered while the server cannot be reached (one batch stored but its answer lost) are sent
 * by the next run, a new device on the same directory, and the real server stores each exactly once.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileEventStorage } from '../../../client/src/file-storage.ts';
import { LivelineDevice, type LivelineDeviceOptions } from '../../../client/src/index.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(backends)('the SDK buffer across a restart, on the real server (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  let token: string;
  let directory: string;

  beforeAll(async () => {
    server = await startTestServer(backend);
    tenant = await createTenant(server.url, server.adminToken);
    token = await deviceToken(server.url, tenant.token, 'restart-player');
    directory = await mkdtemp(join(tmpdir(), 'liveline-sdk-buffer-'));
  });
  afterAll(async () => {
    await server?.close();
    await rm(directory, { recursive: true, force: true });
  });

  const device = (options: Partial<LivelineDeviceOptions>) => {
    let now = Date.now() - 60_000;
    return new LivelineDevice({
      baseUrl: server.url,
      token,
      clock: { now: () => now++ },
      batchSize: 3,
      flushIntervalMs: 60_000,
      random: () => 1,
      retry: { initialDelayMs: 5, maxDelayMs: 20 },
      storage: fileEventStorage({ directory, writeIntervalMs: 20 }),
      ...options,
    });
  };

  it('sends what the previous run left exactly once, to the session it was tracked in', async () => {
    // The network: the first batch reaches the server but its answer is lost, then nothing gets through.
    let network: 'loses-answer' | 'down' = 'loses-answer';
    const flaky: typeof fetch = async (input, init) => {
      if (!String(input).endsWith('/events')) return fetch(input, init);
      if (network === 'down') throw new TypeError('fetch failed');
      const answer = await fetch(input, init);
      expect(answer.status).toBe(200);
      network = 'down';
      throw new TypeError('fetch failed');
    };
    const first = device({ fetch: flaky, eventsOverSocket: false });
    const { sessionId } = await first.startSession();
    const tracked = ['1', '2', '3', '4', '5'].map((n) =>
      first.track({ eventType: 'Health', batteryLevel: 90 - Number(n), fps: 72 }),
    );
    await waitFor(() => first.stats().retries >= 3);
    const file = join(directory, 'events.jsonl');
    await waitFor(async () => (await readFile(file, 'utf8').catch(() => '')).includes(tracked[4].id));
    expect(first.stats()).toMatchObject({ sent: 0, buffered: 5 });
    await first.close(); // the app is gone; its buffer is in the directory

    const second = device({});
    await second.flush(); // no session of its own: the leftovers go to the session they belong to
    expect(second.stats()).toMatchObject({ sent: 5, duplicates: 3, buffered: 0 });
    await second.close();

    const res = await call<{ events: { id: string; batteryLevel?: number }[] }>(
      server.url,
      'GET',
      `/sessions/${sessionId}`,
      { token: tenant.token },
    );
    expect(res.status).toBe(200);
    const ids = res.body.events.map((event) => event.id);
    expect(ids).toEqual(tracked.map((event) => event.id));
    expect(res.body.events.map((event) => event.batteryLevel)).toEqual([89, 88, 87, 86, 85]);
  });
});
