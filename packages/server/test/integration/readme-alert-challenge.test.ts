// The README's alert and challenge walk-throughs (the challenge streams for a real minute), in a file of
// their own so that they run beside the other walk-throughs (readme.test.ts) rather than after them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALERT_MARKER,
  freePort,
  REWARDS_MARKER,
  type Run,
  runBash,
  UUID,
  walkthrough,
} from '../helpers/readme.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

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
  /** The walk-through ran across midnight in its campaign's zone (Europe/Berlin). */
  let overMidnight = false;

  beforeAll(async () => {
    server = await startTestServer(backend);
    const berlinDay = (t: number) =>
      new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin' }).format(new Date(t));
    const started = Date.now();
    // It streams for a real minute: the simulator is a separate process on the server's own clock.
    run = await runBash(walkthrough(REWARDS_MARKER), { BASE: server.url, ADMIN: server.adminToken }, true);
    overMidnight = berlinDay(started) !== berlinDay(Date.now());
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
    // A day counts with 60 s of streaming in it: the 61 s stream, split by Berlin's midnight, counts
    // on neither day (found by CI at 23:00 UTC). Otherwise it is one day, always.
    expect(out).toMatch(
      overMidnight
        ? /challenge DEVOTED: [01]\/3 \(uniqueDays\), not complete/
        : /challenge DEVOTED: 1\/3 \(uniqueDays\), not complete/,
    );
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
