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
