import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessToken, call, createTenant, deviceToken } from '../helpers/api.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

describe.each(backends)('auth (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer(backend);
    base = server.url;
  });
  afterAll(async () => server?.close());

  it('operator creates and lists tenants; others cannot', async () => {
    const created = await call(base, 'POST', '/admin/v1/tenants', {
      token: server.adminToken,
      json: { name: 'Acme' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'Acme' });
    expect(created.body.tenantId).toMatch(/^[0-9a-f-]{36}$/);
    const list = await call(base, 'GET', '/admin/v1/tenants', { token: server.adminToken });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ page: 1, pageSize: 1000, hasMore: false });
    expect((list.body.tenants as unknown[]).length).toBeGreaterThanOrEqual(1);

    expect((await call(base, 'GET', '/admin/v1/tenants')).status).toBe(401);
    const wrong = await call(base, 'GET', '/admin/v1/tenants', { token: 'not-the-admin-token' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('content-type')).toContain('application/problem+json');
    expect(wrong.body).toMatchObject({ status: 401, code: 'unauthorized' });
    const t = await createTenant(base, server.adminToken);
    const asTenant = await call(base, 'GET', '/admin/v1/tenants', { token: t.token });
    expect(asTenant.status).toBe(403);
    expect(asTenant.body.code).toBe('forbidden');
  });

  it('validates admin input', async () => {
    const missing = await call(base, 'POST', '/admin/v1/tenants', { token: server.adminToken, json: {} });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({
      code: 'validation_failed',
      errors: [{ path: 'name', message: 'is required' }],
    });
    const unknown = await call(base, 'POST', '/admin/v1/tenants', {
      token: server.adminToken,
      json: { name: 'x', color: 'red' },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors).toEqual([{ path: 'color', message: 'is not an allowed field' }]);
    const badJson = await call(base, 'POST', '/admin/v1/tenants', {
      token: server.adminToken,
      body: '{"name":',
      headers: { 'content-type': 'application/json' },
    });
    expect(badJson.status).toBe(400);
    expect(badJson.body.code).toBe('malformed_json');
    const text = await call(base, 'POST', '/admin/v1/tenants', {
      token: server.adminToken,
      body: 'name=x',
      headers: { 'content-type': 'text/plain' },
    });
    expect(text.status).toBe(415);
    expect(text.body.code).toBe('unsupported_media_type');
    const badId = await call(base, 'GET', '/admin/v1/tenants/not-a-uuid', { token: server.adminToken });
    expect(badId.status).toBe(400);
    expect(badId.body.errors).toEqual([{ path: 'path.tenantId', message: 'must match format "uuid"' }]);
    const unknownTenant = await call(base, 'GET', '/admin/v1/tenants/0190a0a0-0000-7000-8000-000000000000', {
      token: server.adminToken,
    });
    expect(unknownTenant.status).toBe(404);
    expect(unknownTenant.body.code).toBe('not_found');
  });

  it('issues client-credentials tokens with scopes and publishes JWKS', async () => {
    const t = await createTenant(base, server.adminToken, { scopes: ['sessions:read', 'tokens:issue'] });
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: t.clientId,
      client_secret: t.clientSecret,
      scope: 'sessions:read',
    });
    const res = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ token_type: 'Bearer', scope: 'sessions:read', expires_in: 3600 });
    const [header, payload] = String(body.access_token)
      .split('.')
      .slice(0, 2)
      .map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()));
    expect(header.alg).toBe('ES256');
    expect(payload).toMatchObject({ sub: t.clientId, tenant: t.tenantId, scope: 'sessions:read' });
    const jwks = await call(base, 'GET', '/.well-known/jwks.json');
    expect((jwks.body.keys as { kid: string }[]).map((k) => k.kid)).toContain(header.kid);
    expect(JSON.stringify(jwks.body)).not.toContain('"d"');

    const wrongSecret = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: t.clientId,
        client_secret: 'nope',
      }).toString(),
    });
    expect(wrongSecret.status).toBe(401);
    expect(await wrongSecret.json()).toMatchObject({ error: 'invalid_client' });
    const badScope = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: t.clientId,
        client_secret: t.clientSecret,
        scope: 'commands:send',
      }).toString(),
    });
    expect(badScope.status).toBe(400);
    expect(await badScope.json()).toMatchObject({ error: 'invalid_scope' });
    const badGrant = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'password',
        client_id: t.clientId,
        client_secret: t.clientSecret,
      }).toString(),
    });
    expect(badGrant.status).toBe(400);
    expect(await badGrant.json()).toMatchObject({ error: 'unsupported_grant_type' });
  });

  it('mints device tokens; scopes and token kinds are enforced; revocation is immediate', async () => {
    const t = await createTenant(base, server.adminToken);
    const device = await call(base, 'POST', '/client-tokens', {
      token: t.token,
      json: { playerId: 'p1', tenantCohortId: 'class-a' },
    });
    expect(device.status).toBe(200);
    expect(device.body).toMatchObject({ playerId: 'p1', tenantCohortId: 'class-a' });
    const pool = await call(base, 'GET', '/poolusers/newtoken', { token: t.token });
    expect(pool.status).toBe(200);
    expect(String(pool.body.playerId)).toMatch(/^pool-/);
    // A device token is not a tenant token.
    const asDevice = await call(base, 'POST', '/client-tokens', {
      token: String(device.body.token),
      json: { playerId: 'x' },
    });
    expect(asDevice.status).toBe(403);
    // A token without the scope.
    const limited = await accessToken(base, t.clientId, t.clientSecret, 'sessions:read');
    const noScope = await call(base, 'POST', '/client-tokens', { token: limited, json: { playerId: 'x' } });
    expect(noScope.status).toBe(403);
    expect(noScope.body.detail).toContain('tokens:issue');
    // A tampered signature.
    const parts = t.token.split('.');
    const tampered = `${parts[0]}.${parts[1]}.${parts[2].slice(0, -4)}AAAA`;
    expect(
      (await call(base, 'POST', '/client-tokens', { token: tampered, json: { playerId: 'x' } })).status,
    ).toBe(401);
    // Revocation.
    const del = await call(base, 'DELETE', `/admin/v1/tenants/${t.tenantId}/clients/${t.clientId}`, {
      token: server.adminToken,
    });
    expect(del.status).toBe(204);
    const after = await call(base, 'POST', '/client-tokens', { token: t.token, json: { playerId: 'x' } });
    expect(after.status).toBe(401);
    expect(
      (
        await call(base, 'DELETE', `/admin/v1/tenants/${t.tenantId}/clients/${t.clientId}`, {
          token: server.adminToken,
        })
      ).status,
    ).toBe(404);
    await expect(deviceToken(base, t.token, 'y')).rejects.toThrow();
  });

  it('never stores client secrets in the clear', async () => {
    const t = await createTenant(base, server.adminToken);
    const rows = await server.services.storage.db
      .selectFrom('oauth_clients')
      .selectAll()
      .where('client_id', '=', t.clientId)
      .execute();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(t.clientSecret);
    const list = await call(base, 'GET', `/admin/v1/tenants/${t.tenantId}/clients`, {
      token: server.adminToken,
    });
    expect(list.text).not.toContain(t.clientSecret);
    expect(list.body.clients).toHaveLength(1);
  });
});

describe.each(backends)('token expiry (%s)', (backend) => {
  const clock = manualClock(Date.UTC(2026, 10, 21, 12, 0, 0));
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_ACCESS_TOKEN_TTL_S: '120' }, { clock });
  });
  afterAll(async () => server?.close());

  it('a token that worked stops working when it expires (verified tokens are not kept past exp)', async () => {
    const t = await createTenant(server.url, server.adminToken);
    const device = await deviceToken(server.url, t.token, 'expiring');
    const start = () => call(server.url, 'POST', '/client/v1/sessions', { token: device, json: {} });
    expect((await start()).status).toBe(201);
    expect((await call(server.url, 'GET', '/sessions/active', { token: t.token })).status).toBe(200);
    clock.advance(121_000);
    expect((await call(server.url, 'GET', '/sessions/active', { token: t.token })).status).toBe(401);
    expect((await start()).status).toBe(201); // device tokens live 24 h by default
    clock.advance(86_400_000);
    const expired = await start();
    expect(expired.status).toBe(401);
    expect(expired.body.code).toBe('unauthorized');
  });
});
