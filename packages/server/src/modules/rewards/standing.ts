import type { Clock } from '../../clock.ts';
import type { Storage } from '../../storage/index.ts';
import type { ChallengesService } from './challenges.ts';
import { computeProgress, type ProgressMetrics, type RuleType } from './progress.ts';
import type { CampaignRow, ChallengeRow, ClaimRow } from './store.ts';
import * as store from './store.ts';

/** What rewards needs of the streams module: a player's stream intervals (server times). */
export interface StreamIntervals {
  intervalsForPlayer(
    tenantId: string,
    playerId: string,
    from?: number,
  ): Promise<{ startedAt: number; stoppedAt: number | null }[]>;
}

export type ChallengeStatus = 'inProgress' | 'complete' | 'claimed';

/** A challenge as one player stands on it now. */
export interface EvaluatedChallenge {
  challenge: ChallengeRow;
  progress: { value: number; target: number };
  status: ChallengeStatus;
  claim: ClaimRow | null;
}

export interface StandingsDeps {
  storage: Storage;
  clock: Clock;
  streams: StreamIntervals;
  challenges: ChallengesService;
}

function statusOf(value: number, target: number, claim: ClaimRow | undefined): ChallengeStatus {
  if (claim) return 'claimed';
  return value >= target ? 'complete' : 'inProgress';
}

/**
 * Where players stand: progress computed on demand (never stored) from the streams module's
 * intervals by the pure engine in `progress.ts`, with the player's claims.
 */
export class Standings {
  constructor(private readonly deps: StandingsDeps) {}

  /** Each campaign's metrics for the player at `now`, from one read of the player's streams. */
  async metrics(campaigns: CampaignRow[], tenantId: string, playerId: string, now: number) {
    const out = new Map<string, ProgressMetrics>();
    if (campaigns.length === 0) return out;
    // From the earliest start on (all of them when a campaign has no start).
    const from = campaigns.some((c) => c.starts_at === null)
      ? undefined
      : Math.min(...campaigns.map((c) => c.starts_at!));
    const intervals = await this.deps.streams.intervalsForPlayer(tenantId, playerId, from);
    const spans = intervals.map((i) => ({ start: i.startedAt, stop: i.stoppedAt }));
    for (const c of campaigns) {
      const window = { timezone: c.timezone, startsAt: c.starts_at, endsAt: c.ends_at };
      out.set(c.campaign_id, computeProgress({ intervals: spans, now, ...window }));
    }
    return out;
  }

  /** The player on every challenge of these campaigns (of one tenant), at `now`. */
  async evaluate(campaigns: CampaignRow[], tenantId: string, playerId: string, now: number) {
    const challenges = await this.deps.challenges.ofCampaigns(campaigns.map((c) => c.campaign_id));
    const ids = challenges.map((c) => c.challenge_id);
    const [metrics, claims] = await Promise.all([
      this.metrics(campaigns, tenantId, playerId, now),
      store.claimsOfPlayer(this.deps.storage.db, tenantId, playerId, ids),
    ]);
    const evaluated = challenges.map((challenge): EvaluatedChallenge => {
      const value = metrics.get(challenge.campaign_id)![challenge.rule_type as RuleType];
      const claim = claims.get(challenge.challenge_id);
      return {
        challenge,
        progress: { value, target: challenge.rule_target },
        status: statusOf(value, challenge.rule_target, claim),
        claim: claim ?? null,
      };
    });
    return { metrics, challenges: evaluated };
  }

  /** The tenant's view of one player in one campaign, now. */
  async inCampaign(campaign: CampaignRow, playerId: string) {
    const now = this.deps.clock.now();
    const { metrics, challenges } = await this.evaluate([campaign], campaign.tenant_id, playerId, now);
    return { evaluatedAt: now, metrics: metrics.get(campaign.campaign_id)!, challenges };
  }
}
