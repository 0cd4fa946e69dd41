import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataDirWarnings } from '../../src/storage/index.ts';
import { call, createTenant } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

const mode = (p: string) => fs.statSync(p).mode & 0o777;

describe('the data directory is private (sqlite)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
    // A write, so the write-ahead log and its shared memory exist.
    await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => server?.close());

  it('keeps the directory 0700 and the database with its -wal and -shm files 0600', () => {
    const dir = server.config.dataDir;
    expect(mode(dir)).toBe(0o700);
    for (const name of ['liveline.db', 'liveline.db-wal', 'liveline.db-shm']) {
      expect(mode(path.join(dir, name)), name).toBe(0o600);
    }
    expect(dataDirWarnings(dir)).toEqual([]);
  });

  it('warns about a directory or secret file that others can read', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-modes-'));
    try {
      fs.chmodSync(dir, 0o755);
      fs.writeFileSync(path.join(dir, 'liveline.db'), '', { mode: 0o644 });
      fs.chmodSync(path.join(dir, 'liveline.db'), 0o644);
      const warnings = dataDirWarnings(dir);
      expect(warnings).toHaveLength(2);
      expect(warnings[0]).toContain('mode 755');
      expect(warnings[1]).toContain('liveline.db has mode 644');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.each(backends)('response headers (%s)', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(async () => server?.close());

  it('sends nosniff on every answer and no-store on API answers that carry secrets', async () => {
    const created = await call(server.url, 'POST', '/admin/v1/tenants', {
      token: server.adminToken,
      json: { name: 'headers' },
    });
    const client = await call(server.url, 'POST', `/admin/v1/tenants/${created.body.tenantId}/clients`, {
      token: server.adminToken,
      json: {},
    });
    expect(client.body.clientSecret).toBeTruthy();
    for (const answer of [created, client, await call(server.url, 'GET', '/sessions/active')]) {
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
      expect(answer.headers.get('cache-control')).toBe('no-store');
    }
    const health = await call(server.url, 'GET', '/healthz');
    expect(health.headers.get('x-content-type-options')).toBe('nosniff');
  });
});

describe.each(backends)('refusals made before a handler runs (%s)', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_BODY_LIMIT_BYTES: '4096' });
  });
  afterAll(async () => server?.close());

  const token = (init: RequestInit, query = '') =>
    fetch(`${server.url}/oauth/token${query}`, { method: 'POST', ...init });

  it('answers /oauth/token in RFC 6749 form whatever is wrong with the request', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const cases: [Response, number][] = [
      [await token({ headers: { 'content-type': 'text/plain' }, body: 'x' }), 415],
      [await token({ headers: { 'content-type': 'application/json' }, body: '{bad' }), 400],
      [await token({ headers: form, body: `grant_type=client_credentials&x=${'a'.repeat(8192)}` }), 413],
      [await token({ headers: form, body: 'grant_type=client_credentials' }, '?foo=1'), 400],
    ];
    for (const [res, status] of cases) {
      expect(res.status).toBe(status);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(await res.json()).toEqual({ error: 'invalid_request', error_description: expect.any(String) });
    }
  });

  it('refuses page numbers past any list with a 400, and bad or too long paths with problem documents', async () => {
    const admin = { token: server.adminToken };
    for (const page of ['99999999999999999999', '1e300', '10000001']) {
      const res = await call(server.url, 'GET', `/admin/v1/tenants/page/${page}`, admin);
      expect(res.status, page).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    }
    const tenant = await createTenant(server.url, server.adminToken);
    const far = await call(server.url, 'GET', '/sessions/active/page/10000000', { token: tenant.token });
    expect(far.status).toBe(200);
    expect(far.body.sessions).toEqual([]);
    const bad = await call(server.url, 'GET', '/sessions/%zz', { token: tenant.token });
    expect([bad.status, bad.headers.get('content-type'), bad.body.code]).toEqual([
      400,
      'application/problem+json; charset=utf-8',
      'bad_request',
    ]);
    const long = await call(server.url, 'GET', `/sessions/${'a'.repeat(500)}`, { token: tenant.token });
    expect([long.status, long.headers.get('content-type'), long.body.code]).toEqual([
      414,
      'application/problem+json; charset=utf-8',
      'uri_too_long',
    ]);
  });
});
