import { expect } from 'vitest';
import { accessToken, call, createTenant, type TenantFixture } from './api.ts';
import { greyJpeg } from './jpeg.ts';
import type { manualClock } from './server.ts';

type Json = Record<string, unknown>;
type Clock = ReturnType<typeof manualClock>;

export const GOOD_IMAGE = greyJpeg(200, 200).toString('base64');
export const MINUTE = 60_000;
export const DAY = 86_400_000;

/** Server settings for tests that move the clock by hours and days: nothing times out meanwhile. */
export const LONG_CLOCK_ENV = {
  LIVELINE_STREAM_GRACE_S: '86400',
  LIVELINE_SESSION_IDLE_TIMEOUT_S: String(30 * 86400),
  LIVELINE_ACCESS_TOKEN_TTL_S: '86400',
  LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
};

/**
 * A tenant for rewards tests on a server whose clock jumps: its access token is minted again
 * whenever the clock has moved on, and its players' device tokens last 30 days.
 */
export class RewardsTenant {
  private mintedAt: number;

  private constructor(
    readonly base: string,
    readonly clock: Clock,
    readonly fixture: TenantFixture,
  ) {
    this.mintedAt = clock.now();
  }

  static async create(base: string, adminToken: string, clock: Clock, scopes?: string[]) {
    return new RewardsTenant(base, clock, await createTenant(base, adminToken, scopes ? { scopes } : {}));
  }

  get tenantId() {
    return this.fixture.tenantId;
  }

  async token(): Promise<string> {
    if (this.clock.now() - this.mintedAt > 30 * MINUTE) {
      this.fixture.token = await accessToken(this.base, this.fixture.clientId, this.fixture.clientSecret);
      this.mintedAt = this.clock.now();
    }
    return this.fixture.token;
  }

  async call<T = Json>(method: string, path: string, json?: unknown) {
    return call<T>(this.base, method, path, { token: await this.token(), json });
  }

  async campaign(redemption: Json, extra: Json = {}) {
    const res = await this.call('POST', '/campaigns', { name: 'Campaign', redemption, ...extra });
    expect(res.status, res.text).toBe(201);
    return res.body as Json & { campaignId: string; campaignSecret: string };
  }

  async challenge(campaignId: string, rewardCode: string, type: string, target: number, extra: Json = {}) {
    const res = await this.call('POST', `/campaigns/${campaignId}/challenges`, {
      rewardCode,
      rewardTitle: `Title ${rewardCode}`,
      rewardRequirement: `Requirement ${rewardCode}`,
      rewardImage: GOOD_IMAGE,
      rule: { type, target },
      ...extra,
    });
    expect(res.status, res.text).toBe(201);
    return res.body as Json & { challengeId: string; imageUrl: string };
  }

  async player(playerId: string) {
    const minted = await this.call('POST', '/client-tokens', { playerId, ttlSeconds: 30 * 86400 });
    expect(minted.status, minted.text).toBe(200);
    const player = new Player(this.base, this.clock, playerId, String(minted.body.token));
    await player.startSession();
    return player;
  }
}

/** A headset: a device token, a session, and streams started and stopped through the app routes. */
export class Player {
  sessionId = '';

  constructor(
    readonly base: string,
    readonly clock: Clock,
    readonly playerId: string,
    readonly token: string,
  ) {}

  call<T = Json>(method: string, path: string, json?: unknown) {
    return call<T>(this.base, method, path, { token: this.token, json });
  }

  async startSession() {
    const res = await this.call('POST', '/client/v1/sessions', {});
    expect(res.status, res.text).toBe(201);
    this.sessionId = String(res.body.sessionId);
  }

  async startStream() {
    const res = await this.call('POST', `/client/v1/sessions/${this.sessionId}/stream/start`, {
      resolution: 1,
      aspectratio: 0,
    });
    expect(res.status, res.text).toBe(200);
  }

  async stopStream() {
    const res = await this.call('POST', `/client/v1/sessions/${this.sessionId}/stream/stop`, {});
    expect(res.status, res.text).toBe(200);
  }

  /** Streams for `ms` of server time (the test clock moves; nothing waits). */
  async stream(ms: number) {
    await this.startStream();
    this.clock.advance(ms);
    await this.stopStream();
  }

  async challenges() {
    const res = await this.call<{ challenges: (Json & { challengeId: string })[] }>(
      'GET',
      '/client/v1/challenges',
    );
    expect(res.status, res.text).toBe(200);
    return res.body.challenges;
  }

  claim(challengeId: string) {
    return this.call('POST', `/client/v1/challenges/${challengeId}/claim`);
  }
}

/** Moves the clock to `hour`:00 UTC of the next day. */
export function nextDay(clock: Clock, hour = 9) {
  const d = new Date(clock.now());
  clock.set(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1, hour));
}

export function verify(base: string, json: unknown) {
  return call(base, 'POST', '/campaigns/verifyrewardcode', { json });
}
