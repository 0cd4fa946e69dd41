/**
 * `liveline sim` as a user runs it: a real process against a real server, commands sent with the
 * tenant API, and Ctrl-C (SIGINT) ending the sessions.
 */
import { type ChildProcess, execFile } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, type TenantFixture } from '../helpers/api.ts';
import { baseEnv, CLI, ROOT, spawnCli } from '../helpers/process.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

interface Sim {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<number | null>;
}

function startSim(args: string[], env: Record<string, string>): Sim {
  const { child, stdout, stderr, exited } = spawnCli(['sim', ...args], env);
  return { child, stdout, stderr, exited: exited.then(({ code }) => code) };
}

async function waitFor(condition: () => boolean, what: () => string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting; output so far:\n${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(backends)('liveline sim (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  const running: Sim[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_COMMAND_SWEEP_MS: '100' });
    tenant = await createTenant(server.url, server.adminToken);
  });
  afterEach(() => {
    for (const sim of running.splice(0)) if (sim.child.exitCode === null) sim.child.kill('SIGKILL');
  });
  afterAll(async () => server?.close());

  it('starts headsets, prints and acknowledges a command sent to one, reports health; Ctrl-C ends the sessions', async () => {
    const sim = startSim(['--devices', '2', '--url', server.url, '--health-interval', '0.2'], {
      LIVELINE_CLIENT_ID: tenant.clientId,
      LIVELINE_CLIENT_SECRET: tenant.clientSecret,
    });
    running.push(sim);
    const log = () => `${sim.stdout()}\n${sim.stderr()}`;
    const sessionLine = new RegExp(`^(sim-\\d+)  session (${UUID})$`, 'gm');
    await waitFor(() => [...sim.stdout().matchAll(sessionLine)].length === 2, log);
    const sessions = new Map([...sim.stdout().matchAll(sessionLine)].map((m) => [m[1], m[2]]));
    expect([...sessions.keys()].sort()).toEqual(['sim-1', 'sim-2']);
    expect(sim.stdout()).toContain(`liveline sim: 2 headsets on ${server.url}`);
    expect(sim.stdout()).toContain(`curl -X POST ${server.url}/sessions/`);
    const sessionId = sessions.get('sim-2') ?? '';

    const sent = await call<Json>(server.url, 'POST', `/sessions/${sessionId}/realtime/commands`, {
      token: tenant.token,
      json: { name: 'text', data: 'hello from the test' },
    });
    expect(sent.status).toBe(202);
    // Written to the socket at once (the sim may even have acknowledged it by the time of the answer).
    expect(['delivered', 'acknowledged']).toContain(sent.body.status);
    await waitFor(
      () =>
        sim
          .stdout()
          .includes(`${sessionId} sim-2  text "hello from the test"  [${String(sent.body.commandId)}]`),
      log,
    );
    await expect
      .poll(
        async () =>
          (
            await call<Json>(
              server.url,
              'GET',
              `/sessions/${sessionId}/realtime/commands/${String(sent.body.commandId)}`,
              { token: tenant.token },
            )
          ).body.status,
        { timeout: 5000 },
      )
      .toBe('acknowledged');

    const custom = await call<Json>(server.url, 'POST', `/sessions/${sessionId}/realtime/commands`, {
      token: tenant.token,
      json: {
        name: 'jump',
        data: { names: ['height', 'twice'], types: ['float', 'bool'], values: ['2.5', 'true'] },
      },
    });
    await waitFor(() => sim.stdout().includes(`${sessionId} sim-2  jump height=2.5 twice=true`), log);
    const stream = await call<Json>(server.url, 'POST', `/sessions/${sessionId}/realtime/commands/stream`, {
      token: tenant.token,
      json: { resolution: 2, aspectratio: 0 },
    });
    await waitFor(() => sim.stdout().includes(`${sessionId} sim-2  stream.start 1080p 16:9`), log);
    await expect
      .poll(
        async () =>
          (
            (await call<Json>(server.url, 'GET', `/sessions/${sessionId}`, { token: tenant.token })).body
              .stream as Json
          ).state,
      )
      .toBe('streaming');
    expect(custom.status).toBe(202);
    expect(stream.status).toBe(202);

    // Health events arrive every 0.2 s (the SDK sends them within its flush interval).
    await expect
      .poll(
        async () => {
          const session = await call<Json>(server.url, 'GET', `/sessions/${sessionId}`, {
            token: tenant.token,
          });
          return (session.body.events as Json[]).filter((e) => e.eventType === 'Health').length;
        },
        { timeout: 10_000 },
      )
      .toBeGreaterThan(0);

    sim.child.kill('SIGINT');
    expect(await sim.exited).toBe(0);
    expect(sim.stdout()).toContain(`${sessionId} sim-2  session ended`);
    for (const id of sessions.values()) {
      const session = await call<Json>(server.url, 'GET', `/sessions/${id}`, { token: tenant.token });
      expect(session.body).toMatchObject({ status: 'ended', connected: false });
    }
  });

  it('drains the battery at --battery-drain from --battery-start, and prints it passing each 10 %', async () => {
    const sim = startSim(
      [
        '--devices',
        '1',
        '--url',
        server.url,
        '--health-interval',
        '0.2',
        '--battery-start',
        '30',
        '--battery-drain',
        '600',
      ],
      { LIVELINE_CLIENT_ID: tenant.clientId, LIVELINE_CLIENT_SECRET: tenant.clientSecret },
    );
    running.push(sim);
    const log = () => `${sim.stdout()}\n${sim.stderr()}`;
    const sessionLine = new RegExp(`^sim-1  session (${UUID})$`, 'm');
    await waitFor(() => sessionLine.test(sim.stdout()), log);
    const sessionId = sim.stdout().match(sessionLine)?.[1] ?? '';
    // 10 % a second from 30: under 15 after 1.5 s, 0 after 3 s.
    await waitFor(() => sim.stdout().includes(`${sessionId} sim-1  battery 0%`), log, 10_000);
    const lines = [...sim.stdout().matchAll(/ sim-1 {2}battery ([\d.]+)%$/gm)].map((m) => Number(m[1]));
    expect(lines.length).toBe(3); // past 20, past 10, and 0
    expect(lines[0]).toBeLessThanOrEqual(20);
    expect(lines[1]).toBeLessThanOrEqual(10);

    const levels = async () => {
      const session = await call<Json>(server.url, 'GET', `/sessions/${sessionId}`, { token: tenant.token });
      return (session.body.events as Json[])
        .filter((e) => e.eventType === 'Health')
        .map((e) => e.batteryLevel as number);
    };
    await expect.poll(async () => (await levels()).at(-1), { timeout: 10_000 }).toBe(0);
    const seen = await levels();
    expect(seen[0]).toBeLessThanOrEqual(30);
    expect(seen[0]).toBeGreaterThan(15);
    expect(seen.some((level) => level > 0 && level < 15)).toBe(true);
    expect(seen).toEqual([...seen].sort((a, b) => b - a)); // never goes up

    sim.child.kill('SIGINT');
    expect(await sim.exited).toBe(0);
  });

  it('Ctrl-C leaves within ten seconds when the server is gone, saying the sessions did not end', async () => {
    const gone = await startTestServer(backend);
    const other = await createTenant(gone.url, gone.adminToken);
    const sim = startSim(['--devices', '1', '--url', gone.url, '--health-interval', '0.2'], {
      LIVELINE_CLIENT_ID: other.clientId,
      LIVELINE_CLIENT_SECRET: other.clientSecret,
    });
    running.push(sim);
    const log = () => `${sim.stdout()}\n${sim.stderr()}`;
    await waitFor(() => /^sim-1 {2}session /m.test(sim.stdout()), log);
    await gone.close();
    // Health events tracked meanwhile wait in the SDK's buffer, to be sent when the server is back.
    await new Promise((r) => setTimeout(r, 1500));
    sim.child.kill('SIGINT');
    // Before: the ending retried its requests against the closed server for as long as it ran (the
    // README walk-throughs left such headsets running after their server had stopped).
    const code = await Promise.race([
      sim.exited,
      new Promise((r) => setTimeout(() => r('still running'), 20_000)),
    ]);
    expect(code, log()).toBe(1);
    expect(sim.stderr()).toMatch(/the sessions did not end within \d+ s/);
    // Its own bounds are the ones above (the sim up within 20 s, out within 20 s of Ctrl-C, of which it
    // waits 10 s for the server): vitest's 30 s default ended it first on a loaded CI machine.
  }, 60_000);

  it('refuses a battery drain or start out of range', async () => {
    const sim = startSim(['--url', server.url, '--battery-drain', '0'], {});
    running.push(sim);
    expect(await sim.exited).not.toBe(0);
    expect(sim.stderr()).toContain("option '--battery-drain <percent per minute>' argument '0' is invalid");
    const start = startSim(['--url', server.url, '--battery-start', '101'], {});
    running.push(start);
    expect(await start.exited).not.toBe(0);
    expect(start.stderr()).toContain('It must be a number from 0 to 100.');
  });

  it('says what it needs when it has no tenant credentials, and reports bad ones', async () => {
    const run = (args: string[], env: Record<string, string>) =>
      new Promise<{ code: number; stderr: string }>((resolve) => {
        execFile(
          process.execPath,
          [...CLI, 'sim', ...args],
          { cwd: ROOT, env: baseEnv(env) },
          (error, _out, stderr) =>
            resolve({
              code: error ? (typeof error.code === 'number' ? error.code : 1) : 0,
              stderr: String(stderr),
            }),
        );
      });
    const none = await run(['--url', server.url], {});
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^no_credentials: .*--client-id/);
    const bad = await run(
      ['--url', server.url, '--client-id', tenant.clientId, '--client-secret', 'nope'],
      {},
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^invalid_client: /);
  });
});
