import type { Clock } from '../../clock.ts';
import { problems } from '../../http/problem.ts';
import { addressKey, type FailureWindow } from '../../limits/index.ts';
import type { Outbox, OutboxMessage } from '../../outbox.ts';
import { constantTimeEqual } from '../../secrets.ts';
import type { Storage } from '../../storage/index.ts';
import type { CampaignsService } from './campaigns.ts';
import { parseVerificationCode } from './codes.ts';
import type { ClaimRow } from './store.ts';
import * as store from './store.ts';

export interface VerifyInput {
  campaignSecret: string;
  verificationCode: string;
  campaignId?: string;
}

export interface Verification {
  claimId: number;
  rewardCode: string;
  /** Null once the player's data was erased. */
  playerId: string | null;
  claimedAt: number;
  verifiedAt: number;
  alreadyVerified: boolean;
}

export interface VerifyDeps {
  storage: Storage;
  clock: Clock;
  outbox: Outbox;
  campaigns: CampaignsService;
  /** Failed verifications per address and campaign (CONTRACT §7: 10 a minute), shared by the deployment. */
  failures: FailureWindow;
}

/**
 * The tenant's check of a claim (`POST /campaigns/verifyrewardcode`). The secret finds its campaign
 * (keyed digest, compared in constant time). Failures count per address and campaign (unknown
 * secrets per address); past the limit every answer is 429, whatever the code, so guessing learns
 * nothing. The first verification writes `reward.verified` in its own transaction.
 */
export class VerifyService {
  constructor(private readonly deps: VerifyDeps) {}

  async verify(input: VerifyInput, address: string): Promise<Verification> {
    const digest = this.deps.campaigns.digest(input.campaignSecret);
    const found = await this.deps.campaigns.bySecretDigest(digest);
    const campaign =
      found &&
      constantTimeEqual(found.secret_digest, digest) &&
      (input.campaignId === undefined || input.campaignId === found.campaign_id)
        ? found
        : null;
    // Unknown secrets count per address, whatever campaign the caller names. An IPv6 address counts
    // by its /64 (one line's hosts share it).
    const from = addressKey(address);
    const key = campaign ? `${from}\u0000${campaign.campaign_id}` : `${from}\u0000?`;
    // The failure is reserved before the lookup and given back on success: a burst cannot pass the limit.
    const reservation = await this.deps.failures.reserve(key);
    if (!reservation.ok) throw problems.rateLimited(reservation.retryAfterS);
    if (!campaign) throw problems.invalidCampaignSecret();
    const code = parseVerificationCode(input.verificationCode);
    const db = this.deps.storage.db;
    const claim = code ? await store.findClaimByCode(db, campaign.campaign_id, code) : undefined;
    if (!claim) throw problems.entitlementNotFound();
    await this.deps.failures.release(key, reservation.token);
    return this.markVerified(claim);
  }

  /** Sets `verifiedAt` once (conditional update): concurrent first verifications give one `alreadyVerified: false`. */
  private async markVerified(claim: ClaimRow): Promise<Verification> {
    const db = this.deps.storage.db;
    const now = this.deps.clock.now();
    const first = await db.transaction().execute(async (trx) => {
      if (!(await store.markVerified(trx, claim.claim_id, now))) return false;
      await this.deps.outbox.enqueue(trx, [verifiedMessage(claim, now)]);
      return true;
    });
    const verifiedAt = first
      ? now
      : (claim.verified_at ?? (await store.findClaimById(db, claim.claim_id)).verified_at!);
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
