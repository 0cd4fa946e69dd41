import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken } from '../../server/test/helpers/api.ts';
import { freePort } from '../../server/test/helpers/process.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers/server.ts';

const PACKAGE = path.resolve(import.meta.dirname, '..');

/** The receiver of the README, exactly as written: it must print the events a headset sends. */
function receiverSource(): string {
  const readme = fs.readFileSync(path.join(PACKAGE, 'README.md'), 'utf8');
  const match = /<!-- receiver -->\s*```ts\n([\s\S]*?)\n```\n/.exec(readme);
  if (!match) throw new Error('README.md has no ```ts block after <!-- receiver -->');
  return match[1];
}

describe('the README receiver', () => {
  const servers: TestServer[] = [];
  const children: ChildProcess[] = [];
  const files: string[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    for (const s of servers.splice(0)) await s.close();
    for (const f of files.splice(0)) fs.rmSync(f, { force: true });
  });

  it('prints verified events and refuses a forged one', async () => {
    const server = await startTestServer('sqlite', { LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true' });
    servers.push(server);
    const tenant = await createTenant(server.url, server.adminToken);
    const port = await freePort();
    // Inside the package, so `@liveline/tenant` resolves as it does for a user of the workspace.
    const file = path.join(PACKAGE, `.readme-receiver-${process.pid}.ts`);
    files.push(file);
    fs.writeFileSync(file, receiverSource());
    const hook = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: `http://127.0.0.1:${port}/` },
    });
    expect(hook.status).toBe(201);

    let out = '';
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: PACKAGE,
      env: { ...process.env, PORT: String(port), LIVELINE_WEBHOOK_SECRET: String(hook.body.secret) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    const until = async (text: string) => {
      for (let i = 0; i < 400 && !out.includes(text); i++) await new Promise((r) => setTimeout(r, 25));
      expect(out).toContain(text);
    };
    await until('receiver listening');

    const token = await deviceToken(server.url, tenant.token, 'readme-player', 'class-7b');
    const session = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    const sessionId = String(session.body.sessionId);
    await call(server.url, 'POST', `/sessions/${sessionId}/Events`, {
      token,
      json: { events: [{ id: 'h1', eventType: 'Health', timestamp: Date.now(), fps: 72 }] },
    });
    await until(`Health session=${sessionId} cohort=class-7b`);

    const forged = await fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: {
        'webhook-id': 'x',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': 'v1,AAAA',
      },
      body: '{"type":"session.event"}',
    });
    expect(forged.status).toBe(400);
    await until('refused: No matching signature found');
  });
});
