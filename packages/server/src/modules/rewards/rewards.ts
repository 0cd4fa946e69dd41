import type { Clock } from '../../clock.ts';
import type { QuotaConfig, RewardsConfig } from '../../config.ts';
import { problems } from '../../http/problem.ts';
import type { FailureWindow } from '../../limits/index.ts';
import type { Outbox } from '../../outbox.ts';
import type { Storage } from '../../storage/index.ts';
import { CampaignsService } from './campaigns.ts';
import { ChallengesService } from './challenges.ts';
import { type ClaimCodes, ClaimsService, RANDOM_CODES } from './claims.ts';
import { DeviceChallenges } from './device.ts';
import { ChallengeImport } from './import.ts';
import { Standings, type StreamIntervals } from './standing.ts';
import { VerifyService } from './verify.ts';

/** What rewards needs to know of tenants (the auth module has them): the operator routes name one. */
export interface TenantDirectory {
  tenantExists(tenantId: string): Promise<boolean>;
}

export interface RewardsDeps {
  storage: Storage;
  clock: Clock;
  config: { rewards: RewardsConfig; quotas: Pick<QuotaConfig, 'campaigns' | 'challenges'> };
  /** Key of the keyed digest of campaign secrets. */
  digestKey: Buffer;
  /** Where `reward.claimed` and `reward.verified` go, in the transaction of the claim or verification. */
  outbox: Outbox;
  /** The player's stream intervals, from which progress is computed. */
  streams: StreamIntervals;
  tenants: TenantDirectory;
  /** Failed verifications per address and campaign, in a window shared by the deployment's processes. */
  verifyFailures: FailureWindow;
  /** Where claim codes come from; random by default (tests force collisions through it). */
  codes?: ClaimCodes;
}

/** The rewards module's services, one per sub-capability (CONTRACT §7). */
export interface Rewards {
  campaigns: CampaignsService;
  challenges: ChallengesService;
  /** The CSV template import, all or nothing. */
  imports: ChallengeImport;
  /** Progress and status of players, computed on demand. */
  standings: Standings;
  /** The viewer app's challenge list. */
  device: DeviceChallenges;
  claims: ClaimsService;
  verification: VerifyService;
  /** The tenant an operator route names, or 404. */
  requireTenant(tenantId: string): Promise<string>;
}

/** Builds the rewards services. It starts nothing and hooks into nothing. */
export function createRewards(deps: RewardsDeps): Rewards {
  const { storage, clock, outbox, tenants } = deps;
  const { quotas } = deps.config;
  const campaigns = new CampaignsService({
    storage,
    clock,
    digestKey: deps.digestKey,
    maxCampaigns: quotas.campaigns,
  });
  const challenges = new ChallengesService({ storage, clock, maxChallenges: quotas.challenges });
  const standings = new Standings({ storage, clock, streams: deps.streams, challenges });
  const codes = deps.codes ?? RANDOM_CODES;
  return {
    campaigns,
    challenges,
    imports: new ChallengeImport({ challenges, limitBytes: deps.config.rewards.importLimitBytes }),
    standings,
    device: new DeviceChallenges({ clock, campaigns, standings }),
    claims: new ClaimsService({ storage, clock, outbox, campaigns, challenges, standings, codes }),
    verification: new VerifyService({
      storage,
      clock,
      outbox,
      campaigns,
      failures: deps.verifyFailures,
    }),
    async requireTenant(tenantId) {
      if (!(await tenants.tenantExists(tenantId))) throw problems.notFound('tenant');
      return tenantId;
    },
  };
}
