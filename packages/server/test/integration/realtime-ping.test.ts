import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

const INTERVAL_MS = 300;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// Dead peers: the server pings a socket only when it has heard nothing from it for a heartbeat
// interval, and drops one that stays silent (no frame, no pong) for the next interval too.
describe.each(backends)('server pings (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;

  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_HEARTBEAT_INTERVAL_MS: String(INTERVAL_MS) });
    tenant = await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => server?.close());

  /** A device socket that counts the pings it gets; `autoPong: false` never answers them. */
  async function device(autoPong: boolean) {
    const token = await deviceToken(server.url, tenant.token, `p-${Math.random().toString(36).slice(2)}`);
    const res = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    const socket = await TestSocket.open(server.url, String(res.body.sessionId), token, false, { autoPong });
    await socket.ofType('welcome');
    const pings = { count: 0 };
    socket.ws.on('ping', () => pings.count++);
    return { socket, pings };
  }

  it('drops a silent socket that does not answer pings, after one ping', async () => {
    const { socket, pings } = await device(false);
    const closed = await Promise.race([socket.waitClosed(), sleep(INTERVAL_MS * 10).then(() => null)]);
    expect(closed).not.toBeNull();
    expect(closed?.code).toBe(1006); // terminated: no close frame
    expect(pings.count).toBe(1);
  });

  it('keeps a silent socket that answers pings, pinging it every other round', async () => {
    const { socket, pings } = await device(true);
    await sleep(INTERVAL_MS * 8);
    expect(socket.closed).toBeNull();
    // A pong counts as hearing from it: pinged, heard, left alone for a round, pinged again (pinged
    // every round, it would have had about eight).
    expect(pings.count).toBeLessThanOrEqual(5);
    await expect.poll(() => pings.count, { timeout: INTERVAL_MS * 20 }).toBeGreaterThanOrEqual(2);
    await socket.close();
  });

  it('never pings a socket that heartbeats, and keeps it though it would not answer', async () => {
    const { socket, pings } = await device(false);
    const beat = setInterval(() => socket.send({ type: 'heartbeat' }), INTERVAL_MS / 5);
    try {
      await sleep(INTERVAL_MS * 8);
    } finally {
      clearInterval(beat);
    }
    expect(socket.closed).toBeNull();
    expect(pings.count).toBe(0);
    // Once it falls silent it is pinged, then dropped.
    const closed = await Promise.race([socket.waitClosed(), sleep(INTERVAL_MS * 10).then(() => null)]);
    expect(closed?.code).toBe(1006);
    expect(pings.count).toBe(1);
  });
});
