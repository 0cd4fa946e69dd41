import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { startServer } from '../../src/server.ts';
import { accessToken, call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { cli } from '../helpers/process.ts';
import { ADMIN_TOKEN, backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * Revocation (CONTRACT §15): device tokens carry the client that minted them and die with it; a
 * player's tokens revoked; sockets of revoked tokens closed (4003) and of expired ones (4401); client
 * secret rotation with a 24 h overlap; signing-key rotation picked up by another process on the same
 * store. The several-process cases over Redis are in cluster.test.ts.
 */

const kidOf = (jwt: string) =>
  (JSON.parse(Buffer.from(jwt.split('.')[0], 'base64url').toString()) as { kid: string }).kid;
const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()) as Record<string, unknown>;

const START = Date.UTC(2026, 10, 21, 12, 0, 0);

describe.each(backends)('revocation (%s)', (backend) => {
  const clock = manualClock(START);
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_RATE_LIMIT_TENANT_RPS: '0' }, { clock });
    base = server.url;
  });
  afterAll(async () => server?.close());

  /** A live session of `playerId` with a token minted by `tenantToken`, and its open socket. */
  async function connected(tenantToken: string, playerId: string) {
    const token = await deviceToken(base, tenantToken, playerId);
    const created = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(created.status).toBe(201);
    const sessionId = String(created.body.sessionId);
    const socket = await TestSocket.open(base, sessionId, token);
    await socket.ofType('welcome');
    return { token, sessionId, socket };
  }

  const startSession = (token: string) => call(base, 'POST', '/client/v1/sessions', { token, json: {} });

  /** A second client of the tenant, with every scope, and its access token. */
  async function secondClient(t: TenantFixture) {
    const created = await call(base, 'POST', `/admin/v1/tenants/${t.tenantId}/clients`, {
      token: server.adminToken,
      json: { name: 'second' },
    });
    expect(created.status).toBe(201);
    const clientId = String(created.body.clientId);
    return { clientId, token: await accessToken(base, clientId, String(created.body.clientSecret)) };
  }

  it("a deleted client's device tokens fail at once (HTTP and new sockets) and their sockets close with 4003", async () => {
    const t = await createTenant(base, server.adminToken);
    const other = await secondClient(t);
    const doomed = await connected(t.token, 'p-doomed');
    const kept = await connected(other.token, 'p-kept');
    expect(claimsOf(doomed.token).client_id).toBe(t.clientId);
    expect((await startSession(doomed.token)).status).toBe(201);

    const deleted = await call(base, 'DELETE', `/admin/v1/tenants/${t.tenantId}/clients/${t.clientId}`, {
      token: server.adminToken,
    });
    expect(deleted.status).toBe(204);

    const refused = await startSession(doomed.token);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({
      code: 'unauthorized',
      detail: 'This device token has been revoked.',
    });
    const events = await call(base, 'POST', `/sessions/${doomed.sessionId}/Events`, {
      token: doomed.token,
      json: { events: [{ id: 'e1', eventType: 'Custom', timestamp: START, custom01: 'x' }] },
    });
    expect(events.status).toBe(401);
    expect(await doomed.socket.waitClosed()).toMatchObject({ code: 4003 });
    await expect(TestSocket.open(base, doomed.sessionId, doomed.token)).rejects.toThrow('HTTP 401');
    // Tokens minted by another client of the tenant are not touched.
    expect((await startSession(kept.token)).status).toBe(201);
    expect(kept.socket.closed).toBeNull();
    await kept.socket.close();
  });

  it("revokes a player's tokens issued before now: 401, their sockets close with 4003, newer tokens work", async () => {
    const t = await createTenant(base, server.adminToken);
    const b = await createTenant(base, server.adminToken, { name: 'B' });
    const old = await connected(t.token, 'p-lost-headset');
    const bystander = await connected(t.token, 'p-bystander');
    // Tenant B's player of the same id is another player.
    const bSame = await connected(b.token, 'p-lost-headset');

    // The server's clock stands still here: tokens issued in the very millisecond of the revocation stay.
    clock.advance(1);
    const revokedAt = clock.now();
    const revoked = await call(base, 'POST', '/client-tokens/revoke', {
      token: t.token,
      json: { playerId: 'p-lost-headset' },
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ playerId: 'p-lost-headset', revokedAt });

    expect((await startSession(old.token)).status).toBe(401);
    expect(await old.socket.waitClosed()).toMatchObject({ code: 4003 });
    await expect(TestSocket.open(base, old.sessionId, old.token)).rejects.toThrow('HTTP 401');
    // Issued a millisecond after the revocation (iat has milliseconds), in the same second.
    clock.advance(1);
    const fresh = await deviceToken(base, t.token, 'p-lost-headset');
    expect((await startSession(fresh)).status).toBe(201);
    const again = await TestSocket.open(base, old.sessionId, fresh);
    await again.ofType('welcome');
    // Nobody else is touched.
    expect((await startSession(bystander.token)).status).toBe(201);
    expect((await startSession(bSame.token)).status).toBe(201);
    expect(bystander.socket.closed).toBeNull();
    expect(bSame.socket.closed).toBeNull();
    for (const s of [again, bystander.socket, bSame.socket]) await s.close();

    // Who may revoke, and what.
    const asDevice = await call(base, 'POST', '/client-tokens/revoke', {
      token: fresh,
      json: { playerId: 'p-bystander' },
    });
    expect(asDevice.status).toBe(403);
    const limited = await accessToken(base, t.clientId, t.clientSecret, 'sessions:read');
    const noScope = await call(base, 'POST', '/client-tokens/revoke', {
      token: limited,
      json: { playerId: 'p-bystander' },
    });
    expect(noScope.status).toBe(403);
    const bad = await call(base, 'POST', '/client-tokens/revoke', { token: t.token, json: { player: 'x' } });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('validation_failed');
    expect((await startSession(bystander.token)).status).toBe(201);

    // It is stored: a restart would keep refusing the old token.
    const rows = await server.services.storage.db
      .selectFrom('player_token_revocations')
      .selectAll()
      .where('tenant_id', '=', t.tenantId)
      .execute();
    expect(rows).toEqual([{ tenant_id: t.tenantId, player_id: 'p-lost-headset', not_before: revokedAt }]);
  });

  it('a revocation learnt without its bus message (as the refresh job learns one) closes the socket at the next token check', async () => {
    const t = await createTenant(base, server.adminToken);
    const quiet = await connected(t.token, 'p-quiet');
    const other = await connected(t.token, 'p-other');
    // A token check or two with nothing new learnt (those look at expiry only), then a revocation that
    // reaches this process the way the auth.refresh job would bring it: noted, no bus message.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    clock.advance(1);
    await server.services.auth.changedElsewhere({
      kind: 'player',
      tenantId: t.tenantId,
      playerId: 'p-quiet',
      notBefore: clock.now(),
    });
    const closed = await Promise.race([
      quiet.socket.waitClosed(),
      new Promise((resolve) => setTimeout(() => resolve(null), 5000)),
    ]);
    expect(closed).toMatchObject({ code: 4003 });
    expect(other.socket.closed).toBeNull();
    await other.socket.close();
  });

  it('closes a socket when its token expires (4401), and the token is refused from then on', async () => {
    const t = await createTenant(base, server.adminToken);
    const minted = await call(base, 'POST', '/client-tokens', {
      token: t.token,
      json: { playerId: 'p-short', ttlSeconds: 60 },
    });
    expect(minted.status).toBe(200);
    const token = String(minted.body.token);
    const created = await startSession(token);
    const socket = await TestSocket.open(base, String(created.body.sessionId), token);
    await socket.ofType('welcome');
    clock.advance(59_000);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(socket.closed).toBeNull();
    clock.advance(2_000);
    const closed = await Promise.race([
      socket.waitClosed(),
      new Promise((resolve) => setTimeout(() => resolve('still open'), 3000)),
    ]);
    expect(closed).toMatchObject({ code: 4401, reason: 'the token has expired' });
    expect((await startSession(token)).status).toBe(401);
  });

  it("rotates a client's secret: the old one works for 24 h (or not at all with immediately), the new one at once", async () => {
    const t = await createTenant(base, server.adminToken);
    const b = await createTenant(base, server.adminToken, { name: 'B' });
    const token = (secret: string) =>
      accessToken(base, t.clientId, secret).then(
        () => 200,
        () => 401,
      );

    const rotated = await call(
      base,
      'POST',
      `/admin/v1/tenants/${t.tenantId}/clients/${t.clientId}/secret/rotate`,
      {
        token: server.adminToken,
      },
    );
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    const now = clock.now();
    expect(rotated.body).toMatchObject({
      clientId: t.clientId,
      tenantId: t.tenantId,
      previousSecretExpiresAt: now + 24 * 3600_000,
    });
    const second = String(rotated.body.clientSecret);
    expect(second).toMatch(/^lls_/);
    expect(second).not.toBe(t.clientSecret);
    expect(await token(t.clientSecret)).toBe(200);
    expect(await token(second)).toBe(200);
    // Stored as digests only; the list says until when the old secret works.
    const rows = await server.services.storage.db
      .selectFrom('oauth_clients')
      .selectAll()
      .where('client_id', '=', t.clientId)
      .execute();
    expect(JSON.stringify(rows)).not.toContain(second);
    expect(JSON.stringify(rows)).not.toContain(t.clientSecret);
    const list = await call(base, 'GET', `/admin/v1/tenants/${t.tenantId}/clients`, {
      token: server.adminToken,
    });
    expect(list.body.clients).toEqual([
      expect.objectContaining({ previousSecretExpiresAt: now + 24 * 3600_000 }),
    ]);
    expect(list.text).not.toContain(second);

    // The tenant rotates its own client (scope tokens:issue), at once this time.
    const fresh = await accessToken(base, t.clientId, second);
    const own = await call(base, 'POST', `/clients/${t.clientId}/secret/rotate`, {
      token: fresh,
      json: { immediately: true },
    });
    expect(own.status).toBe(200);
    expect(own.body.previousSecretExpiresAt).toBeNull();
    const third = String(own.body.clientSecret);
    expect(await token(second)).toBe(401);
    expect(await token(t.clientSecret)).toBe(401); // two rotations back: gone
    expect(await token(third)).toBe(200);
    // Tokens already issued keep working.
    expect((await call(base, 'GET', '/sessions/active', { token: fresh })).status).toBe(200);

    // Another tenant's client, an unknown one, a revoked one: 404. Bad bodies: 400.
    const foreign = await call(base, 'POST', `/clients/${t.clientId}/secret/rotate`, {
      token: b.token,
      json: {},
    });
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('not_found');
    const wrongTenant = await call(
      base,
      'POST',
      `/admin/v1/tenants/${b.tenantId}/clients/${t.clientId}/secret/rotate`,
      { token: server.adminToken },
    );
    expect(wrongTenant.status).toBe(404);
    const badBody = await call(base, 'POST', `/clients/${t.clientId}/secret/rotate`, {
      token: fresh,
      json: { immediately: 'yes' },
    });
    expect(badBody.status).toBe(400);
    const unknownField = await call(base, 'POST', `/clients/${t.clientId}/secret/rotate`, {
      token: fresh,
      json: { later: true },
    });
    expect(unknownField.status).toBe(400);
    expect(await token(third)).toBe(200); // nothing half-written

    // After 24 h the secret a rotation replaced stops.
    const fourth = await call(base, 'POST', `/clients/${t.clientId}/secret/rotate`, { token: fresh });
    expect(fourth.status).toBe(200);
    clock.advance(24 * 3600_000 - 1000);
    expect(await token(third)).toBe(200);
    clock.advance(2000);
    expect(await token(third)).toBe(401);
    expect(await token(String(fourth.body.clientSecret))).toBe(200);

    await call(base, 'DELETE', `/admin/v1/tenants/${t.tenantId}/clients/${t.clientId}`, {
      token: server.adminToken,
    });
    const gone = await call(
      base,
      'POST',
      `/admin/v1/tenants/${t.tenantId}/clients/${t.clientId}/secret/rotate`,
      {
        token: server.adminToken,
      },
    );
    expect(gone.status).toBe(404);
  });
});

describe.each(backends)('signing-key rotation (%s)', (backend) => {
  const clock = manualClock(START);
  let first: TestServer;
  let second: Awaited<ReturnType<typeof startServer>>;
  beforeAll(async () => {
    first = await startTestServer(backend, {}, { clock });
    // A second process on the same store (SQLite file or PostgreSQL schema), started before the rotation,
    // with no bus between them (its own memory bus): it must pick the new key up from the store by
    // itself. (Two servers on one SQLite file is no supported deployment; it serves this check.)
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
      LIVELINE_SQLITE_SYNCHRONOUS: 'NORMAL',
      LIVELINE_DATA_DIR: first.config.dataDir,
      ...(first.config.databaseUrl
        ? { DATABASE_URL: first.config.databaseUrl, LIVELINE_DATABASE_SCHEMA: first.config.databaseSchema }
        : {}),
    });
    second = await startServer(config, { clock, logger: pino({ level: 'silent' }) });
  }, 60_000);
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it('the newest key signs; older tokens still verify; another process picks the new key up', async () => {
    const t = await createTenant(first.url, first.adminToken);
    const before = await deviceToken(first.url, t.token, 'p-keys');
    const oldKid = kidOf(before);
    const listed = await call(first.url, 'GET', '/admin/v1/keys', { token: first.adminToken });
    expect(listed.status).toBe(200);
    expect(listed.body.keys).toEqual([
      { kid: oldKid, createdAt: expect.any(Number), signing: true, retiresAt: null },
    ]);
    // The second process verifies the first's tokens and signs with the same key.
    expect(kidOf(await deviceToken(second.url, t.token, 'p-keys'))).toBe(oldKid);

    // `liveline admin keys rotate`, against the first process.
    const rotated = await cli([
      'admin',
      'keys',
      'rotate',
      '--json',
      '--url',
      first.url,
      '--token',
      first.adminToken,
    ]);
    expect(rotated.code, rotated.stderr).toBe(0);
    const answer = JSON.parse(rotated.stdout) as {
      key: { kid: string; createdAt: number; signing: boolean };
      keys: { kid: string; signing: boolean; retiresAt: number | null }[];
    };
    const newKid = answer.key.kid;
    expect(newKid).not.toBe(oldKid);
    expect(answer.key.signing).toBe(true);
    expect(answer.keys).toEqual([
      expect.objectContaining({
        kid: oldKid,
        signing: false,
        retiresAt: answer.key.createdAt + 30 * 86400_000 + 10 * 60_000,
      }),
      expect.objectContaining({ kid: newKid, signing: true, retiresAt: null }),
    ]);

    // New tokens carry the new kid; old ones still work, on both processes.
    const fresh = await accessToken(first.url, t.clientId, t.clientSecret);
    expect(kidOf(fresh)).toBe(newKid);
    const after = await deviceToken(first.url, fresh, 'p-keys');
    expect(kidOf(after)).toBe(newKid);
    for (const url of [first.url, second.url])
      for (const token of [before, after])
        expect((await call(url, 'POST', '/client/v1/sessions', { token, json: {} })).status).toBe(201);
    // The second process has taken the new key up: it signs with it too, and publishes it.
    expect(kidOf(await deviceToken(second.url, fresh, 'p-keys'))).toBe(newKid);
    const jwks = await call(second.url, 'GET', '/.well-known/jwks.json');
    expect((jwks.body.keys as { kid: string }[]).map((k) => k.kid)).toEqual([oldKid, newKid]);

    // Past the longest token lifetime the old key is dropped (a token it signed could not be alive).
    clock.advance(30 * 86400_000 + 11 * 60_000);
    const t2 = await createTenant(first.url, first.adminToken);
    expect(kidOf(t2.token)).toBe(newKid);
    const keys = await call(first.url, 'GET', '/admin/v1/keys', { token: first.adminToken });
    expect((keys.body.keys as { kid: string }[]).map((k) => k.kid)).toEqual([newKid]);

    // A leaked key: rotate and retire every other key at once; every earlier token fails.
    const device = await deviceToken(first.url, t2.token, 'p-keys');
    expect((await call(first.url, 'POST', '/client/v1/sessions', { token: device, json: {} })).status).toBe(
      201,
    );
    const retired = await call(first.url, 'POST', '/admin/v1/keys/rotate', {
      token: first.adminToken,
      json: { retireOthers: true },
    });
    expect(retired.status).toBe(200);
    expect((retired.body.keys as unknown[]).length).toBe(1);
    expect((await call(first.url, 'POST', '/client/v1/sessions', { token: device, json: {} })).status).toBe(
      401,
    );
    expect((await call(first.url, 'GET', '/sessions/active', { token: t2.token })).status).toBe(401);
    const rows = await first.services.storage.db
      .selectFrom('server_keys')
      .select('kid')
      .where('purpose', '=', 'signing')
      .execute();
    expect(rows.map((r) => r.kid)).toEqual([(retired.body.key as { kid: string }).kid]);

    const badBody = await call(first.url, 'POST', '/admin/v1/keys/rotate', {
      token: first.adminToken,
      json: { retireOthers: 1 },
    });
    expect(badBody.status).toBe(400);
    expect((await call(first.url, 'POST', '/admin/v1/keys/rotate', { token: t2.token })).status).toBe(401);
  });
});
