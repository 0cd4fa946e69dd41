import { afterEach, describe, expect, it } from 'vitest';
import { LivelineError } from '../src/index.ts';
import { assertSocketOrigin } from '../src/origin.ts';
import { FakeLiveline, fakeLivelineFixture } from './fake-liveline.ts';

/**
 * The device SDK opens its realtime socket only at the origin of its `baseUrl` (`ws`↔`http`,
 * `wss`↔`https`): a `realtimeUrl` naming another host (say, built by a server from a forged `Host`
 * header) gets a clear error, and the device token never travels there.
 */
const fx = fakeLivelineFixture();
const others: FakeLiveline[] = [];
afterEach(async () => {
  for (const other of others.splice(0)) await other.stop();
});

async function otherServer(): Promise<FakeLiveline> {
  const other = await FakeLiveline.start();
  others.push(other);
  return other;
}

describe('the realtime socket stays at the base URL’s origin', () => {
  it('refuses a realtimeUrl on another host: connect() rejects, the other server sees nothing', async () => {
    const attacker = await otherServer();
    fx.fake.realtimeBase = attacker.baseUrl.replace(/^http/, 'ws');
    const d = fx.device();
    const errors: unknown[] = [];
    d.on('error', (e) => errors.push(e));
    const info = await d.startSession();
    expect(info.realtimeUrl.startsWith(fx.fake.realtimeBase)).toBe(true);

    const refused = await d.connect().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LivelineError);
    expect(refused).toMatchObject({ status: 0, code: 'realtime_origin_mismatch', retryable: false });
    expect((refused as LivelineError).detail).toContain(attacker.baseUrl);
    expect((refused as LivelineError).detail).toContain(fx.fake.baseUrl);
    expect(d.connected).toBe(false);
    // Nothing was opened anywhere, and nothing is retried later.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(attacker.upgradeAttempts).toHaveLength(0);
    expect(fx.fake.upgradeAttempts).toHaveLength(0);
    // Events still go over HTTP to the base URL.
    d.track({ eventType: 'Custom', custom01: 'still here' });
    await d.flush();
    expect(fx.fake.storedIds(info.sessionId)).toHaveLength(1);
    expect(attacker.requests).toHaveLength(0);
  });

  it('refuses a resumed session whose realtimeUrl points elsewhere', async () => {
    const attacker = await otherServer();
    const d = fx.device();
    d.resumeSession({
      sessionId: '0190a3c2-7b7e-7c3e-8f00-0000000000aa',
      realtimeUrl: `${attacker.baseUrl.replace(/^http/, 'ws')}/client/v1/sessions/x/realtime`,
      heartbeatIntervalMs: 15_000,
    });
    await expect(d.connect()).rejects.toMatchObject({ code: 'realtime_origin_mismatch' });
    expect(attacker.upgradeAttempts).toHaveLength(0);
  });

  it('connects when the realtimeUrl is at the base URL’s origin (localhost spelled the same way)', async () => {
    fx.fake.realtimeBase = fx.fake.baseUrl.replace(/^http/, 'ws');
    const d = fx.device();
    await d.startSession();
    await d.connect();
    expect(d.connected).toBe(true);
    expect(fx.fake.upgradeAttempts).toHaveLength(1);
  });
});

describe('assertSocketOrigin', () => {
  it.each([
    ['http://127.0.0.1:8080', 'ws://127.0.0.1:8080/client/v1/sessions/s/realtime'],
    ['https://liveline.example.com', 'wss://liveline.example.com/client/v1/sessions/s/realtime'],
    ['https://liveline.example.com:443/prefix', 'wss://LIVELINE.example.com/prefix/client/v1/x'],
    ['http://liveline.example.com', 'ws://liveline.example.com:80/x'],
    ['https://liveline.example.com', 'https://liveline.example.com/x'],
    ['http://[::1]:9000', 'ws://[::1]:9000/x'],
  ])('accepts %s → %s', (base, socket) => {
    expect(() => assertSocketOrigin(base, socket)).not.toThrow();
  });

  it.each([
    ['another host', 'https://liveline.example.com', 'wss://attacker.example/x'],
    ['a look-alike host', 'https://liveline.example.com', 'wss://liveline.example.com.attacker.example/x'],
    ['another port', 'http://127.0.0.1:8080', 'ws://127.0.0.1:8081/x'],
    ['plaintext for an https base', 'https://liveline.example.com', 'ws://liveline.example.com/x'],
    ['plaintext on port 443', 'https://liveline.example.com', 'ws://liveline.example.com:443/x'],
    ['TLS for an http base', 'http://liveline.example.com', 'wss://liveline.example.com/x'],
    [
      'credentials in the host part',
      'https://liveline.example.com',
      'wss://liveline.example.com@attacker.example/x',
    ],
    ['another scheme', 'https://liveline.example.com', 'ftp://liveline.example.com/x'],
    ['no URL at all', 'https://liveline.example.com', '/client/v1/sessions/s/realtime'],
  ])('refuses %s', (_name, base, socket) => {
    expect(() => assertSocketOrigin(base, socket)).toThrow(
      expect.objectContaining({ code: 'realtime_origin_mismatch', status: 0 }),
    );
  });
});
