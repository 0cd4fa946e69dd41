import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, { requestBody?: unknown; responses?: Record<string, unknown> }>>;
  components?: { schemas?: Record<string, unknown> };
}

/** `n` requests at once from one tenant, returning their status codes. */
async function burst(base: string, token: string, n: number) {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      call(base, 'POST', '/client-tokens', { token, json: { playerId: `p${i}` } }),
    ),
  );
  return answers;
}

describe.each(backends)('edges (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_BODY_LIMIT_BYTES: '4096' });
    base = server.url;
  });
  afterAll(async () => server?.close());

  it('answers /healthz and /readyz', async () => {
    const health = await call(base, 'GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: 'ok' });
    const ready = await call(base, 'GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready', storage: backend });
  });

  it('serves Prometheus metrics', async () => {
    await call(base, 'GET', '/healthz');
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toContain('# TYPE liveline_http_request_duration_seconds histogram');
    expect(text).toMatch(/liveline_http_request_duration_seconds_count\{[^}]*route="\/healthz"[^}]*\} \d+/);
    expect(text).toContain('liveline_process_cpu_seconds_total');
  });

  it('publishes an OpenAPI 3.1 document with the routes and their schemas', async () => {
    const res = await call<OpenApiDocument>(base, 'GET', '/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toMatch(/^3\.1\./);
    expect(doc.paths['/oauth/token']?.post).toBeDefined();
    const tenants = doc.paths['/admin/v1/tenants'];
    expect(tenants?.post?.requestBody).toMatchObject({
      content: {
        'application/json': { schema: { properties: { name: { type: 'string' } }, required: ['name'] } },
      },
    });
    expect(tenants?.get?.responses?.['200']).toBeDefined();
    const clientTokens = doc.paths['/client-tokens']?.post;
    expect(clientTokens?.requestBody).toMatchObject({
      content: { 'application/json': { schema: { properties: { playerId: { type: 'string' } } } } },
    });
    expect(clientTokens?.responses?.['200']).toMatchObject({
      content: { 'application/json': { schema: { properties: { token: { type: 'string' } } } } },
    });
    // References resolve: the shared problem document is a component.
    const text = JSON.stringify(doc);
    for (const [, ref] of text.matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)) {
      expect(doc.components?.schemas?.[ref], `component ${ref}`).toBeDefined();
    }
    expect(doc.components?.schemas?.Problem).toBeDefined();
    // Operational and documentation routes stay out of the API document.
    expect(doc.paths['/metrics']).toBeUndefined();
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/docs'))).toBe(false);
  });

  it('serves the API reference page and its assets', async () => {
    const res = await fetch(`${base}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    const html = await res.text();
    expect(html).toContain('swagger');
    const page = new URL(res.url);
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)]
      .map((m) => m[1])
      .filter((u) => !u.startsWith('http'));
    expect(assets.length).toBeGreaterThan(0);
    for (const asset of assets) {
      const url = new URL(asset, page);
      const a = await fetch(url);
      expect(a.status, url.pathname).toBe(200);
      await a.arrayBuffer();
    }
    // The page's policy keeps its assets on the scheme it was served with (plain http included).
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).not.toContain('upgrade-insecure-requests');
    // The initializer points the page at a specification that loads.
    const init = await (await fetch(new URL('./static/swagger-initializer.js', `${base}/docs/`))).text();
    const specUrl = /url: resolveUrl\('([^']+)'\)/.exec(init)?.[1];
    expect(specUrl).toBeDefined();
    const spec = await fetch(new URL(String(specUrl), `${base}/docs/`));
    expect(spec.status).toBe(200);
    expect(((await spec.json()) as OpenApiDocument).openapi).toMatch(/^3\.1\./);
  });

  it('echoes a valid X-Request-Id and generates one otherwise', async () => {
    const kept = await call(base, 'GET', '/healthz', { headers: { 'x-request-id': 'abc-123.DEF_4' } });
    expect(kept.headers.get('x-request-id')).toBe('abc-123.DEF_4');
    const generated = await call(base, 'GET', '/healthz');
    const id = generated.headers.get('x-request-id');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const replaced = await call(base, 'GET', '/healthz', {
      headers: { 'x-request-id': 'bad id with spaces' },
    });
    expect(replaced.headers.get('x-request-id')).not.toBe('bad id with spaces');
    expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const tooLong = await call(base, 'GET', '/healthz', { headers: { 'x-request-id': 'x'.repeat(129) } });
    expect(tooLong.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    // Also on errors, where it matters most.
    const missing = await call(base, 'GET', '/nowhere', { headers: { 'x-request-id': 'trace-404' } });
    expect(missing.headers.get('x-request-id')).toBe('trace-404');
    const unauthorized = await call(base, 'GET', '/admin/v1/tenants', {
      headers: { 'x-request-id': 'trace-401' },
    });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get('x-request-id')).toBe('trace-401');
  });

  it('rejects a body over the limit with 413 payload_too_large', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(5000) });
    const res = await call(base, 'POST', '/admin/v1/tenants', {
      token: server.adminToken,
      body: big,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body).toMatchObject({ status: 413, code: 'payload_too_large' });
    // Just under the limit is read and validated as usual.
    const fits = await call(base, 'POST', '/admin/v1/tenants', {
      token: server.adminToken,
      json: { name: 'x'.repeat(3000) },
    });
    expect(fits.status).toBe(400);
    expect(fits.body.code).toBe('validation_failed');
  });

  it('answers an unknown route with a 404 problem', async () => {
    const res = await call(base, 'GET', '/no/such/route?x=1');
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body).toMatchObject({
      type: 'about:blank',
      status: 404,
      code: 'not_found',
      detail: 'No route GET /no/such/route.',
    });
    const wrongCase = await call(base, 'GET', '/HEALTHZ');
    expect(wrongCase.status).toBe(404);
  });
});

// Each server of this file runs alone: one block's server closes before the next block's starts.
describe.each(backends)('default body limit (%s)', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(async () => server?.close());

  it('is 1 MiB', async () => {
    expect(server.config.bodyLimitBytes).toBe(1024 * 1024);
    const res = await call(server.url, 'POST', '/admin/v1/tenants', {
      token: server.adminToken,
      body: JSON.stringify({ name: 'x'.repeat(1024 * 1024) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('payload_too_large');
  });
});

describe.each(backends)('rate limits (%s)', (backend) => {
  let server: TestServer;
  let a: TenantFixture;
  let b: TenantFixture;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_RATE_LIMIT_TENANT_RPS: '5' });
    a = await createTenant(server.url, server.adminToken, { name: 'A' });
    b = await createTenant(server.url, server.adminToken, { name: 'B' });
  });
  afterAll(async () => server?.close());

  it('answers the 6th request within a second from one tenant with 429, other tenants unaffected', async () => {
    // A tenant's one-second window starts with its first limited request.
    const first = await burst(server.url, a.token, 5);
    expect(first.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const sixth = await call(server.url, 'POST', '/client-tokens', {
      token: a.token,
      json: { playerId: 'p6' },
    });
    expect(sixth.status).toBe(429);
    expect(sixth.headers.get('content-type')).toContain('application/problem+json');
    expect(sixth.body).toMatchObject({ status: 429, code: 'rate_limited' });
    const retryAfter = Number(sixth.headers.get('retry-after'));
    expect(retryAfter).toBe(1);
    // Limited before the body is read: an invalid request is refused the same way.
    const invalid = await call(server.url, 'POST', '/client-tokens', {
      token: a.token,
      json: { nope: true },
    });
    expect(invalid.status).toBe(429);
    const other = await burst(server.url, b.token, 5);
    expect(other.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    // The operator and public routes are not counted against tenants.
    expect((await call(server.url, 'GET', '/admin/v1/tenants', { token: server.adminToken })).status).toBe(
      200,
    );
    expect((await call(server.url, 'GET', '/healthz')).status).toBe(200);
    // The window passes.
    await new Promise((r) => setTimeout(r, 1100));
    const later = await call(server.url, 'POST', '/client-tokens', {
      token: a.token,
      json: { playerId: 'p7' },
    });
    expect(later.status).toBe(200);
  });
});

describe.each(backends)('rate limits off (%s)', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_RATE_LIMIT_TENANT_RPS: '0' });
  });
  afterAll(async () => server?.close());

  it('with LIVELINE_RATE_LIMIT_TENANT_RPS=0', async () => {
    const t = await createTenant(server.url, server.adminToken);
    const answers = await burst(server.url, t.token, 50);
    expect(answers.filter((r) => r.status !== 200)).toEqual([]);
  });
});
