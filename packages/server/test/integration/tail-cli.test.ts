import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { cli, spawnCli } from '../helpers/process.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

const ESC = '\u001b[';

/** `liveline tail` as a real process against a real server. */
describe.each(backends)('liveline tail (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  const running: ReturnType<typeof spawnCli>[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend, {
      LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
      LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
    });
    tenant = await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => {
    for (const p of running) p.child.kill('SIGKILL');
    await server?.close();
  });

  async function device(cohort?: string) {
    const playerId = `p-${randomUUID()}`;
    const token = await deviceToken(server.url, tenant.token, playerId, cohort);
    const res = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(res.status).toBe(201);
    return { token, playerId, sessionId: String(res.body.sessionId) };
  }

  async function ingest(d: { token: string; sessionId: string }, events: Record<string, unknown>[]) {
    const res = await call(server.url, 'POST', `/sessions/${d.sessionId}/Events`, {
      token: d.token,
      json: { events: events.map((e, i) => ({ timestamp: Date.now() - i, ...e })) },
    });
    expect(res.status, res.text).toBe(200);
  }

  /** Starts `liveline tail <args>` and waits until its stream is open. */
  async function tail(args: string[], env: Record<string, string> = {}) {
    const p = spawnCli(['tail', ...args], {
      LIVELINE_URL: server.url,
      LIVELINE_CLIENT_ID: tenant.clientId,
      LIVELINE_CLIENT_SECRET: tenant.clientSecret,
      ...env,
    });
    running.push(p);
    await waitFor(() => p.stderr().includes('liveline tail: following'), 'the stream to open', p, 45_000);
    // The server's reader is registered once the answer's head is out; a moment for its poller to start.
    await new Promise((r) => setTimeout(r, 300));
    return p;
  }

  async function waitFor(check: () => boolean, what: string, p: ReturnType<typeof spawnCli>, ms = 15_000) {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${what}\nstdout:\n${p.stdout()}\nstderr:\n${p.stderr()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  const lines = (p: ReturnType<typeof spawnCli>) => p.stdout().split('\n').filter(Boolean);

  it('prints one plain line per event when stdout is not a terminal, and stops on SIGINT', async () => {
    const d = await device();
    const p = await tail(['--session', d.sessionId]);
    await ingest(d, [
      { id: 'h-1', eventType: 'Health', batteryLevel: 75.5, fps: 72 },
      { id: 'c-1', eventType: 'Custom', custom01: 'two words' },
    ]);
    await waitFor(() => lines(p).length >= 2, 'two lines', p);
    // A batch is stored in event id order, not as sent.
    const health = lines(p).find((l) => l.includes('Health')) ?? '';
    const custom = lines(p).find((l) => l.includes('Custom')) ?? '';
    expect(p.stdout()).not.toContain(ESC);
    expect(health).toMatch(/^\d\d:\d\d:\d\d\.\d{3} {2}Health {2,}/);
    expect(health).toContain(`  ${d.sessionId}  `);
    expect(health).toContain('batteryLevel=75.5');
    expect(health).toContain('fps=72');
    expect(health).toMatch(/ id=h-1$/);
    expect(custom).toContain('custom01="two words"');
    p.child.kill('SIGINT');
    expect(await p.exited).toEqual({ code: 0, signal: null });
  });

  it('colours by kind and Error events by severity with FORCE_COLOR, filtered by --cohort and --type', async () => {
    const cohort = `c-${randomUUID()}`;
    const p = await tail(['--cohort', cohort, '--type', 'Error', '--type', 'session.started'], {
      FORCE_COLOR: '1',
    });
    const d = await device(cohort);
    const outside = await device();
    await ingest(outside, [{ id: 'x', eventType: 'Error', severity: 'Critical', message: 'elsewhere' }]);
    await ingest(d, [
      { id: 'e-1', eventType: 'Error', severity: 'Critical', message: 'GPU lost' },
      { id: 'c-1', eventType: 'Custom', custom01: 'not shown' },
      { id: 'e-2', eventType: 'Error', severity: 'Warning', message: 'low memory' },
    ]);
    await waitFor(() => lines(p).length >= 3, 'three lines', p);
    const started = lines(p)[0];
    const critical = lines(p).find((l) => l.includes('Critical')) ?? '';
    const warning = lines(p).find((l) => l.includes('Warning')) ?? '';
    expect(started).toContain(`${ESC}1;32msession.started`);
    expect(started).toContain(`player=${d.playerId} cohort=${cohort}`);
    expect(critical).toContain(`${ESC}1;97;41mError`);
    expect(critical).toContain('severity=Critical message="GPU lost"');
    expect(warning).toContain(`${ESC}33mError`);
    expect(p.stdout()).not.toContain('not shown');
    expect(p.stdout()).not.toContain('elsewhere');
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
  });

  it('--json prints the messages as NDJSON, events with their id and presence without', async () => {
    const cohort = `c-${randomUUID()}`;
    const p = await tail(['--cohort', cohort, '--json'], { FORCE_COLOR: '1' });
    const d = await device(cohort);
    await ingest(d, [{ id: 'j-1', eventType: 'Custom', custom01: 'a' }]);
    await waitFor(() => lines(p).length >= 2, 'two lines', p);
    const [started, event] = lines(p).map((l) => JSON.parse(l));
    expect(started).toEqual({
      kind: 'session.started',
      data: { sessionId: d.sessionId, playerId: d.playerId, tenantCohortId: cohort, at: expect.any(Number) },
    });
    expect(event).toMatchObject({
      kind: 'event',
      id: expect.any(String),
      eventType: 'Custom',
      event: { id: 'j-1', sessionId: d.sessionId, custom01: 'a' },
    });
    p.child.kill('SIGINT');
    await p.exited;

    // --last-event-id resumes after an id printed by --json.
    await ingest(d, [{ id: 'j-2', eventType: 'Custom', custom01: 'b' }]);
    const again = await tail(['--session', d.sessionId, '--json', '--last-event-id', event.id]);
    await waitFor(() => lines(again).length >= 1, 'the event stored meanwhile', again);
    expect(JSON.parse(lines(again)[0])).toMatchObject({ kind: 'event', event: { id: 'j-2' } });
    again.child.kill('SIGINT');
    await again.exited;
  });

  it('exits 1 with the problem code on a refusal or without credentials', async () => {
    const unknown = await cli(['tail', '--session', randomUUID()], {
      LIVELINE_URL: server.url,
      LIVELINE_ACCESS_TOKEN: tenant.token,
    });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not_found: No such session.');
    const none = await cli(['tail'], { LIVELINE_URL: server.url });
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no_credentials:');
    const both = await cli(['tail', '--session', 'a', '--cohort', 'b'], { LIVELINE_URL: server.url });
    expect(both.stderr).toContain('invalid_arguments:');
  });
});
