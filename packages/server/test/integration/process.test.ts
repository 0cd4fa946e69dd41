import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/api.ts';
import {
  cli,
  type Env,
  exitWithin,
  freePort,
  logLines,
  type ServerProcess,
  sleep,
  startProcess,
} from '../helpers/process.ts';
import { type Backend, backends, freshStore } from '../helpers/server.ts';

describe.each(backends)('liveline process (%s)', (backend: Backend) => {
  const running: ServerProcess[] = [];
  const stores: ReturnType<typeof freshStore>[] = [];
  const store = () => {
    const s = freshStore(backend);
    stores.push(s);
    return s;
  };
  const start = async (env: Env) => {
    const p = await startProcess(env);
    running.push(p);
    return p;
  };
  // Each test's store goes as soon as the test ends: Kysely's migrator looks for its own tables in
  // every PostgreSQL schema, so a schema left behind can make the next test's migrations fail.
  afterEach(async () => {
    for (const p of running.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      await p.exited;
    }
    for (const s of stores.splice(0)) await s.destroy();
  });

  it('generates the operator token at first start, prints it once and keeps it', async () => {
    const s = store();
    const first = await start(s.env);
    const match = /^ {4}(lla_\S+)$/m.exec(first.stdout());
    expect(match, first.stdout()).not.toBeNull();
    const token = String(match?.[1]);
    const file = path.join(s.dataDir, 'admin-token');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(file, 'utf8').trim()).toBe(token);
    expect(first.stdout()).toContain(file);
    expect(first.stdout().split(token)).toHaveLength(2);
    expect(logLines(first.stdout()).filter((l) => l.includes(token))).toEqual([]);
    const created = await call(first.url, 'POST', '/admin/v1/tenants', { token, json: { name: 'Kept' } });
    expect(created.status).toBe(201);
    first.child.kill('SIGTERM');
    expect((await exitWithin(first, 10_000)).code).toBe(0);

    const second = await start(s.env);
    expect(second.stdout()).not.toContain(token);
    expect(second.stdout()).not.toContain('generated an operator');
    const list = await call(second.url, 'GET', '/admin/v1/tenants', { token });
    expect(list.status).toBe(200);
    expect(list.body.tenants).toEqual([created.body]);
    second.child.kill('SIGINT');
    expect((await exitWithin(second, 10_000)).code).toBe(0);
    expect(second.stderr()).toBe('');
  }, 90_000); // two server processes, each loading TypeScript: slow on a busy machine

  it('on SIGTERM finishes the request in flight, then exits 0 within 10 s', async () => {
    const p = await start({ ...store().env, LIVELINE_ADMIN_TOKEN: 'process-test-admin-token' });
    expect((await call(p.url, 'GET', '/healthz')).status).toBe(200);

    // A request whose body is still arriving when the signal comes.
    const { port } = new URL(p.url);
    const body = JSON.stringify({ name: 'Late tenant' });
    const answer = new Promise<{ status: number; body: string; connection?: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/admin/v1/tenants',
          headers: {
            authorization: 'Bearer process-test-admin-token',
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (d: string) => {
            text += d;
          });
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }),
          );
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 5));
      setTimeout(async () => {
        p.child.kill('SIGTERM');
        while (!p.stdout().includes('"msg":"shutting down"')) await sleep(20);
        await sleep(100);
        req.end(body.slice(5));
      }, 300);
    });
    const done = await answer;
    expect(done.status).toBe(201);
    expect(JSON.parse(done.body)).toMatchObject({ name: 'Late tenant' });
    // The keep-alive connection is closed with it, so the client cannot hold the shutdown open.
    expect(done.connection).toBe('close');

    const exit = await exitWithin(p, 10_000);
    expect(exit.code).toBe(0);
    expect(exit.elapsedMs).toBeLessThan(3_000);
    expect(p.stdout()).toContain('"msg":"stopped"');
    // Nothing listens any more.
    await expect(fetch(`${p.url}/healthz`)).rejects.toThrow();
  }, 90_000); // two server processes, each loading TypeScript: slow on a busy machine

  it('logs one line a request, when it completes, within a moment, and the last ones on exit', async () => {
    const p = await start({ ...store().env, LIVELINE_ADMIN_TOKEN: 'process-test-admin-token' });
    const lineOf = (id: string) =>
      logLines(p.stdout())
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.reqId === id);
    const ok = await fetch(`${p.url}/healthz`, { headers: { 'x-request-id': 'log-healthz' } });
    expect(ok.status).toBe(200);
    // Written within a moment although the server is otherwise quiet (the log buffer is flushed often).
    const until = Date.now() + 5_000;
    while (lineOf('log-healthz').length === 0 && Date.now() < until) await sleep(20);
    expect(lineOf('log-healthz')).toEqual([
      expect.objectContaining({
        msg: 'request completed',
        req: { id: 'log-healthz', method: 'GET', url: '/healthz' },
        res: { statusCode: 200 },
        responseTime: expect.any(Number),
      }),
    ]);
    const refused = await fetch(`${p.url}/admin/v1/tenants?access_token=never-logged`, {
      headers: { 'x-request-id': 'log-refused' },
    });
    expect(refused.status).toBe(401);
    p.child.kill('SIGTERM');
    expect((await exitWithin(p, 10_000)).code).toBe(0);
    // The last line came out before the exit; the token in the query did not.
    expect(lineOf('log-refused')).toEqual([
      expect.objectContaining({
        msg: 'request completed',
        req: { id: 'log-refused', method: 'GET', url: '/admin/v1/tenants?access_token=[redacted]' },
        res: { statusCode: 401 },
      }),
    ]);
    expect(p.stdout()).not.toContain('never-logged');
    expect(p.stdout()).not.toContain('incoming request');
  }, 90_000);

  it('runs the admin CLI against the running server', async () => {
    const s = store();
    const p = await start(s.env);
    const token = fs.readFileSync(path.join(s.dataDir, 'admin-token'), 'utf8').trim();
    const url = ['--url', p.url];

    // The token comes from <data dir>/admin-token.
    const created = await cli(['admin', 'tenant', 'create', 'Acme Corp', ...url, '--json'], {
      LIVELINE_DATA_DIR: s.dataDir,
    });
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const tenant = JSON.parse(created.stdout) as { tenantId: string; name: string };
    expect(tenant.name).toBe('Acme Corp');

    // ... or from LIVELINE_ADMIN_TOKEN, with the URL from LIVELINE_URL, through the bin script.
    const listed = await cli(
      ['admin', 'tenant', 'list'],
      { LIVELINE_ADMIN_TOKEN: token, LIVELINE_URL: p.url },
      { bin: true },
    );
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^TENANT ID\s+NAME\s+CREATED$/m);
    expect(listed.stdout).toMatch(new RegExp(`^${tenant.tenantId}\\s+Acme Corp\\s+\\d{4}-`, 'm'));

    // ... or from --token.
    const client = await cli([
      'admin',
      'client',
      'create',
      tenant.tenantId,
      '--name',
      'ci',
      '--scopes',
      'sessions:read,tokens:issue',
      '--token',
      token,
      ...url,
    ]);
    expect(client.code).toBe(0);
    expect(client.stderr).toMatch(/will not be shown again/);
    const clientId = /^clientId\s+(\S+)$/m.exec(client.stdout)?.[1];
    const clientSecret = /^clientSecret\s+(\S+)$/m.exec(client.stdout)?.[1];
    expect(clientId).toMatch(/^[0-9a-f-]{36}$/);
    expect(clientSecret).toBeTruthy();
    expect(client.stdout).toMatch(/^scopes\s+sessions:read tokens:issue$/m);
    const tokenRequest = () =>
      fetch(`${p.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: String(clientId),
          client_secret: String(clientSecret),
        }).toString(),
      });
    const granted = await tokenRequest();
    expect(granted.status).toBe(200);
    expect(await granted.json()).toMatchObject({ scope: 'sessions:read tokens:issue' });

    const env = { LIVELINE_DATA_DIR: s.dataDir };
    const clients = await cli(['admin', 'client', 'list', tenant.tenantId, ...url, '--json'], env);
    expect(clients.code).toBe(0);
    expect(clients.stdout).not.toContain(String(clientSecret));
    expect(JSON.parse(clients.stdout)).toMatchObject({
      clients: [{ clientId, name: 'ci', revokedAt: null }],
    });

    const revoked = await cli(['admin', 'client', 'revoke', tenant.tenantId, String(clientId), ...url], env);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toContain(`Revoked client ${clientId}`);
    expect((await tokenRequest()).status).toBe(401);
    const table = await cli(['admin', 'client', 'list', tenant.tenantId, ...url], env);
    expect(table.stdout).toMatch(
      new RegExp(`^${clientId}\\s+ci\\s+sessions:read,tokens:issue\\s+\\S+\\s+\\d{4}-`, 'm'),
    );

    // Errors: the problem's code and detail on stderr, exit 1.
    const again = await cli(['admin', 'client', 'revoke', tenant.tenantId, String(clientId), ...url], env);
    expect(again).toMatchObject({ code: 1, stdout: '', stderr: 'not_found: No such client.\n' });
    const badScope = await cli(
      ['admin', 'client', 'create', tenant.tenantId, '--scopes', 'root', ...url],
      env,
    );
    expect(badScope.code).toBe(1);
    expect(badScope.stderr).toMatch(/^validation_failed: .*scopes\[0\] must be one of/);
    const wrongToken = await cli(['admin', 'tenant', 'list', '--token', 'not-the-operator-token', ...url]);
    expect(wrongToken.code).toBe(1);
    expect(wrongToken.stderr).toMatch(/^unauthorized: /);

    p.child.kill('SIGTERM');
    expect((await exitWithin(p, 10_000)).code).toBe(0);
  }, 120_000); // about a dozen CLI processes: slow on a busy machine
});

describe('liveline CLI without a server', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-cli-'));
  });
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('exits 2 with a clear message on a bad configuration', async () => {
    const bad = await cli(['start'], { PORT: 'abc', LIVELINE_DATA_DIR: dataDir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('liveline: invalid configuration: PORT must be an integer, got "abc"\n');
    expect(bad.stdout).toBe('');
    const flag = await cli(['start', '--port', '70000'], { LIVELINE_DATA_DIR: dataDir });
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('PORT must be between 0 and 65535');
    // Nothing was created for a start that never happened.
    expect(fs.readdirSync(dataDir)).toEqual([]);
  });

  it('reports an unreachable server and a missing token', async () => {
    const port = await freePort();
    const unreachable = await cli([
      'admin',
      'tenant',
      'list',
      '--url',
      `http://127.0.0.1:${port}`,
      '--token',
      'x'.repeat(20),
    ]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toBe(
      `connection_failed: Could not reach http://127.0.0.1:${port}: ECONNREFUSED.\n`,
    );
    const noToken = await cli(['admin', 'tenant', 'list'], { LIVELINE_DATA_DIR: dataDir });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toMatch(/^no_admin_token: /);
    const usage = await cli(['admin', 'tenant', 'create']);
    expect(usage.code).toBe(1);
    expect(usage.stderr).toContain("missing required argument 'name'");
  });
});
