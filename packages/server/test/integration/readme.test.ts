import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessToken, call } from '../helpers/api.ts';
import {
  COHORT_MARKER,
  printed,
  REALTIME_MARKER,
  type Run,
  runBash,
  UUID,
  WATCH_MARKER,
  walkthrough,
} from '../helpers/readme.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

describe.each(backends)('README walk-through (%s)', (backend) => {
  let server: TestServer;
  let run: Run;

  beforeAll(async () => {
    server = await startTestServer(backend);
    run = await runBash(walkthrough(), { BASE: server.url, ADMIN: server.adminToken });
  });
  afterAll(async () => server?.close());

  it('runs to the end as written', () => {
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(0);
  });

  it('prints what each step got', () => {
    const out = run.stdout;
    const sessionId = printed(out, 'sessionId');
    expect(sessionId).toMatch(new RegExp(`^${UUID}$`));
    expect(printed(out, 'realtimeUrl')).toBe(
      `ws://${new URL(server.url).host}/client/v1/sessions/${sessionId}/realtime`,
    );
    // The batch is stored once, then counted as duplicates.
    expect(out).toContain('{"accepted":4,"duplicates":0}');
    expect(out).toContain('{"accepted":0,"duplicates":4}');
    // The session with its events, the Health-only page, the active and cohort lists, the end.
    for (const id of ['evt-1', 'evt-2', 'evt-3', 'evt-4']) expect(out).toContain(`"id": "${id}"`);
    expect(out).toMatch(/"events": \[\s*\{\s*"id": "evt-1"[\s\S]*"id": "evt-4"[\s\S]*"nextCursor": null/);
    expect(out).toContain('"tenantCohortId": "class-7b"');
    expect(out).toMatch(/"totalCount": 1,\s*"sessions": \[\s*\{\s*"sessionId": "[^"]+",\s*"playerId"/);
    expect(out).toMatch(/"page": 1,\s*"pageSize": 10,\s*"totalCount": 1/);
    expect(out).toMatch(/"status": "ended"[\s\S]*"endReason": "device"/);
    expect(out).toMatch(/"eventType":"SessionEnd"[^\n]*"reason":"device"/);
    expect(out.split(sessionId).length - 1).toBeGreaterThanOrEqual(10);
  });

  it('left behind what it printed: the tenant can read the session it showed', async () => {
    const out = run.stdout;
    const token = await accessToken(server.url, printed(out, 'clientId'), printed(out, 'clientSecret'));
    const sessionId = printed(out, 'sessionId');
    const got = await call<{ status: string; tenantCohortId: string; events: { eventType: string }[] }>(
      server.url,
      'GET',
      `/sessions/${sessionId}`,
      { token },
    );
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ status: 'ended', tenantCohortId: 'class-7b', playerId: 'player-42' });
    expect(got.body.events.map((e) => e.eventType)).toEqual([
      'Health',
      'Progression',
      'Custom',
      'Health',
      'SessionEnd',
    ]);
  });
});

describe.each(backends)('README realtime walk-through with the simulator (%s)', (backend) => {
  let server: TestServer;
  let run: Run;

  beforeAll(async () => {
    server = await startTestServer(backend);
    // From the repository root, as the README says (`npm run liveline` lives there).
    run = await runBash(walkthrough(REALTIME_MARKER), { BASE: server.url, ADMIN: server.adminToken }, true);
  }, 90_000);
  afterAll(async () => server?.close());

  it('runs to the end as written', () => {
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(0);
  });

  it('the headset printed each of the seven commands, and each was acknowledged', () => {
    const out = run.stdout;
    for (const line of [
      /sim-1 {2}stream\.start 1080p 16:9 stream /,
      /sim-1 {2}record\.start recording /,
      /sim-1 {2}camera fieldOfView=90 cameraView=ThirdPerson/,
      /sim-1 {2}text "Welcome to the demo!"/,
      /sim-1 {2}difficulty level=3 hardcore=true speed=1\.5/,
      /sim-1 {2}record\.stop/,
      /sim-1 {2}stream\.stop/,
    ]) {
      expect(out).toMatch(line);
    }
    const statuses = out.match(/\{"name":"[^"]+","status":"acknowledged"\}/g) ?? [];
    expect(statuses).toHaveLength(7);
    expect(out).toMatch(/"eventType":"StreamStarted"/);
    expect(out).toMatch(/"eventType":"StreamStopped","streamingSessionId":"[^"]+","reason":"command"/);
  });
});

describe.each(backends)('README cohort-wide command walk-through with the simulator (%s)', (backend) => {
  let server: TestServer;
  let run: Run;

  beforeAll(async () => {
    server = await startTestServer(backend);
    run = await runBash(walkthrough(COHORT_MARKER), { BASE: server.url, ADMIN: server.adminToken }, true);
  }, 90_000);
  afterAll(async () => server?.close());

  it('runs to the end as written', () => {
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(0);
  });

  it('the twenty headsets got the command and acknowledged it; the batch counts them', () => {
    const out = run.stdout;
    expect(out).toMatch(
      new RegExp(
        `\\{"batchId":"${UUID}","total":20,"accepted":20,"refused":0,"first":\\{"sessionId":"${UUID}","commandId":"${UUID}","status":"delivered"\\}\\}`,
      ),
    );
    expect(out).toContain(
      '{"total":20,"accepted":20,"refused":0,"counts":{"queued":0,"delivered":0,"acknowledged":20,"failed":0,"expired":0,"cancelled":0}}',
    );
    expect(out).toMatch(/sim-\d+ {2}text "Welcome, class 7B!"/);
  });
});

describe.each(backends)('README watch-live walk-through: curl -N and liveline tail (%s)', (backend) => {
  let server: TestServer;
  let run: Run;

  beforeAll(async () => {
    server = await startTestServer(backend);
    run = await runBash(walkthrough(WATCH_MARKER), { BASE: server.url, ADMIN: server.adminToken }, true);
  }, 90_000);
  afterAll(async () => server?.close());

  it('runs to the end as written', () => {
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(0);
  });

  it('curl gets the Health events as SSE, and resumes after the last id with the ones stored meanwhile', () => {
    const out = run.stdout;
    const [stream, rest] = out.split('== Reconnecting with Last-Event-ID');
    expect(stream).toContain('retry: 1000');
    expect(stream).toMatch(/^id: [A-Za-z0-9_-]+$/m);
    expect(stream).toMatch(/^event: Health$/m);
    expect(stream).toMatch(/^data: \{.*"eventType":"Health"/m);
    const resumed = rest.split('== liveline tail')[0];
    expect(resumed).toMatch(/^event: Health$/m);
  });

  it('liveline tail prints a line per event and the headset leaving', () => {
    const tail = run.stdout.split('== liveline tail')[1];
    expect(tail).toContain('liveline tail: following cohort class-7b');
    expect(tail).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3}  Health +${UUID}  .*batteryLevel=`, 'm'));
    expect(tail).toMatch(new RegExp(`^\\S+  session\\.ended +${UUID}  player=\\S+ cohort=class-7b$`, 'm'));
    expect(tail).not.toContain('\u001b[');
  });
});
