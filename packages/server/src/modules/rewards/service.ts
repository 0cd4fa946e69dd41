import { uuidv7 } from 'uuidv7';
import type { AppContext } from '../../context.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import type { OutboxMessage } from '../../outbox.ts';
import { constantTimeEqual, digestSecret, generateSecret } from '../../secrets.ts';
import type { CampaignInput, CampaignPatch } from './campaign-input.ts';
import { newAchievementCode, newDisplayCode, parseVerificationCode } from './codes.ts';
import { FailureLimiter } from './limiter.ts';
import { computeProgress, type ProgressMetrics, type RuleType } from './progress.ts';
import { fillRedemption, type RedemptionConfig } from './redemption.ts';
import type { CampaignRow, ChallengeRow, ClaimRow } from './store.ts';
import * as store from './store.ts';

export type ChallengeStatus = 'inProgress' | 'complete' | 'claimed';

export interface NewChallenge {
  rewardCode: string;
  rewardTitle: string;
  rewardRequirement: string;
  image: Buffer;
  rule: { type: RuleType; target: number };
}

export interface ChallengeChanges {
  rewardCode?: string;
  rewardTitle?: string;
  rewardRequirement?: string;
  image?: Buffer;
  rule?: { type: RuleType; target: number };
}

export interface EvaluatedChallenge {
  challenge: ChallengeRow;
  progress: { value: number; target: number };
  status: ChallengeStatus;
  claim: ClaimRow | null;
}

export interface Verification {
  claimId: number;
  rewardCode: string;
  playerId: string;
  claimedAt: number;
  verifiedAt: number;
  alreadyVerified: boolean;
}

type Deps = Pick<AppContext, 'storage' | 'clock' | 'digestKey' | 'outbox' | 'streams' | 'config'>;

const CAMPAIGN_SECRET_PREFIX = 'lcs';
/** Fresh codes drawn when a display or achievement code collides with a stored one. */
const CODE_ATTEMPTS = 5;

const isCurrent = (c: CampaignRow, now: number) =>
  (c.starts_at === null || c.starts_at <= now) && (c.ends_at === null || c.ends_at > now);

function statusOf(value: number, target: number, claim: ClaimRow | undefined): ChallengeStatus {
  if (claim) return 'claimed';
  return value >= target ? 'complete' : 'inProgress';
}

/**
 * Campaigns, challenges, progress, claims and verification (CONTRACT §7). Progress is computed on
 * demand from the streams module's intervals (`ctx.streams.intervalsForPlayer`) by the pure engine
 * in `progress.ts`; claims and verifications write their webhook messages in their own transaction.
 */
export class RewardsService {
  private readonly limiter: FailureLimiter;

  constructor(
    private readonly deps: Deps,
    /** Where claim codes come from (tests force collisions through it). */
    private readonly codes = { display: newDisplayCode, achievement: newAchievementCode },
  ) {
    this.limiter = new FailureLimiter(deps.clock, deps.config.rewards.verifyFailuresPerMinute);
  }

  private get db() {
    return this.deps.storage.db;
  }

  // --- campaigns ----------------------------------------------------------------------------------

  async createCampaign(
    tenantId: string,
    input: CampaignInput,
  ): Promise<{ row: CampaignRow; secret: string }> {
    const now = this.deps.clock.now();
    const secret = generateSecret(CAMPAIGN_SECRET_PREFIX);
    const row: CampaignRow = {
      campaign_id: uuidv7(),
      tenant_id: tenantId,
      name: input.name,
      timezone: input.timezone,
      starts_at: input.startsAt,
      ends_at: input.endsAt,
      redemption: JSON.stringify(input.redemption),
      secret_digest: digestSecret(this.deps.digestKey, secret),
      created_at: now,
      updated_at: now,
    };
    await store.insertCampaign(this.db, row);
    return { row, secret };
  }

  async campaign(tenantId: string, campaignId: string): Promise<CampaignRow> {
    const row = await store.findCampaign(this.db, tenantId, campaignId);
    if (!row) throw problems.notFound('campaign');
    return row;
  }

  listCampaigns(tenantId: string, page: PageRequest) {
    return store.listCampaigns(this.db, tenantId, page);
  }

  async updateCampaign(row: CampaignRow, patch: CampaignPatch): Promise<CampaignRow> {
    const changes: Parameters<typeof store.updateCampaign>[2] = { updated_at: this.deps.clock.now() };
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.timezone !== undefined) changes.timezone = patch.timezone;
    if (patch.startsAt !== undefined) changes.starts_at = patch.startsAt;
    if (patch.endsAt !== undefined) changes.ends_at = patch.endsAt;
    if (patch.redemption !== undefined) changes.redemption = JSON.stringify(patch.redemption);
    await store.updateCampaign(this.db, row.campaign_id, changes);
    return { ...row, ...changes };
  }

  /** A new secret; the old one stops working at once. */
  async rotateSecret(row: CampaignRow): Promise<{ row: CampaignRow; secret: string }> {
    const secret = generateSecret(CAMPAIGN_SECRET_PREFIX);
    const changes = {
      secret_digest: digestSecret(this.deps.digestKey, secret),
      updated_at: this.deps.clock.now(),
    };
    await store.updateCampaign(this.db, row.campaign_id, changes);
    return { row: { ...row, ...changes }, secret };
  }

  // --- challenges ---------------------------------------------------------------------------------

  /** Creates all of them or none; 409 `reward_code_taken` when a reward code is already in the campaign. */
  async createChallenges(campaign: CampaignRow, inputs: NewChallenge[]): Promise<ChallengeRow[]> {
    const now = this.deps.clock.now();
    const rows = inputs.map((c) => ({
      challenge_id: uuidv7(),
      campaign_id: campaign.campaign_id,
      tenant_id: campaign.tenant_id,
      reward_code: c.rewardCode,
      reward_title: c.rewardTitle,
      reward_requirement: c.rewardRequirement,
      rule_type: c.rule.type,
      rule_target: c.rule.target,
      image: c.image.toString('base64'),
      created_at: now,
      updated_at: now,
    }));
    try {
      await this.db.transaction().execute(async (trx) => {
        const taken = await store.rewardCodesTaken(
          trx,
          campaign.campaign_id,
          rows.map((r) => r.reward_code),
        );
        if (taken.size > 0) throw rewardCodeTaken([...taken][0]);
        await store.insertChallenges(trx, rows);
      });
    } catch (err) {
      if (this.deps.storage.isUniqueViolation(err)) throw rewardCodeTaken(null);
      throw err;
    }
    return rows.map(({ image: _image, ...rest }) => rest);
  }

  /** Reward codes of `codes` already used in the campaign. */
  rewardCodesTaken(campaignId: string, codes: string[]) {
    return store.rewardCodesTaken(this.db, campaignId, codes);
  }

  async challenge(campaign: CampaignRow, challengeId: string): Promise<ChallengeRow> {
    const row = await store.findChallenge(this.db, campaign.tenant_id, challengeId);
    if (!row || row.campaign_id !== campaign.campaign_id) throw problems.notFound('challenge');
    return row;
  }

  listChallenges(campaign: CampaignRow, page: PageRequest) {
    return store.listChallenges(this.db, campaign.campaign_id, page);
  }

  /** Reward code and rule are what a claim was made against: once claimed, they stay (409 `challenge_claimed`). */
  async updateChallenge(row: ChallengeRow, changes: ChallengeChanges): Promise<ChallengeRow> {
    const ruleChanges =
      (changes.rewardCode !== undefined && changes.rewardCode !== row.reward_code) ||
      (changes.rule !== undefined &&
        (changes.rule.type !== row.rule_type || changes.rule.target !== row.rule_target));
    if (ruleChanges && (await store.hasClaims(this.db, row.challenge_id))) {
      throw problems.challengeClaimed(
        'The challenge has been claimed: its reward code and rule can no longer change.',
      );
    }
    const set: Parameters<typeof store.updateChallenge>[2] = { updated_at: this.deps.clock.now() };
    if (changes.rewardCode !== undefined) set.reward_code = changes.rewardCode;
    if (changes.rewardTitle !== undefined) set.reward_title = changes.rewardTitle;
    if (changes.rewardRequirement !== undefined) set.reward_requirement = changes.rewardRequirement;
    if (changes.rule !== undefined) {
      set.rule_type = changes.rule.type;
      set.rule_target = changes.rule.target;
    }
    if (changes.image !== undefined) set.image = changes.image.toString('base64');
    try {
      await store.updateChallenge(this.db, row.challenge_id, set);
    } catch (err) {
      if (this.deps.storage.isUniqueViolation(err)) throw rewardCodeTaken(changes.rewardCode ?? null);
      throw err;
    }
    const { image: _image, ...rest } = set;
    return { ...row, ...rest };
  }

  async deleteChallenge(row: ChallengeRow): Promise<void> {
    if (!(await store.deleteUnclaimedChallenge(this.db, row.challenge_id))) {
      throw problems.challengeClaimed('The challenge has been claimed and cannot be deleted.');
    }
  }

  async image(tenantId: string, campaignId: string, challengeId: string) {
    const row = await store.challengeImage(this.db, tenantId, campaignId, challengeId);
    if (!row) throw problems.notFound('challenge');
    return { bytes: Buffer.from(row.image, 'base64'), updatedAt: row.updated_at };
  }

  // --- progress -----------------------------------------------------------------------------------

  private async metrics(campaigns: CampaignRow[], tenantId: string, playerId: string, now: number) {
    const out = new Map<string, ProgressMetrics>();
    if (campaigns.length === 0) return out;
    // One read of the player's streams for every campaign: from the earliest start on.
    const from = campaigns.some((c) => c.starts_at === null)
      ? undefined
      : Math.min(...campaigns.map((c) => c.starts_at!));
    const intervals = await this.deps.streams.intervalsForPlayer(tenantId, playerId, from);
    const spans = intervals.map((i) => ({ start: i.startedAt, stop: i.stoppedAt }));
    for (const c of campaigns) {
      out.set(
        c.campaign_id,
        computeProgress({
          intervals: spans,
          now,
          timezone: c.timezone,
          startsAt: c.starts_at,
          endsAt: c.ends_at,
        }),
      );
    }
    return out;
  }

  private evaluate(
    challenges: ChallengeRow[],
    metrics: Map<string, ProgressMetrics>,
    claims: Map<string, ClaimRow>,
  ): EvaluatedChallenge[] {
    return challenges.map((challenge) => {
      const value = metrics.get(challenge.campaign_id)![challenge.rule_type as RuleType];
      const claim = claims.get(challenge.challenge_id);
      return {
        challenge,
        progress: { value, target: challenge.rule_target },
        status: statusOf(value, challenge.rule_target, claim),
        claim: claim ?? null,
      };
    });
  }

  /** The tenant's view of one player in one campaign. */
  async playerProgress(campaign: CampaignRow, playerId: string) {
    const now = this.deps.clock.now();
    const challenges = await store.challengesOf(this.db, [campaign.campaign_id]);
    const [metrics, claims] = await Promise.all([
      this.metrics([campaign], campaign.tenant_id, playerId, now),
      store.claimsOfPlayer(
        this.db,
        campaign.tenant_id,
        playerId,
        challenges.map((c) => c.challenge_id),
      ),
    ]);
    return {
      evaluatedAt: now,
      metrics: metrics.get(campaign.campaign_id)!,
      challenges: this.evaluate(challenges, metrics, claims),
    };
  }

  /** Every challenge of the tenant's current campaigns, as the player's viewer app shows them. */
  async deviceChallenges(tenantId: string, playerId: string): Promise<EvaluatedChallenge[]> {
    const now = this.deps.clock.now();
    const campaigns = await store.currentCampaigns(this.db, tenantId, now);
    const challenges = await store.challengesOf(
      this.db,
      campaigns.map((c) => c.campaign_id),
    );
    const [metrics, claims] = await Promise.all([
      this.metrics(campaigns, tenantId, playerId, now),
      store.claimsOfPlayer(
        this.db,
        tenantId,
        playerId,
        challenges.map((c) => c.challenge_id),
      ),
    ]);
    return this.evaluate(challenges, metrics, claims);
  }

  // --- claims -------------------------------------------------------------------------------------

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
    const challenge = await store.findChallenge(this.db, tenantId, challengeId);
    if (!challenge) throw problems.notFound('challenge');
    const existing = await store.findClaim(this.db, challengeId, playerId);
    if (existing) return { claim: existing, created: false };
    const campaign = await this.campaign(tenantId, challenge.campaign_id);
    const now = this.deps.clock.now();
    if (!isCurrent(campaign, now)) {
      throw problems.campaignNotActive();
    }
    const metrics = (await this.metrics([campaign], tenantId, playerId, now)).get(campaign.campaign_id)!;
    const progress = { value: metrics[challenge.rule_type as RuleType], target: challenge.rule_target };
    if (progress.value < progress.target) {
      throw problems.challengeNotComplete(progress);
    }
    const config = JSON.parse(campaign.redemption) as RedemptionConfig;
    for (let attempt = 0; attempt < CODE_ATTEMPTS; attempt++) {
      const displayCode = this.codes.display();
      const achievementCode = this.codes.achievement();
      const redemption = fillRedemption(config, {
        displayCode,
        achievementCode,
        rewardCode: challenge.reward_code,
        rewardTitle: challenge.reward_title,
      });
      try {
        const claim = await this.db.transaction().execute(async (trx) => {
          const row = await store.insertClaim(trx, {
            tenant_id: tenantId,
            campaign_id: campaign.campaign_id,
            challenge_id: challengeId,
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
        return { claim, created: true };
      } catch (err) {
        const raced = await store.findClaim(this.db, challengeId, playerId);
        if (raced) return { claim: raced, created: false };
        if (!(await store.findChallenge(this.db, tenantId, challengeId)))
          throw problems.notFound('challenge');
        if (!this.deps.storage.isUniqueViolation(err)) throw err;
        // A display or achievement code is already taken: draw new ones.
      }
    }
    throw new Error(`no unique claim codes after ${CODE_ATTEMPTS} attempts`);
  }

  // --- verification -------------------------------------------------------------------------------

  /**
   * `POST /campaigns/verifyrewardcode`. The secret finds its campaign (keyed digest, compared in
   * constant time). Failures count per address and campaign (unknown secrets per address); past the
   * limit every answer is 429, whatever the code, so guessing learns nothing.
   */
  async verify(
    input: { campaignSecret: string; verificationCode: string; campaignId?: string },
    address: string,
  ): Promise<Verification> {
    const digest = digestSecret(this.deps.digestKey, input.campaignSecret);
    const found = await store.findCampaignBySecret(this.db, digest);
    const campaign =
      found &&
      constantTimeEqual(found.secret_digest, digest) &&
      (input.campaignId === undefined || input.campaignId === found.campaign_id)
        ? found
        : null;
    const key = campaign
      ? `${address}\u0000${campaign.campaign_id}`
      : `${address}\u0000?${input.campaignId ?? ''}`;
    const wait = this.limiter.retryAfterS(key);
    if (wait !== null) throw problems.rateLimited(wait);
    if (!campaign) {
      this.limiter.fail(key);
      throw problems.invalidCampaignSecret();
    }
    const code = parseVerificationCode(input.verificationCode);
    const claim = code ? await store.findClaimByCode(this.db, campaign.campaign_id, code) : undefined;
    if (!claim) {
      this.limiter.fail(key);
      throw problems.entitlementNotFound();
    }
    const now = this.deps.clock.now();
    const first = await this.db.transaction().execute(async (trx) => {
      if (!(await store.markVerified(trx, claim.claim_id, now))) return false;
      await this.deps.outbox.enqueue(trx, [verifiedMessage(claim, now)]);
      return true;
    });
    const verifiedAt = first
      ? now
      : (claim.verified_at ?? (await store.findClaimById(this.db, claim.claim_id)).verified_at!);
    return {
      claimId: claim.claim_id,
      rewardCode: claim.reward_code,
      playerId: claim.player_id,
      claimedAt: claim.claimed_at,
      verifiedAt,
      alreadyVerified: !first,
    };
  }
}

function rewardCodeTaken(code: string | null) {
  return problems.rewardCodeTaken(
    code === null
      ? 'A reward code is already used in this campaign.'
      : `The reward code "${code}" is already used in this campaign.`,
  );
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

function verifiedMessage(row: ClaimRow, verifiedAt: number): OutboxMessage {
  return {
    tenantId: row.tenant_id,
    type: 'reward.verified',
    data: {
      claimId: row.claim_id,
      campaignId: row.campaign_id,
      challengeId: row.challenge_id,
      playerId: row.player_id,
      rewardCode: row.reward_code,
      claimedAt: row.claimed_at,
      verifiedAt,
    },
    occurredAt: verifiedAt,
  };
}
