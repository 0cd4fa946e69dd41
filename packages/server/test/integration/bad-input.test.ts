import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * The same bad inputs against every route that takes a JSON body: each must get its documented
 * 4xx problem document (never a 500) and must store nothing.
 */
describe.each(backends)('bad input on every JSON route (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let device: string;
  let sessionId: string;

  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_BODY_LIMIT_BYTES: String(64 * 1024) });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
    device = await deviceToken(base, tenant.token, 'bad-input');
    const s = await call(base, 'POST', '/client/v1/sessions', { token: device, json: {} });
    sessionId = String(s.body.sessionId);
  });
  afterAll(async () => server?.close());

  const routes = () => [
    { name: 'create tenant', path: '/admin/v1/tenants', token: server.adminToken, valid: { name: 'x' } },
    {
      name: 'create client',
      path: `/admin/v1/tenants/${tenant.tenantId}/clients`,
      token: server.adminToken,
      valid: { name: 'c' },
    },
    { name: 'device token', path: '/client-tokens', token: tenant.token, valid: { playerId: 'p' } },
    { name: 'start session', path: '/client/v1/sessions', token: device, valid: {} },
    {
      name: 'ingest events',
      path: `/sessions/${sessionId}/Events`,
      token: device,
      valid: { events: [{ id: 'x', eventType: 'Custom', timestamp: Date.now() }] },
    },
  ];

  const tableCount = async (table: 'tenants' | 'oauth_clients' | 'sessions' | 'events') =>
    Number(
      (
        await server.services.storage.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  const counts = async () =>
    Promise.all((['tenants', 'oauth_clients', 'sessions', 'events'] as const).map(tableCount));

  it('malformed JSON → 400 malformed_json', async () => {
    const before = await counts();
    for (const r of routes()) {
      const res = await call(base, 'POST', r.path, {
        token: r.token,
        body: '{"oops": ',
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status, r.name).toBe(400);
      expect(res.headers.get('content-type'), r.name).toContain('application/problem+json');
      expect(res.body, r.name).toMatchObject({ code: 'malformed_json', status: 400, type: 'about:blank' });
    }
    expect(await counts()).toEqual(before);
  });

  it('wrong content type → 415 unsupported_media_type', async () => {
    for (const r of routes()) {
      for (const type of ['text/plain', 'application/xml', 'multipart/form-data; boundary=x']) {
        const res = await call(base, 'POST', r.path, {
          token: r.token,
          body: 'x',
          headers: { 'content-type': type },
        });
        expect(res.status, `${r.name} ${type}`).toBe(415);
        expect(res.body.code).toBe('unsupported_media_type');
      }
    }
  });

  it('unknown fields and wrong types → 400 validation_failed with paths', async () => {
    const before = await counts();
    for (const r of routes()) {
      const unknown = await call(base, 'POST', r.path, {
        token: r.token,
        json: { ...r.valid, surprise: true },
      });
      expect(unknown.status, r.name).toBe(400);
      expect(unknown.body.code).toBe('validation_failed');
      expect(unknown.body.errors, r.name).toContainEqual({
        path: 'surprise',
        message: 'is not an allowed field',
      });
      for (const wrong of [[], 'text', 42, null]) {
        const res = await call(base, 'POST', r.path, { token: r.token, json: wrong });
        expect(res.status, `${r.name} ${JSON.stringify(wrong)}`).toBe(400);
        expect(res.body.code).toBe('validation_failed');
        expect((res.body.errors as unknown[]).length).toBeGreaterThan(0);
      }
    }
    expect(await counts()).toEqual(before);
  });

  it('oversize bodies → 413 payload_too_large', async () => {
    for (const r of routes()) {
      const res = await call(base, 'POST', r.path, {
        token: r.token,
        json: { ...r.valid, pad: 'x'.repeat(70 * 1024) },
      });
      expect(res.status, r.name).toBe(413);
      expect(res.body.code).toBe('payload_too_large');
    }
  });

  it('missing required fields → 400 naming them', async () => {
    const cases: [string, string, unknown, string][] = [
      ['/admin/v1/tenants', server.adminToken, {}, 'name'],
      ['/client-tokens', tenant.token, { tenantCohortId: 'c' }, 'playerId'],
      [`/sessions/${sessionId}/Events`, device, {}, 'events'],
    ];
    for (const [path, token, json, field] of cases) {
      const res = await call(base, 'POST', path, { token, json });
      expect(res.status, path).toBe(400);
      expect(
        (res.body.errors as { path: string }[]).map((e) => e.path),
        path,
      ).toContain(field);
    }
  });

  it('malformed ids in paths → 400; unknown or foreign ids → 404', async () => {
    const other = await createTenant(base, server.adminToken);
    const cases: [string, string, string][] = [
      ['GET', '/sessions/123', tenant.token],
      ['GET', '/sessions/123/events', tenant.token],
      ['POST', '/client/v1/sessions/123/end', device],
      ['GET', '/admin/v1/tenants/123', server.adminToken],
      ['DELETE', `/admin/v1/tenants/${tenant.tenantId}/clients/123`, server.adminToken],
    ];
    for (const [method, path, token] of cases) {
      const res = await call(base, method, path, { token });
      expect(res.status, path).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    }
    const foreign: [string, string, string][] = [
      ['GET', `/sessions/${sessionId}`, other.token],
      ['GET', `/sessions/${sessionId}/events`, other.token],
      ['DELETE', `/admin/v1/tenants/${other.tenantId}/clients/${tenant.clientId}`, server.adminToken],
    ];
    for (const [method, path, token] of foreign) {
      const res = await call(base, method, path, { token });
      expect(res.status, path).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    // The client of another tenant is still alive: the foreign delete did nothing.
    expect((await call(base, 'GET', `/sessions/${sessionId}`, { token: tenant.token })).status).toBe(200);
  });
});
