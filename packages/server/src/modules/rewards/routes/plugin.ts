import type { FastifyPluginAsync } from 'fastify';
import type { Rewards } from '../rewards.ts';
import { registerCampaignChangeRoutes, registerCampaignRoutes } from './campaigns.ts';
import {
  registerChallengeChangeRoutes,
  registerChallengeCreateRoute,
  registerChallengeRoutes,
  registerImageRoute,
} from './challenges.ts';
import { registerClaimRoute } from './claims.ts';
import { registerDeviceChallengesRoute } from './device.ts';
import { registerImportRoute } from './import.ts';
import { mounts } from './mount.ts';
import { registerProgressRoute } from './progress.ts';
import { registerVerifyRoute } from './verify.ts';

export interface RewardsPluginOptions {
  rewards: Rewards;
  /** LIVELINE_PUBLIC_URL: the prefix of `imageUrl` (else the URL the caller reached). */
  publicUrl: string | null;
}

/**
 * Campaigns, challenges, progress, claims and verification (CONTRACT §7). The campaign and challenge
 * routes are mounted twice, for the tenant and for the operator; then the viewer app's routes and
 * the verification. The plugin starts nothing.
 */
export const rewardsPlugin: FastifyPluginAsync<RewardsPluginOptions> = async (
  app,
  { rewards, publicUrl },
) => {
  for (const mount of mounts(rewards, publicUrl)) {
    registerCampaignRoutes(app, rewards, mount);
    registerCampaignChangeRoutes(app, rewards, mount);
    registerChallengeCreateRoute(app, rewards, mount);
    await registerImportRoute(app, rewards, mount);
    registerChallengeRoutes(app, rewards, mount);
    registerChallengeChangeRoutes(app, rewards, mount);
    registerImageRoute(app, rewards, mount);
    registerProgressRoute(app, rewards, mount);
  }
  registerDeviceChallengesRoute(app, rewards, publicUrl);
  registerClaimRoute(app, rewards);
  registerVerifyRoute(app, rewards);
};
