import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessToken, call } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

const README = path.resolve(import.meta.dirname, '../../../../README.md');
const MARKER = '<!-- walkthrough -->';
const REALTIME_MARKER = '<!-- walkthrough-realtime -->';
const REWARDS_MARKER = '<!-- walkthrough-rewards -->';
const COHORT_MARKER = '<!-- walkthrough-cohort -->';
const WATCH_MARKER = '<!-- walkthrough-watch -->';
const ALERT_MARKER = '<!-- walkthrough-alert -->';
const ROOT = path.resolve(import.meta.dirname, '../../../..');
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

/** The fenced bash block right after the walk-through marker: the commands a reader copies. */
function walkthrough(marker = MARKER): string {
  const readme = fs.readFileSync(README, 'utf8');
  const match = new RegExp(`${marker}\\s*\`\`\`bash\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(readme);
  if (!match) throw new Error(`README.md has no \`\`\`bash block after ${marker}`);
  return match[1];
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the script with bash in an empty directory, as a reader's second terminal would. */
function runBash(script: string, env: Record<string, string>, inRepo = false): Promise<Run> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-readme-'));
  const file = path.join(dir, 'walkthrough.sh');
  fs.writeFileSync(file, script);
  return new Promise((resolve) => {
    execFile(
      'bash',
      [file],
      { cwd: inRepo ? ROOT : dir, env: { ...process.env, ...env }, timeout: 150_000 },
      (error, stdout, stderr) => {
        fs.rmSync(dir, { recursive: true, force: true });
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** A TCP port nobody listens on right now (for the walk-through's receiver). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** The first string value printed for `"key": "..."` (jq pretty-prints objects one key per line). */
function printed(out: string, key: string): string {
  const match = new RegExp(`"${key}":\\s*"([^"]+)"`).exec(out);
  if (!match) throw new Error(`the walk-through printed no ${key}:\n${out}`);
  return match[1];
}

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

describe.each(backends)('README alert walk-through: low battery to a local receiver (%s)', (backend) => {
  let server: TestServer;
  let run: Run;

  beforeAll(async () => {
    server = await startTestServer(backend, {
      LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
      LIVELINE_WEBHOOK_POLL_MS: '100',
    });
    const receiverPort = await freePort();
    run = await runBash(
      walkthrough(ALERT_MARKER),
      { BASE: server.url, ADMIN: server.adminToken, RECEIVER_PORT: String(receiverPort) },
      true,
    );
  }, 120_000);
  afterAll(async () => server?.close());

  it('runs to the end as written', () => {
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(0);
  });

  it('the receiver got alert.triggered for the headset once its battery fell under 15', () => {
    const out = run.stdout;
    expect(out).toMatch(
      new RegExp(
        `\\{"alertId":"${UUID}","name":"Low battery","eventType":"Health","field":"batteryLevel","op":"lt","value":15,"forSeconds":0,"cooldownSeconds":300\\}`,
      ),
    );
    expect(out).toMatch(/sim-1 {2}battery \d+(\.\d)?%/);
    const received = out.split('== What the receiver got\n')[1]?.split('\n') ?? [];
    const triggered = received.filter((line) => line.startsWith('alert.triggered '));
    expect(triggered).toHaveLength(1);
    const data = JSON.parse(triggered[0].slice('alert.triggered '.length)) as {
      name: string;
      playerId: string;
      event: { eventType: string; batteryLevel: number };
    };
    expect(data).toMatchObject({ name: 'Low battery', playerId: 'sim-1', event: { eventType: 'Health' } });
    expect(data.event.batteryLevel).toBeLessThan(15);
    expect(out).toMatch(
      new RegExp(`\\{"status":"open","sessionId":"${UUID}","playerId":"sim-1","notifications":1\\}`),
    );
  });
});

describe.each(backends)('README challenge walk-through: stream, claim, verify (%s)', (backend) => {
  let server: TestServer;
  let run: Run;

  beforeAll(async () => {
    server = await startTestServer(backend);
    // It streams for a real minute: the simulator is a separate process on the server's own clock.
    run = await runBash(walkthrough(REWARDS_MARKER), { BASE: server.url, ADMIN: server.adminToken }, true);
  }, 160_000);
  afterAll(async () => server?.close());

  it('runs to the end as written', () => {
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(0);
  });

  it('claims by all three methods and verifies each claim', () => {
    const out = run.stdout;
    expect(out).toMatch(/"imported":2/);
    expect(out).toMatch(/claimed FIRST_STREAM: display code [A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4} — "Show /);
    expect(out).toMatch(/claimed MINUTE_MAN: display code /);
    expect(out).toMatch(/challenge DEVOTED: 1\/3 \(uniqueDays\), not complete/);
    expect(out).toMatch(
      /claimed FIRST_STREAM: intent startActivity com\.acme\.game\/\.RedeemActivity data acme:\/\/redeem\?achievement=[A-Z0-9]{26}&reward=FIRST_STREAM/,
    );
    expect(out).toMatch(
      /claimed FIRST_STREAM: open https:\/\/shop\.acme\.example\/redeem\?achievement=[A-Z0-9]{26}&reward=FIRST_STREAM/,
    );
    const verified =
      out.match(
        /\{"claimId":\d+,"rewardCode":"FIRST_STREAM","playerId":"sim-1".*"alreadyVerified":(true|false)\}/g,
      ) ?? [];
    expect(verified.map((v) => v.endsWith('true}'))).toEqual([false, true, false, false]);
    expect(out).toMatch(/never issued is a 404\n404/);
  });
});
