import type { Clock } from '../../clock.ts';
import { problems } from '../../http/problem.ts';
import type { Outbox, OutboxMessage } from '../../outbox.ts';
import type { Storage } from '../../storage/index.ts';
import { type CampaignsService, isCurrent } from './campaigns.ts';
import type { ChallengesService } from './challenges.ts';
import { newAchievementCode, newDisplayCode } from './codes.ts';
import type { RuleType } from './progress.ts';
import { fillRedemption, type RedemptionConfig } from './redemption.ts';
import type { Standings } from './standing.ts';
import type { CampaignRow, ChallengeRow, ClaimRow } from './store.ts';
import * as store from './store.ts';

/** Fresh codes drawn when a display or achievement code collides with a stored one. */
const CODE_ATTEMPTS = 5;

/** Where claim codes come from (tests force collisions through it). */
export interface ClaimCodes {
  display(): string;
  achievement(): string;
}

export const RANDOM_CODES: ClaimCodes = { display: newDisplayCode, achievement: newAchievementCode };

export interface ClaimsDeps {
  storage: Storage;
  clock: Clock;
  outbox: Outbox;
  campaigns: CampaignsService;
  challenges: ChallengesService;
  standings: Standings;
  codes: ClaimCodes;
}

/** A player's claims of completed challenges; each writes `reward.claimed` in its own transaction. */
export class ClaimsService {
  constructor(private readonly deps: ClaimsDeps) {}

  private get db() {
    return this.deps.storage.db;
  }

  /** A player's claims in claim id order after `afterId` (the player export), at most `limit`. */
  async playerPage(tenantId: string, playerId: string, afterId: number, limit: number) {
    const rows = await store.playerClaimsPage(this.db, tenantId, playerId, afterId, limit);
    return rows.map((r) => ({
      claimId: r.claim_id,
      campaignId: r.campaign_id,
      challengeId: r.challenge_id,
      playerId: r.player_id,
      rewardCode: r.reward_code,
      displayCode: r.display_code,
      claimedAt: r.claimed_at,
      verifiedAt: r.verified_at,
    }));
  }

  /** Erasure (the players module): up to `limit` of the player's claims lose their player id; how many. */
  erasePlayer(tenantId: string, playerId: string, limit: number): Promise<number> {
    return store.forgetClaimsPlayer(this.db, tenantId, playerId, limit);
  }

  /**
   * The player's claim of a challenge: created once the rule is met (`created: true`), the same claim
   * on every later call. Concurrent claims meet at the unique index on (challenge, player): one
   * inserts, the others read what it inserted.
   */
  async claim(
    tenantId: string,
    playerId: string,
    challengeId: string,
  ): Promise<{ claim: ClaimRow; created: boolean }> {
    const challenge = await this.deps.challenges.ofTenant(tenantId, challengeId);
    const existing = await store.findClaim(this.db, challengeId, playerId);
    if (existing) return { claim: existing, created: false };
    const campaign = await this.deps.campaigns.get(tenantId, challenge.campaign_id);
    const now = this.deps.clock.now();
    if (!isCurrent(campaign, now)) throw problems.campaignNotActive();
    const metrics = await this.deps.standings.metrics([campaign], tenantId, playerId, now);
    const value = metrics.get(campaign.campaign_id)![challenge.rule_type as RuleType];
    const progress = { value, target: challenge.rule_target };
    if (progress.value < progress.target) throw problems.challengeNotComplete(progress);
    for (let attempt = 0; attempt < CODE_ATTEMPTS; attempt++) {
      try {
        return { claim: await this.insert(campaign, challenge, playerId, now), created: true };
      } catch (err) {
        const raced = await store.findClaim(this.db, challengeId, playerId);
        if (raced) return { claim: raced, created: false };
        // The challenge was deleted meanwhile: 404, as if it had never been there.
        await this.deps.challenges.ofTenant(tenantId, challengeId);
        if (!this.deps.storage.isUniqueViolation(err)) throw err;
        // A display or achievement code is already taken: draw new ones.
      }
    }
    throw new Error(`no unique claim codes after ${CODE_ATTEMPTS} attempts`);
  }

  /** One attempt with freshly drawn codes: the claim and its `reward.claimed` in one transaction. */
  private insert(campaign: CampaignRow, challenge: ChallengeRow, playerId: string, now: number) {
    const config = JSON.parse(campaign.redemption) as RedemptionConfig;
    const displayCode = this.deps.codes.display();
    const achievementCode = this.deps.codes.achievement();
    const redemption = fillRedemption(config, {
      displayCode,
      achievementCode,
      rewardCode: challenge.reward_code,
      rewardTitle: challenge.reward_title,
    });
    return this.db.transaction().execute(async (trx) => {
      const row = await store.insertClaim(trx, {
        tenant_id: campaign.tenant_id,
        campaign_id: campaign.campaign_id,
        challenge_id: challenge.challenge_id,
        player_id: playerId,
        reward_code: challenge.reward_code,
        display_code: displayCode,
        achievement_code: achievementCode,
        redemption: JSON.stringify(redemption),
        claimed_at: now,
        verified_at: null,
      });
      await this.deps.outbox.enqueue(trx, [claimedMessage(row, config.method)]);
      return row;
    });
  }
}

function claimedMessage(row: ClaimRow, method: RedemptionConfig['method']): OutboxMessage {
  return {
    tenantId: row.tenant_id,
    type: 'reward.claimed',
    data: {
      claimId: row.claim_id,
      campaignId: row.campaign_id,
      challengeId: row.challenge_id,
      playerId: row.player_id,
      rewardCode: row.reward_code,
      displayCode: row.display_code,
      achievementCode: row.achievement_code,
      method,
      claimedAt: row.claimed_at,
    },
    occurredAt: row.claimed_at,
  };
}
