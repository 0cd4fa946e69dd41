import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, waitFor } from '../helpers/receiver.ts';
import { LONG_CLOCK_ENV, MINUTE, RewardsTenant, verify } from '../helpers/rewards.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

/** A real claim and its verification reach the tenant's endpoint as signed webhooks (CONTRACT §6, §7). */
describe.each(backends)('reward signals as webhooks (%s)', (backend) => {
  // Near real time: receivers refuse webhook timestamps more than 5 minutes off their own clock.
  const clock = manualClock(Date.now());
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(
      backend,
      { ...LONG_CLOCK_ENV, LIVELINE_WEBHOOK_RETRY_SCHEDULE: '0,1' },
      { clock },
    );
  });
  afterAll(async () => server?.close());

  it('reward.claimed and reward.verified arrive signed, with the claim', async () => {
    const receiver = await startReceiver();
    try {
      const tenant = await RewardsTenant.create(server.url, server.adminToken, clock);
      const hook = await tenant.call('POST', '/webhooks', {
        url: receiver.url,
        types: ['reward.claimed', 'reward.verified'],
      });
      expect(hook.status, hook.text).toBe(201);
      const webhook = new Webhook(String(hook.body.secret));
      const campaign = await tenant.campaign({ method: 'displayCode', instructionsTemplate: 'Show {code}' });
      const challenge = await tenant.challenge(campaign.campaignId, 'BADGE', 'sessionCount', 1);
      const player = await tenant.player('webhook-player');
      await player.stream(2 * MINUTE);
      const claim = await player.claim(challenge.challengeId);
      expect(claim.status, claim.text).toBe(201);
      const verified = await verify(server.url, {
        campaignSecret: campaign.campaignSecret,
        verificationCode: claim.body.displayCode,
      });
      expect(verified.status, verified.text).toBe(200);

      await waitFor(() => receiver.received.length >= 2, 10_000, 'two reward webhooks');
      const messages = receiver.received.map((r) => {
        const payload = webhook.verify(r.body, r.headers) as { type: string; data: Json };
        return payload;
      });
      const claimed = messages.find((m) => m.type === 'reward.claimed');
      const confirmed = messages.find((m) => m.type === 'reward.verified');
      expect(claimed?.data).toMatchObject({
        claimId: claim.body.claimId,
        rewardCode: 'BADGE',
        playerId: 'webhook-player',
      });
      expect(confirmed?.data).toMatchObject({ claimId: claim.body.claimId, rewardCode: 'BADGE' });
      // Only the types this endpoint asked for: no session.event deliveries.
      expect(messages.every((m) => m.type.startsWith('reward.'))).toBe(true);
    } finally {
      await receiver.close();
    }
  });
});
