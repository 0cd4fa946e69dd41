import type { ProgressMetrics, RuleType } from './progress.ts';
import type { RedemptionConfig, RedemptionPayload } from './redemption.ts';
import type { EvaluatedChallenge } from './standing.ts';
import type { CampaignRow, ChallengeRow, ClaimRow } from './store.ts';

/** Rows as the API shows them. */

export interface CampaignView {
  campaignId: string;
  name: string;
  timezone: string;
  startsAt: number | null;
  endsAt: number | null;
  redemption: RedemptionConfig;
  createdAt: number;
  updatedAt: number;
}

export function campaignView(row: CampaignRow): CampaignView {
  return {
    campaignId: row.campaign_id,
    name: row.name,
    timezone: row.timezone,
    startsAt: row.starts_at,
    endsAt: row.ends_at,
    redemption: JSON.parse(row.redemption) as RedemptionConfig,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export interface ChallengeView {
  challengeId: string;
  campaignId: string;
  rewardCode: string;
  rewardTitle: string;
  rewardRequirement: string;
  rule: { type: RuleType; target: number };
  imageUrl: string;
  createdAt: number;
  updatedAt: number;
}

/** `imageBase` is the URL prefix up to `/campaigns`: the server's URL, plus the admin path for the operator. */
export function challengeView(row: ChallengeRow, imageBase: string): ChallengeView {
  return {
    challengeId: row.challenge_id,
    campaignId: row.campaign_id,
    rewardCode: row.reward_code,
    rewardTitle: row.reward_title,
    rewardRequirement: row.reward_requirement,
    rule: { type: row.rule_type as RuleType, target: row.rule_target },
    imageUrl: `${imageBase}/campaigns/${row.campaign_id}/challenges/${row.challenge_id}/image`,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export interface ClaimView {
  claimId: number;
  challengeId: string;
  campaignId: string;
  rewardCode: string;
  achievementCode: string;
  displayCode: string;
  claimedAt: number;
  redemption: RedemptionPayload;
}

export function claimView(row: ClaimRow): ClaimView {
  return {
    claimId: row.claim_id,
    challengeId: row.challenge_id,
    campaignId: row.campaign_id,
    rewardCode: row.reward_code,
    achievementCode: row.achievement_code,
    displayCode: row.display_code,
    claimedAt: row.claimed_at,
    redemption: JSON.parse(row.redemption) as RedemptionPayload,
  };
}

/** A challenge in the viewer app's list: the player's progress, status and claim. */
export function deviceChallengeView(e: EvaluatedChallenge, imageBase: string) {
  return {
    ...challengeView(e.challenge, imageBase),
    progress: e.progress,
    status: e.status,
    claim: e.claim ? claimView(e.claim) : null,
  };
}

/** The tenant's view of one player in one campaign. */
export function playerProgressView(
  campaign: CampaignRow,
  playerId: string,
  progress: { evaluatedAt: number; metrics: ProgressMetrics; challenges: EvaluatedChallenge[] },
) {
  return {
    campaignId: campaign.campaign_id,
    playerId,
    evaluatedAt: progress.evaluatedAt,
    metrics: progress.metrics,
    challenges: progress.challenges.map((e) => ({
      challengeId: e.challenge.challenge_id,
      rewardCode: e.challenge.reward_code,
      rewardTitle: e.challenge.reward_title,
      rule: { type: e.challenge.rule_type as RuleType, target: e.challenge.rule_target },
      progress: e.progress,
      status: e.status,
      claimId: e.claim?.claim_id ?? null,
      claimedAt: e.claim?.claimed_at ?? null,
      verifiedAt: e.claim?.verified_at ?? null,
    })),
  };
}
