import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

// What /openapi.json promises beyond the routes' fields (docs/api.md, "The API description"), checked
// against what the server does. `npm run lint:api` checks the document's form; these check its truth.

// biome-ignore lint/suspicious/noExplicitAny: the document is JSON; each test reads what it needs.
type Json = Record<string, any>;

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch']);
const RATE_LIMIT_HEADERS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

function operationsOf(doc: Json) {
  const out: { method: string; path: string; op: Json }[] = [];
  for (const [p, item] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json))
      if (METHODS.has(method)) out.push({ method, path: p, op });
  }
  return out;
}

/** Waits for the next second: a fresh tenant budget (the server runs at 5 requests a second). */
const freshBudget = () => new Promise((r) => setTimeout(r, 1100));

const declaredHeaders = (doc: Json, p: string, method: string, status: string) =>
  Object.keys(doc.paths[p][method].responses[status]?.headers ?? {});

describe.each(backends)('the API description (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let doc: Json;
  let tenant: TenantFixture;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_RATE_LIMIT_TENANT_RPS: '5' });
    base = server.url;
    doc = (await call<Json>(base, 'GET', '/openapi.json')).body;
    tenant = await createTenant(base, server.adminToken);
  });
  afterAll(async () => server?.close());

  it('names every operation once, camelCase, verb then noun', () => {
    const ids = operationsOf(doc).map(({ method, path: p, op }) => {
      expect(op.operationId, `${method.toUpperCase()} ${p}`).toMatch(/^[a-z]+(?:[A-Z][a-z0-9]*)+$/);
      return op.operationId as string;
    });
    expect(new Set(ids).size).toBe(ids.length);
    // The names of the examples, the tenant client's and the operator's mirror.
    expect(doc.paths['/sessions/{SessionId}/realtime/commands'].post.operationId).toBe('sendCommand');
    expect(doc.paths['/sessions/active'].get.operationId).toBe('listActiveSessions');
    expect(doc.paths['/sessions/active/page/{pageNumber}'].get.operationId).toBe('listActiveSessionsPage');
    expect(doc.paths['/webhooks'].get.operationId).toBe('listWebhooks');
    expect(doc.paths['/admin/v1/tenants/{tenantId}/webhooks'].get.operationId).toBe('listTenantWebhooks');
  });

  it('says who may call each route: scopes as alternatives, public routes with no requirement', () => {
    const commandLog = doc.paths['/sessions/{SessionId}/realtime/commands/{commandId}'].get;
    expect(commandLog.security).toEqual([
      { tenantToken: ['commands:send'] },
      { tenantToken: ['sessions:read'] },
    ]);
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(doc.paths['/campaigns/verifyrewardcode'].post.security).toEqual([]);
    const scopes = doc.components.securitySchemes.tenantToken.flows.clientCredentials.scopes;
    for (const { op } of operationsOf(doc)) {
      for (const requirement of op.security as Json[]) {
        for (const scope of requirement.tenantToken ?? []) expect(scopes[scope], scope).toBeTruthy();
      }
    }
  });

  it('declares the rate-limit headers exactly on the answers that carry them', async () => {
    // A tenant request is counted: its 200 and its 404 carry the headers, as declared.
    const ok = await call(base, 'GET', '/webhooks', { token: tenant.token });
    expect(ok.status).toBe(200);
    for (const h of RATE_LIMIT_HEADERS) expect(ok.headers.has(h), h).toBe(true);
    expect(declaredHeaders(doc, '/webhooks', 'get', '200')).toEqual(
      expect.arrayContaining(RATE_LIMIT_HEADERS),
    );
    const missing = await call(base, 'GET', `/webhooks/${crypto.randomUUID()}`, { token: tenant.token });
    expect(missing.status).toBe(404);
    expect(missing.headers.has('X-RateLimit-Limit')).toBe(true);
    expect(declaredHeaders(doc, '/webhooks/{webhookId}', 'get', '404')).toEqual(
      expect.arrayContaining(RATE_LIMIT_HEADERS),
    );

    // A device request too (its own budget).
    const device = await deviceToken(base, tenant.token, 'player-openapi');
    const started = await call(base, 'POST', '/client/v1/sessions', { token: device, json: {} });
    expect(started.status).toBe(201);
    expect(started.headers.has('X-RateLimit-Limit')).toBe(true);
    expect(declaredHeaders(doc, '/client/v1/sessions', 'post', '201')).toEqual(
      expect.arrayContaining(RATE_LIMIT_HEADERS),
    );

    // A refused token is not counted: no headers sent, none declared.
    const refused = await call(base, 'GET', '/webhooks', { token: 'not-a-token' });
    expect(refused.status).toBe(401);
    expect(refused.headers.has('X-RateLimit-Limit')).toBe(false);
    expect(declaredHeaders(doc, '/webhooks', 'get', '401')).toEqual([]);
    expect(declaredHeaders(doc, '/webhooks', 'get', '403')).toEqual([]);

    // The operator is not rate limited: no headers sent, none declared.
    const operator = await call(base, 'GET', '/admin/v1/tenants', { token: server.adminToken });
    expect(operator.status).toBe(200);
    expect(operator.headers.has('X-RateLimit-Limit')).toBe(false);
    expect(declaredHeaders(doc, '/admin/v1/tenants', 'get', '200')).toEqual([]);

    // Past the budget: 429 with Retry-After, as declared.
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => call(base, 'GET', '/webhooks', { token: tenant.token })),
    );
    const limited = answers.find((a) => a.status === 429);
    expect(limited, 'a 429 within 12 requests at 5/s').toBeDefined();
    expect(Number(limited?.headers.get('Retry-After'))).toBeGreaterThanOrEqual(1);
    expect(declaredHeaders(doc, '/webhooks', 'get', '429')).toEqual(
      expect.arrayContaining(['Retry-After', ...RATE_LIMIT_HEADERS]),
    );
  });

  it('bounds what the server sends as the document says: problem details and OAuth errors', async () => {
    await freshBudget();
    // A command envelope with 300 unknown fields, one of them 5000 characters long.
    const session = await call(base, 'POST', '/client/v1/sessions', {
      token: await deviceToken(base, tenant.token, 'player-bounds'),
      json: {},
    });
    const envelope: Json = { name: 'text', data: 'hello' };
    for (let i = 0; i < 299; i++) envelope[`f${i}`] = 1;
    envelope['x'.repeat(5000)] = 1;
    const refused = await call<Json>(base, 'POST', `/sessions/${session.body.sessionId}/realtime/commands`, {
      token: tenant.token,
      json: envelope,
    });
    expect(refused.status).toBe(400);
    const problem = doc.components.schemas.Problem;
    expect(refused.body.errors.length).toBe(problem.properties.errors.maxItems);
    expect(refused.body.detail.length).toBeLessThanOrEqual(problem.properties.detail.maxLength);
    for (const e of refused.body.errors) {
      expect(e.path.length).toBeLessThanOrEqual(problem.properties.errors.items.properties.path.maxLength);
    }

    // An OAuth error quoting a 5000-character scope.
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: tenant.clientId,
      client_secret: tenant.clientSecret,
      scope: 's'.repeat(5000),
    });
    const res = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    const body = (await res.json()) as Json;
    expect(res.status).toBe(400);
    expect(body.error).toBe('invalid_scope');
    const oauthError = doc.paths['/oauth/token'].post.responses['4XX'].content['application/json'].schema;
    expect(body.error_description.length).toBeLessThanOrEqual(
      oauthError.properties.error_description.maxLength,
    );
  });

  it('takes back every event cursor it gives, up to the bound it publishes', async () => {
    await freshBudget();
    const device = await deviceToken(base, tenant.token, 'player-cursor');
    const started = await call<Json>(base, 'POST', '/client/v1/sessions', { token: device, json: {} });
    const sessionId = started.body.sessionId as string;
    // Ids of 128 characters that JSON writes as \u00XX: the longest cursors there are.
    const now = Date.now();
    const events = [1, 2].map((n) => ({
      id: `${String.fromCharCode(n)}`.repeat(128),
      eventType: 'Custom',
      timestamp: now + n,
    }));
    const ingested = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token: device,
      json: { events },
    });
    expect(ingested.status).toBe(200);
    await freshBudget();
    const first = await call<Json>(base, 'GET', `/sessions/${sessionId}/events?limit=1`, {
      token: tenant.token,
    });
    expect(first.status).toBe(200);
    const cursor = first.body.nextCursor as string;
    const query = doc.paths['/sessions/{SessionId}/events'].get.parameters.find(
      (p: Json) => p.name === 'after',
    );
    expect(cursor.length).toBeGreaterThan(400);
    expect(cursor.length).toBeLessThanOrEqual(query.schema.maxLength);
    const second = await call<Json>(base, 'GET', `/sessions/${sessionId}/events?limit=1&after=${cursor}`, {
      token: tenant.token,
    });
    expect(second.status).toBe(200);
    expect(second.body.events.map((e: Json) => e.id)).toEqual([events[1].id]);
    // One character more than the bound is refused, as a 400 problem naming the parameter.
    const tooLong = await call<Json>(
      base,
      'GET',
      `/sessions/${sessionId}/events?after=${'A'.repeat(query.schema.maxLength + 1)}`,
      { token: tenant.token },
    );
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.errors[0].path).toBe('query.after');
  });

  it('refuses ids longer than a UUID, as the document bounds them', async () => {
    await freshBudget();
    const param = doc.paths['/webhooks/{webhookId}'].get.parameters.find((p: Json) => p.name === 'webhookId');
    expect(param.schema.maxLength).toBe(36);
    // A UUID in its URN form passes the `uuid` format alone; the bound refuses it.
    const urn = await call<Json>(base, 'GET', `/webhooks/urn:uuid:${crypto.randomUUID()}`, {
      token: tenant.token,
    });
    expect(urn.status).toBe(400);
    expect(urn.body.code).toBe('validation_failed');
  });
});

describe('liveline openapi', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
  });
  afterAll(async () => server?.close());

  it('prints the document the server publishes, without starting one', async () => {
    const root = path.resolve(import.meta.dirname, '../../../..');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'packages/server/src/cli/main.ts', 'openapi'],
      { cwd: root, maxBuffer: 64 * 1024 * 1024 },
    );
    const served = (await call<Json>(server.url, 'GET', '/openapi.json')).body;
    expect(JSON.parse(stdout)).toEqual(served);
  }, 90_000);
});
