import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import { enforceQuota } from '../../limits/quota.ts';
import type { Storage } from '../../storage/index.ts';
import { checkRewardImage, decodeBase64Image } from './jpeg.ts';
import type { RuleType } from './progress.ts';
import type { CampaignRow, ChallengeRow } from './store.ts';
import * as store from './store.ts';

export type Rule = { type: RuleType; target: number };

/** A challenge to create, its image already checked. */
export interface NewChallenge {
  rewardCode: string;
  rewardTitle: string;
  rewardRequirement: string;
  image: Buffer;
  rule: Rule;
}

/** A challenge as the JSON API takes it: the image in base64. */
export interface ChallengeInput extends Omit<NewChallenge, 'image'> {
  rewardImage: string;
}

export type ChallengeChanges = Partial<ChallengeInput>;

export interface ChallengesDeps {
  storage: Storage;
  clock: Clock;
  /** Challenges per tenant over all its campaigns (`LIVELINE_QUOTA_CHALLENGES`; 0: no quota). */
  maxChallenges?: number;
}

/** A campaign's challenges and their images (CONTRACT §7). */
export class ChallengesService {
  constructor(private readonly deps: ChallengesDeps) {}

  private get db() {
    return this.deps.storage.db;
  }

  /** One challenge from a JSON body: 400 `invalid_image` unless a 200×200 JPEG, 409 `reward_code_taken`. */
  async create(campaign: CampaignRow, input: ChallengeInput): Promise<ChallengeRow> {
    const { rewardImage, ...rest } = input;
    const [row] = await this.createAll(campaign, [{ ...rest, image: rewardImageFromBase64(rewardImage) }]);
    return row;
  }

  /** Creates all of them or none; 409 `reward_code_taken` when a reward code is already in the campaign. */
  async createAll(campaign: CampaignRow, inputs: NewChallenge[]): Promise<ChallengeRow[]> {
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
        const limit = this.deps.maxChallenges ?? 0;
        // Counted in the inserting transaction: a concurrent burst (or import) cannot pass the quota.
        await enforceQuota(this.deps.storage, trx, {
          tenantId: campaign.tenant_id,
          limit,
          adding: rows.length,
          count: (db) => store.countChallenges(db, campaign.tenant_id),
          refuse: () => problems.quotaExceeded('challenge_quota_exceeded', 'challenges', limit),
        });
        const codes = rows.map((r) => r.reward_code);
        const taken = await store.rewardCodesTaken(trx, campaign.campaign_id, codes);
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

  /** The campaign's challenge, or 404. */
  async get(campaign: CampaignRow, challengeId: string): Promise<ChallengeRow> {
    const row = await store.findChallenge(this.db, campaign.tenant_id, challengeId);
    if (!row || row.campaign_id !== campaign.campaign_id) throw problems.notFound('challenge');
    return row;
  }

  /** The tenant's challenge in whichever campaign, or 404. */
  async ofTenant(tenantId: string, challengeId: string): Promise<ChallengeRow> {
    const row = await store.findChallenge(this.db, tenantId, challengeId);
    if (!row) throw problems.notFound('challenge');
    return row;
  }

  list(campaign: CampaignRow, page: PageRequest) {
    return store.listChallenges(this.db, campaign.campaign_id, page);
  }

  /** Every challenge of the given campaigns, in campaign order, then creation order. */
  ofCampaigns(campaignIds: string[]) {
    return store.challengesOf(this.db, campaignIds);
  }

  /** Reward code and rule are what a claim was made against: once claimed, they stay (409 `challenge_claimed`). */
  async update(row: ChallengeRow, changes: ChallengeChanges): Promise<ChallengeRow> {
    const image = changes.rewardImage === undefined ? undefined : rewardImageFromBase64(changes.rewardImage);
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
    if (image !== undefined) set.image = image.toString('base64');
    try {
      await store.updateChallenge(this.db, row.challenge_id, set);
    } catch (err) {
      if (this.deps.storage.isUniqueViolation(err)) throw rewardCodeTaken(changes.rewardCode ?? null);
      throw err;
    }
    const { image: _image, ...rest } = set;
    return { ...row, ...rest };
  }

  /** Deletes a challenge nobody has claimed (else 409 `challenge_claimed`). */
  async remove(row: ChallengeRow): Promise<void> {
    if (!(await store.deleteUnclaimedChallenge(this.db, row.challenge_id))) {
      throw problems.challengeClaimed('The challenge has been claimed and cannot be deleted.');
    }
  }

  /** The challenge's JPEG and when it last changed (for the ETag), or 404. */
  async image(tenantId: string, campaignId: string, challengeId: string) {
    const row = await store.challengeImage(this.db, tenantId, campaignId, challengeId);
    if (!row) throw problems.notFound('challenge');
    return { bytes: Buffer.from(row.image, 'base64'), updatedAt: row.updated_at };
  }
}

/** A base64 JPEG from a JSON body, or 400 `invalid_image`. */
function rewardImageFromBase64(text: string, path = 'rewardImage'): Buffer {
  const decoded = decodeBase64Image(text);
  const check = decoded.ok ? checkRewardImage(decoded.bytes) : decoded;
  if (decoded.ok && check.ok) return decoded.bytes;
  const reason = check.ok ? 'is not usable' : check.reason;
  throw problems.invalidImage(`The reward image is not usable: ${reason}.`, [{ path, message: reason }]);
}

function rewardCodeTaken(code: string | null) {
  return problems.rewardCodeTaken(
    code === null
      ? 'A reward code is already used in this campaign.'
      : `The reward code "${code}" is already used in this campaign.`,
  );
}
