import type { Redemption } from '@liveline/protocol';
import type { HttpClient } from './http.ts';

export type {
  DisplayCodeRedemption,
  IntentForm,
  IntentRedemption,
  Redemption,
  WebUrlRedemption,
} from '@liveline/protocol';

/**
 * Streaming challenges for the viewer app (CONTRACT §7): the player's challenges with progress and
 * status, and claiming a completed one. The claim's `redemption` says what the app does next: show
 * `instructions` (display code), fire the intent (falling back to opening `fallbackUrl`), or open `url`.
 */

export type ChallengeRuleType =
  | 'totalMinutes'
  | 'singleSessionMinutes'
  | 'uniqueDays'
  | 'streakDays'
  | 'sessionCount';

export type ChallengeStatus = 'inProgress' | 'complete' | 'claimed';

export interface Claim {
  /** Positive integer, unique per deployment. */
  claimId: number;
  challengeId: string;
  campaignId: string;
  rewardCode: string;
  achievementCode: string;
  /** `XXXX-XXXX`. */
  displayCode: string;
  claimedAt: number;
  redemption: Redemption;
}

export interface Challenge {
  challengeId: string;
  campaignId: string;
  rewardCode: string;
  rewardTitle: string;
  rewardRequirement: string;
  rule: { type: ChallengeRuleType; target: number };
  /** The 200×200 JPEG; load it with the device token. */
  imageUrl: string;
  createdAt: number;
  updatedAt: number;
  progress: { value: number; target: number };
  status: ChallengeStatus;
  /** The player's claim, once claimed. */
  claim: Claim | null;
}

/** Every challenge of the tenant's current campaigns, with this player's progress. */
export async function challenges(http: HttpClient): Promise<Challenge[]> {
  const page = await http.request<{ challenges: Challenge[] }>('GET', '/client/v1/challenges');
  return page.challenges;
}

/**
 * Claims a completed challenge; claiming it again returns the same claim. Fails with a
 * `LivelineError` of code `challenge_not_complete` (409) before the rule is met.
 */
export function claim(http: HttpClient, challengeId: string): Promise<Claim> {
  return http.request<Claim>('POST', `/client/v1/challenges/${encodeURIComponent(challengeId)}/claim`);
}
