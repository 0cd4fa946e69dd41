import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { challenges, claim, HttpClient, LivelineError } from '../../../client/src/index.ts';
import { MemoryFailureWindow } from '../../src/limits/index.ts';
import { newAchievementCode, newDisplayCode } from '../../src/modules/rewards/codes.ts';
import { createRewards } from '../../src/modules/rewards/index.ts';
import { call } from '../helpers/api.ts';
import { DAY, LONG_CLOCK_ENV, MINUTE, nextDay, RewardsTenant, verify } from '../helpers/rewards.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;
const DISPLAY = {
  method: 'displayCode',
  instructionsTemplate: 'Show {code} at the desk to get your {rewardTitle}.',
};
const DISPLAY_CODE = /^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{4}-[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{4}$/;

/**
 * Streaming challenges end to end (CONTRACT §7): real sessions and streams started and stopped through
 * the app routes, a test clock so that minutes and days pass at once, claims, redemption payloads,
 * verification and its rate limit.
 */
describe.each(backends)('streaming challenges (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  const clock = manualClock(Date.UTC(2026, 0, 5, 9, 0, 0));

  beforeAll(async () => {
    server = await startTestServer(backend, LONG_CLOCK_ENV, { clock });
    base = server.url;
  });
  afterAll(async () => server?.close());

  const newTenant = () => RewardsTenant.create(base, server.adminToken, clock);

  async function outboxOf(tenantId: string, type: string) {
    const rows = await server.services.storage.db
      .selectFrom('webhook_deliveries')
      .select(['payload'])
      .where('tenant_id', '=', tenantId)
      .where('type', '=', type)
      .execute();
    return rows.map((r) => JSON.parse(r.payload) as { type: string; timestamp: string; data: Json });
  }

  it('reaches and claims each of the five rule types through real streams', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const hook = await tenant.call('POST', '/webhooks', {
      url: 'http://127.0.0.1:9/hooks',
      types: ['reward.claimed', 'reward.verified'],
    });
    expect(hook.status, hook.text).toBe(201);
    const campaign = await tenant.campaign(DISPLAY);
    const rules = [
      ['TOTAL', 'totalMinutes', 90],
      ['SOLO', 'singleSessionMinutes', 45],
      ['DAYS', 'uniqueDays', 3],
      ['STREAK', 'streakDays', 3],
      ['COUNT', 'sessionCount', 4],
    ] as const;
    const ids: Record<string, string> = {};
    for (const [code, type, target] of rules) {
      ids[code] = (await tenant.challenge(campaign.campaignId, code, type, target)).challengeId;
    }
    const player = await tenant.player('e2e-player');
    const statuses = async () =>
      Object.fromEntries((await player.challenges()).map((c) => [String(c.rewardCode), c.status]));

    // Day 1: 30 minutes, then a claim that comes too early.
    await player.stream(30 * MINUTE + 20_000);
    const early = await player.claim(ids.TOTAL);
    expect(early.status).toBe(409);
    expect(early.body).toMatchObject({ code: 'challenge_not_complete', progress: { value: 30, target: 90 } });
    expect(await statuses()).toEqual({
      TOTAL: 'inProgress',
      SOLO: 'inProgress',
      DAYS: 'inProgress',
      STREAK: 'inProgress',
      COUNT: 'inProgress',
    });

    // Day 1, later: one long stream completes the single-session rule.
    clock.advance(60 * MINUTE);
    await player.stream(50 * MINUTE);
    expect((await statuses()).SOLO).toBe('complete');
    const solo = await player.claim(ids.SOLO);
    expect(solo.status, solo.text).toBe(201);

    // Days 2 and 3: short streams make the days, the streak, the count and the total.
    nextDay(clock);
    await player.stream(5 * MINUTE);
    nextDay(clock);
    await player.startStream();
    clock.advance(6 * MINUTE);
    // A live stream counts up to now: 30 + 50 + 5 + 6 = 91 minutes.
    const list = await player.challenges();
    const total = list.find((c) => c.rewardCode === 'TOTAL')!;
    expect(total).toMatchObject({ status: 'complete', progress: { value: 91, target: 90 } });
    expect(list.find((c) => c.rewardCode === 'SOLO')).toMatchObject({
      status: 'claimed',
      claim: { claimId: solo.body.claimId },
    });
    await player.stopStream();

    const progress = await tenant.call(
      'GET',
      `/campaigns/${campaign.campaignId}/players/e2e-player/progress`,
    );
    expect(progress.status, progress.text).toBe(200);
    expect(progress.body.metrics).toEqual({
      totalMinutes: 91,
      singleSessionMinutes: 50,
      uniqueDays: 3,
      streakDays: 3,
      sessionCount: 4,
    });

    const claims: Json[] = [solo.body];
    for (const code of ['TOTAL', 'DAYS', 'STREAK', 'COUNT']) {
      const res = await player.claim(ids[code]);
      expect(res.status, res.text).toBe(201);
      claims.push(res.body);
    }
    for (const claim of claims) {
      expect(claim.claimId).toEqual(expect.any(Number));
      expect(claim.displayCode).toMatch(DISPLAY_CODE);
      expect(String(claim.achievementCode).length).toBeGreaterThanOrEqual(26);
      expect(claim.redemption).toEqual({
        method: 'displayCode',
        code: claim.displayCode,
        instructions: `Show ${claim.displayCode} at the desk to get your Title ${claim.rewardCode}.`,
      });
    }
    expect(new Set(claims.map((c) => c.claimId)).size).toBe(5);
    expect(new Set(claims.map((c) => c.displayCode)).size).toBe(5);
    expect(Object.values(await statuses())).toEqual(['claimed', 'claimed', 'claimed', 'claimed', 'claimed']);

    // Claiming again gives the same claim, with 200.
    const again = await player.claim(ids.TOTAL);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(claims[1]);

    // The tenant verifies a display code; the outbox has both messages.
    const v = await verify(base, {
      campaignSecret: campaign.campaignSecret,
      verificationCode: claims[1].displayCode,
    });
    expect(v.status, v.text).toBe(200);
    expect(v.body).toEqual({
      claimId: claims[1].claimId,
      rewardCode: 'TOTAL',
      playerId: 'e2e-player',
      claimedAt: claims[1].claimedAt,
      verifiedAt: clock.now(),
      alreadyVerified: false,
    });
    const claimed = await outboxOf(tenant.tenantId, 'reward.claimed');
    expect(claimed.map((m) => m.data.rewardCode).sort()).toEqual([
      'COUNT',
      'DAYS',
      'SOLO',
      'STREAK',
      'TOTAL',
    ]);
    expect(claimed.find((m) => m.data.rewardCode === 'TOTAL')).toMatchObject({
      type: 'reward.claimed',
      data: {
        claimId: claims[1].claimId,
        playerId: 'e2e-player',
        challengeId: ids.TOTAL,
        campaignId: campaign.campaignId,
        displayCode: claims[1].displayCode,
      },
    });
    const verified = await outboxOf(tenant.tenantId, 'reward.verified');
    expect(verified).toHaveLength(1);
    expect(verified[0].data).toMatchObject({ claimId: claims[1].claimId, verifiedAt: clock.now() });
  });

  it('fills each redemption method with the claim’s codes, URL-encoded', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const intent = await tenant.campaign({
      method: 'intent',
      form: 'broadcast',
      packageName: 'com.tenant.claims',
      activityName: 'com.tenant.claims.Receiver',
      action: 'com.tenant.CLAIM',
      category: 'android.intent.category.DEFAULT',
      flags: 268435456,
      dataUrlTemplate: 'tenant://claim?achievement={achievement.code}&reward={reward.code}',
    });
    const web = await tenant.campaign({
      method: 'webUrl',
      urlTemplate: 'https://rewards.tenant.example/claim/{reward.code}?a={achievement.code}',
    });
    const display = await tenant.campaign({ method: 'displayCode', instructionsTemplate: 'Code: {code}' });
    const reward = 'gold hat & cape/2';
    const cIntent = await tenant.challenge(intent.campaignId, reward, 'sessionCount', 1);
    const cWeb = await tenant.challenge(web.campaignId, reward, 'totalMinutes', 2);
    const cDisplay = await tenant.challenge(display.campaignId, 'plain', 'uniqueDays', 1);
    const player = await tenant.player('redeemer');
    await player.stream(2 * MINUTE);

    const a = await player.claim(cIntent.challengeId);
    expect(a.status, a.text).toBe(201);
    const ach = String(a.body.achievementCode);
    const encoded = encodeURIComponent(reward);
    expect(encoded).toBe('gold%20hat%20%26%20cape%2F2');
    expect(a.body).toMatchObject({ rewardCode: reward, claimedAt: clock.now() });
    expect(a.body.redemption).toEqual({
      method: 'intent',
      form: 'broadcast',
      packageName: 'com.tenant.claims',
      activityName: 'com.tenant.claims.Receiver',
      action: 'com.tenant.CLAIM',
      category: 'android.intent.category.DEFAULT',
      flags: 268435456,
      dataUrl: `tenant://claim?achievement=${ach}&reward=${encoded}`,
      extras: { achievementCode: ach, rewardCode: reward },
      fallbackUrl: `tenant://claim?achievement=${ach}&reward=${encoded}`,
    });

    const w = await player.claim(cWeb.challengeId);
    expect(w.status, w.text).toBe(201);
    expect(w.body.redemption).toEqual({
      method: 'webUrl',
      url: `https://rewards.tenant.example/claim/${encoded}?a=${w.body.achievementCode}`,
    });

    const d = await player.claim(cDisplay.challengeId);
    expect(d.status, d.text).toBe(201);
    expect(d.body.redemption).toEqual({
      method: 'displayCode',
      code: d.body.displayCode,
      instructions: `Code: ${d.body.displayCode}`,
    });

    // The intent's and web URL's achievement codes verify too, with the secret of their campaign.
    const byAchievement = await verify(base, {
      campaignSecret: intent.campaignSecret,
      verificationCode: ach,
    });
    expect(byAchievement.status, byAchievement.text).toBe(200);
    expect(byAchievement.body).toMatchObject({
      claimId: a.body.claimId,
      rewardCode: reward,
      alreadyVerified: false,
    });

    // Optional fields of the intent come back as null.
    const minimal = await tenant.campaign({
      method: 'intent',
      form: 'startActivity',
      packageName: 'com.tenant.min',
      dataUrlTemplate: 'https://t.example/{reward.code}/{achievement.code}',
    });
    const cMin = await tenant.challenge(minimal.campaignId, 'min', 'sessionCount', 1);
    const m = await player.claim(cMin.challengeId);
    expect(m.status, m.text).toBe(201);
    expect(m.body.redemption).toMatchObject({
      activityName: null,
      action: null,
      category: null,
      flags: null,
    });
  });

  it('verification: 200 once, alreadyVerified after; codes in any case, hyphen optional', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const campaign = await tenant.campaign(DISPLAY);
    const other = await tenant.campaign(DISPLAY);
    const ch = await tenant.challenge(campaign.campaignId, 'R1', 'sessionCount', 1);
    const otherCh = await tenant.challenge(other.campaignId, 'R2', 'sessionCount', 1);
    const player = await tenant.player('verified');
    await player.stream(MINUTE);
    const claim = (await player.claim(ch.challengeId)).body;
    const otherClaim = (await player.claim(otherCh.challengeId)).body;
    const code = String(claim.displayCode);
    const secret = campaign.campaignSecret;

    const first = await verify(base, {
      campaignSecret: secret,
      verificationCode: code.toLowerCase().replace('-', ''),
    });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({
      claimId: claim.claimId,
      rewardCode: 'R1',
      playerId: 'verified',
      claimedAt: claim.claimedAt,
      verifiedAt: clock.now(),
      alreadyVerified: false,
    });
    const verifiedAt = clock.now();
    clock.advance(MINUTE);
    for (const variant of [code, code.toLowerCase(), ` ${code} `, String(claim.achievementCode)]) {
      const again = await verify(base, {
        campaignSecret: secret,
        verificationCode: variant,
        campaignId: campaign.campaignId,
      });
      expect(again.status, again.text).toBe(200);
      expect(again.body).toMatchObject({ claimId: claim.claimId, verifiedAt, alreadyVerified: true });
    }

    // Another campaign's code, with this campaign's secret: not found here.
    const cross = await verify(base, { campaignSecret: secret, verificationCode: otherClaim.displayCode });
    expect(cross.status).toBe(404);
    expect(cross.body.code).toBe('entitlement_not_found');
    // Lookalikes are not read as the characters they resemble.
    const lookalike = code.replace(/[A-Z2-9]/, (ch) => (ch === 'O' ? '0' : 'O'));
    expect((await verify(base, { campaignSecret: secret, verificationCode: lookalike })).status).toBe(404);
    expect((await verify(base, { campaignSecret: secret, verificationCode: 'ABCD-EFGH' })).status).toBe(404);
    // An unknown secret, or a secret that is not the given campaign's.
    const wrong = await verify(base, { campaignSecret: `${secret}x`, verificationCode: code });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe('invalid_campaign_secret');
    const mismatch = await verify(base, {
      campaignSecret: secret,
      verificationCode: code,
      campaignId: other.campaignId,
    });
    expect(mismatch.status).toBe(401);
    // Bad bodies are 400, not failures.
    for (const body of [
      {},
      { campaignSecret: secret },
      { campaignSecret: secret, verificationCode: code, extra: 1 },
    ]) {
      const res = await verify(base, body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    }

    // Rotation: the old secret stops working at once.
    const rotated = await tenant.call('POST', `/campaigns/${campaign.campaignId}/secret/rotate`);
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.campaignSecret).not.toBe(secret);
    expect((await verify(base, { campaignSecret: secret, verificationCode: code })).status).toBe(401);
    const fresh = await verify(base, { campaignSecret: rotated.body.campaignSecret, verificationCode: code });
    expect(fresh.status).toBe(200);
    expect(fresh.body.alreadyVerified).toBe(true);
    // Let this test's failures leave the window before the next test.
    clock.advance(2 * MINUTE);
  });

  it('brute force: after 10 failures a minute, 429 whatever the code, per campaign', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const campaign = await tenant.campaign(DISPLAY);
    const other = await tenant.campaign(DISPLAY);
    const ch = await tenant.challenge(campaign.campaignId, 'R', 'sessionCount', 1);
    const otherCh = await tenant.challenge(other.campaignId, 'R', 'sessionCount', 1);
    const player = await tenant.player('guessed');
    await player.stream(MINUTE);
    const real = String((await player.claim(ch.challengeId)).body.displayCode);
    const otherReal = String((await player.claim(otherCh.challengeId)).body.displayCode);
    const secret = campaign.campaignSecret;

    for (let i = 0; i < 10; i++) {
      const res = await verify(base, {
        campaignSecret: secret,
        verificationCode: `ZZZZ-ZZ${'23456789'[i % 8]}${i}`,
      });
      expect(res.status).toBe(404);
      clock.advance(1000);
    }
    const limited = await verify(base, { campaignSecret: secret, verificationCode: 'ZZZZ-ZZZZ' });
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    // Nothing revealed: a real code gets the same answer.
    const realLimited = await verify(base, { campaignSecret: secret, verificationCode: real });
    expect(realLimited.status).toBe(429);
    expect(JSON.stringify(realLimited.body)).not.toContain(real);
    // Another campaign from the same address is not affected.
    expect(
      (await verify(base, { campaignSecret: other.campaignSecret, verificationCode: otherReal })).status,
    ).toBe(200);
    // A minute after the first failure, the count frees up.
    clock.advance(61_000);
    const after = await verify(base, { campaignSecret: secret, verificationCode: real });
    expect(after.status, after.text).toBe(200);

    // Guessing secrets is limited the same way.
    for (let i = 0; i < 10; i++) {
      expect((await verify(base, { campaignSecret: `lcs_guess${i}`, verificationCode: real })).status).toBe(
        401,
      );
    }
    expect((await verify(base, { campaignSecret: 'lcs_guess', verificationCode: real })).status).toBe(429);
    clock.advance(61_000);
  });

  it('concurrent claims of one challenge give exactly one claim', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const campaign = await tenant.campaign(DISPLAY);
    const ch = await tenant.challenge(campaign.campaignId, 'RACE', 'sessionCount', 1);
    const player = await tenant.player('racer');
    await player.stream(MINUTE);
    const results = await Promise.all(Array.from({ length: 12 }, () => player.claim(ch.challengeId)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(11);
    expect(new Set(results.map((r) => r.body.claimId)).size).toBe(1);
    expect(new Set(results.map((r) => r.body.displayCode)).size).toBe(1);
    const rows = await server.services.storage.db
      .selectFrom('claims')
      .select('claim_id')
      .where('challenge_id', '=', ch.challengeId)
      .execute();
    expect(rows).toHaveLength(1);
  });

  it('claims stay within their tenant, player and campaign window', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const stranger = await newTenant();
    const campaign = await tenant.campaign(DISPLAY);
    const ch = await tenant.challenge(campaign.campaignId, 'MINE', 'sessionCount', 1);
    const outsider = await stranger.player('outsider');
    await outsider.stream(MINUTE);
    // Another tenant's challenge does not exist for this player.
    const foreign = await outsider.claim(ch.challengeId);
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('not_found');
    expect(await outsider.challenges()).toEqual([]);
    expect((await outsider.call('GET', ch.imageUrl.replace(base, ''))).status).toBe(404);
    // Another tenant's campaign and progress are 404 too.
    expect((await stranger.call('GET', `/campaigns/${campaign.campaignId}`)).status).toBe(404);
    expect((await stranger.call('GET', `/campaigns/${campaign.campaignId}/players/x/progress`)).status).toBe(
      404,
    );

    // The same player id in another tenant has its own streams: nothing counts here.
    const namesake = await tenant.player('outsider');
    const res = await namesake.claim(ch.challengeId);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'challenge_not_complete', progress: { value: 0, target: 1 } });

    // Campaigns outside their window are not listed and cannot be claimed; streams outside do not count.
    const later = await tenant.campaign(DISPLAY, {
      startsAt: clock.now() + DAY,
      endsAt: clock.now() + 2 * DAY,
    });
    const laterCh = await tenant.challenge(later.campaignId, 'LATER', 'totalMinutes', 1);
    await namesake.stream(5 * MINUTE);
    expect((await namesake.challenges()).map((c) => c.rewardCode)).toEqual(['MINE']);
    expect((await namesake.claim(laterCh.challengeId)).body.code).toBe('campaign_not_active');
    clock.advance(DAY);
    const listed = (await namesake.challenges()).find((c) => c.rewardCode === 'LATER');
    expect(listed).toMatchObject({ status: 'inProgress', progress: { value: 0, target: 1 } });
    expect((await namesake.claim(laterCh.challengeId)).body.code).toBe('challenge_not_complete');
    await namesake.stream(MINUTE);
    expect((await namesake.claim(laterCh.challengeId)).status).toBe(201);
  });

  it('challenge images: served as image/jpeg to the tenant, its devices and the operator', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const campaign = await tenant.campaign(DISPLAY);
    const ch = await tenant.challenge(campaign.campaignId, 'IMG', 'sessionCount', 1);
    expect(ch.imageUrl).toBe(`${base}/campaigns/${campaign.campaignId}/challenges/${ch.challengeId}/image`);
    const player = await tenant.player('looker');
    const [listed] = await player.challenges();
    expect(listed.imageUrl).toBe(ch.imageUrl);
    for (const token of [await tenant.token(), player.token]) {
      const res = await fetch(ch.imageUrl, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/jpeg');
      const bytes = Buffer.from(await res.arrayBuffer());
      expect(bytes.subarray(0, 2).toString('hex')).toBe('ffd8');
      const etag = res.headers.get('etag')!;
      const cached = await fetch(ch.imageUrl, {
        headers: { authorization: `Bearer ${token}`, 'if-none-match': etag },
      });
      expect(cached.status).toBe(304);
    }
    const admin = await call(
      base,
      'GET',
      `/admin/v1/tenants/${tenant.tenantId}/campaigns/${campaign.campaignId}/challenges/${ch.challengeId}/image`,
      { token: server.adminToken },
    );
    expect(admin.status).toBe(200);
    expect(admin.headers.get('content-type')).toBe('image/jpeg');
    expect((await call(base, 'GET', ch.imageUrl.replace(base, ''))).status).toBe(401);
  });

  it('the device SDK lists challenges and claims them', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const campaign = await tenant.campaign(DISPLAY);
    const ch = await tenant.challenge(campaign.campaignId, 'SDK', 'totalMinutes', 3);
    const player = await tenant.player('sdk-player');
    const http = new HttpClient({ baseUrl: base, token: player.token });
    const before = await challenges(http);
    expect(before).toMatchObject([
      { challengeId: ch.challengeId, status: 'inProgress', progress: { value: 0, target: 3 } },
    ]);
    const early = await claim(http, ch.challengeId).catch((err: unknown) => err);
    expect(early).toBeInstanceOf(LivelineError);
    expect(early).toMatchObject({ status: 409, code: 'challenge_not_complete' });
    await player.stream(3 * MINUTE);
    expect((await challenges(http))[0].status).toBe('complete');
    const claimed = await claim(http, ch.challengeId);
    expect(claimed.redemption).toEqual({
      method: 'displayCode',
      code: claimed.displayCode,
      instructions: `Show ${claimed.displayCode} at the desk to get your Title SDK.`,
    });
    expect(await claim(http, ch.challengeId)).toEqual(claimed);
    expect((await challenges(http))[0]).toMatchObject({ status: 'claimed', claim: claimed });
  });

  it('a display or achievement code that collides is drawn again', async () => {
    nextDay(clock);
    const tenant = await newTenant();
    const campaign = await tenant.campaign(DISPLAY);
    const ch = await tenant.challenge(campaign.campaignId, 'DUP', 'sessionCount', 1);
    const first = await tenant.player('first');
    const second = await tenant.player('second');
    await first.stream(MINUTE);
    await second.stream(MINUTE);
    const taken = (await first.claim(ch.challengeId)).body;
    // A service whose first draw repeats the stored codes: the insert fails on the unique index.
    const displays = [String(taken.displayCode), 'ZZZZ-ZZZ2'];
    const achievements = [String(taken.achievementCode), newAchievementCode()];
    const rewards = createRewards({
      ...server.services,
      tenants: { tenantExists: async () => true },
      verifyFailures: new MemoryFailureWindow(server.services.clock, { limit: 10, windowMs: 60_000 }),
      codes: {
        display: () => displays.shift() ?? newDisplayCode(),
        achievement: () => achievements.shift() ?? newAchievementCode(),
      },
    });
    const { claim: row, created } = await rewards.claims.claim(tenant.tenantId, 'second', ch.challengeId);
    expect(created).toBe(true);
    expect(row.display_code).toBe('ZZZZ-ZZZ2');
    const rows = await server.services.storage.db
      .selectFrom('claims')
      .select(['player_id', 'display_code'])
      .where('challenge_id', '=', ch.challengeId)
      .orderBy('claim_id')
      .execute();
    expect(rows).toEqual([
      { player_id: 'first', display_code: taken.displayCode },
      { player_id: 'second', display_code: 'ZZZZ-ZZZ2' },
    ]);
  });
});
