import type { Clock } from '../../clock.ts';
import type { CampaignsService } from './campaigns.ts';
import type { EvaluatedChallenge, Standings } from './standing.ts';

export interface DeviceDeps {
  clock: Clock;
  campaigns: CampaignsService;
  standings: Standings;
}

/** The viewer app's list: every challenge of the tenant's current campaigns, as its player stands on it. */
export class DeviceChallenges {
  constructor(private readonly deps: DeviceDeps) {}

  async list(tenantId: string, playerId: string): Promise<EvaluatedChallenge[]> {
    const now = this.deps.clock.now();
    const campaigns = await this.deps.campaigns.current(tenantId, now);
    return (await this.deps.standings.evaluate(campaigns, tenantId, playerId, now)).challenges;
  }
}
