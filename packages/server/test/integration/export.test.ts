import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPORT_SESSION_PAGE } from '../../src/modules/tenant-export/index.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { cli } from '../helpers/process.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

/** The tenant export through the real server and the real CLI (`liveline admin export`). */
describe.each(backends)('tenant export (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let a: TenantFixture & { device: string };
  let b: TenantFixture & { device: string };
  let dir: string;
  /** Every session of tenant A, in creation order, and the ids of those created after `since`. */
  const aSessions: string[] = [];
  let since = '';
  let afterSince: string[] = [];
  const bSessions: string[] = [];

  async function newSession(t: { device: string }) {
    const res = await call(base, 'POST', '/client/v1/sessions', { token: t.device, json: {} });
    return String(res.body.sessionId);
  }
  async function ingest(t: { device: string }, sessionId: string, n: number, prefix: string) {
    for (let start = 0; start < n; start += 1000) {
      const events = Array.from({ length: Math.min(1000, n - start) }, (_, i) => ({
        id: `${prefix}-${start + i}`,
        eventType: 'Custom',
        timestamp: Date.now() - i,
        custom01: 'x',
      }));
      const res = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
        token: t.device,
        json: { events },
      });
      if (res.status !== 200) throw new Error(res.text);
    }
  }

  beforeAll(async () => {
    server = await startTestServer(backend, {
      LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
      LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
    });
    base = server.url;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-export-'));
    const ta = await createTenant(base, server.adminToken, { name: 'A' });
    const tb = await createTenant(base, server.adminToken, { name: 'B' });
    a = { ...ta, device: await deviceToken(base, ta.token, 'pa') };
    b = { ...tb, device: await deviceToken(base, tb.token, 'pb') };
    // More sessions than one export page, one of them with more events than one event page.
    const big = await newSession(a);
    aSessions.push(big);
    await ingest(a, big, 2500, 'big');
    for (let i = 0; i < EXPORT_SESSION_PAGE + 4; i++) {
      const s = await newSession(a);
      aSessions.push(s);
      if (i % 3 === 0) await ingest(a, s, 2, `s${i}`);
    }
    await new Promise((r) => setTimeout(r, 5));
    since = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 5));
    afterSince = [await newSession(a), await newSession(a)];
    aSessions.push(...afterSince);
    await ingest(a, afterSince[1], 3, 'late');
    await call(base, 'POST', `/client/v1/sessions/${afterSince[1]}/end`, { token: a.device, json: {} });
    for (let i = 0; i < 3; i++) {
      const s = await newSession(b);
      bSessions.push(s);
      await ingest(b, s, 5, `b${i}`);
    }
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const exportOf = (tenantId: string, query = '', token = server.adminToken) =>
    call(base, 'GET', `/admin/v1/tenants/${tenantId}/export${query}`, { token });
  const linesOf = (text: string) =>
    text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Json);

  /** Checks an export against the API: each session as GET /sessions/{id} shows it, then its events in order. */
  async function expectWhole(lines: Json[], sessionIds: string[]) {
    const end = lines.at(-1);
    const sessions = lines.filter((l) => l.kind === 'session');
    const events = lines.filter((l) => l.kind === 'event');
    expect(end).toEqual({ kind: 'end', sessions: sessions.length, events: events.length });
    expect(sessions.map((s) => s.sessionId).sort()).toEqual([...sessionIds].sort());
    let i = 0;
    for (const id of sessions.map((s) => String(s.sessionId))) {
      expect(lines[i]).toMatchObject({ kind: 'session', sessionId: id });
      const res = await call<Json & { events: Json[] }>(base, 'GET', `/sessions/${id}`, { token: a.token });
      const { events: apiEvents, ...apiSession } = res.body;
      expect(lines[i]).toMatchObject({ ...apiSession, connected: expect.any(Boolean) });
      const exported = lines.slice(i + 1, i + 1 + apiEvents.length);
      expect(exported).toEqual(apiEvents.map((e) => ({ kind: 'event', ...e })));
      i += 1 + apiEvents.length;
    }
    expect(i).toBe(lines.length - 1);
  }

  it("streams every session and event of the tenant as NDJSON, nothing of another tenant's", async () => {
    const res = await exportOf(a.tenantId);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = linesOf(res.text);
    await expectWhole(lines, aSessions);
    expect(lines.filter((l) => l.kind === 'event')).toHaveLength(2500 + 35 * 2 + 3 + 1); // + SessionEnd
    for (const s of bSessions) expect(res.text).not.toContain(s);
    expect(res.text).not.toMatch(/"id":"b\d-/);

    const other = linesOf((await exportOf(b.tenantId)).text);
    expect(
      other
        .filter((l) => l.kind === 'session')
        .map((l) => l.sessionId)
        .sort(),
    ).toEqual([...bSessions].sort());
    expect(other.at(-1)).toEqual({ kind: 'end', sessions: 3, events: 15 });
  });

  it('`since` keeps the sessions started at or after it', async () => {
    const res = await exportOf(a.tenantId, `?since=${encodeURIComponent(since)}`);
    expect(res.status).toBe(200);
    await expectWhole(linesOf(res.text), afterSince);
    const future = await exportOf(a.tenantId, '?since=2999-01-01T00:00:00Z');
    expect(linesOf(future.text)).toEqual([{ kind: 'end', sessions: 0, events: 0 }]);
  });

  it('unknown tenants are 404, bad inputs 400, and only the operator may export', async () => {
    const unknown = await exportOf('01890000-0000-7000-8000-000000000000');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'not_found' });
    for (const query of [
      '?since=yesterday',
      '?since=2026-13-01T00:00:00Z',
      '?since=',
      '?limit=5',
      '?since=1',
    ]) {
      const res = await exportOf(a.tenantId, query);
      expect(res.status, query).toBe(400);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
    }
    expect((await exportOf('not-a-uuid')).status).toBe(400);
    expect([401, 403]).toContain((await exportOf(a.tenantId, '', a.token)).status);
    expect((await exportOf(a.tenantId, '', 'nope-nope-nope-nope')).status).toBe(401);
  });

  it('`liveline admin export` writes the same NDJSON to a file or to standard output', async () => {
    const conn = ['--url', base, '--token', server.adminToken];
    const file = path.join(dir, 'a.ndjson');
    const toFile = await cli(['admin', 'export', '--tenant', a.tenantId, '--out', file, ...conn]);
    expect(toFile.code, toFile.stderr).toBe(0);
    expect(toFile.stderr).toContain(`Exported ${aSessions.length} sessions`);
    const http = (await exportOf(a.tenantId)).text;
    const written = fs.readFileSync(file, 'utf8');
    // `connected` is the live state at export time; everything else is identical.
    const strip = (t: string) => t.replace(/"connected":(true|false)/g, '');
    expect(strip(written)).toBe(strip(http));
    expect(fs.existsSync(`${file}.partial`)).toBe(false);

    const toStdout = await cli(['admin', 'export', '--tenant', a.tenantId, '--since', since, ...conn]);
    expect(toStdout.code, toStdout.stderr).toBe(0);
    await expectWhole(linesOf(toStdout.stdout), afterSince);

    const missing = path.join(dir, 'missing.ndjson');
    const unknown = await cli([
      'admin',
      'export',
      '--tenant',
      '01890000-0000-7000-8000-000000000000',
      '--out',
      missing,
      ...conn,
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not_found');
    expect(fs.existsSync(missing)).toBe(false);
    expect(fs.existsSync(`${missing}.partial`)).toBe(false);

    const badSince = await cli(['admin', 'export', '--tenant', a.tenantId, '--since', 'last week', ...conn]);
    expect(badSince.code).toBe(1);
    expect(badSince.stderr).toContain('validation_failed');
    const noTenant = await cli(['admin', 'export', ...conn]);
    expect(noTenant.code).not.toBe(0);
    expect(noTenant.stderr).toContain('--tenant');
  }, 60_000);
});
