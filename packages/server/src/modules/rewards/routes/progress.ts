import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { problemResponses, Uuid } from '../../../http/schemas.ts';
import type { Rewards } from '../rewards.ts';
import { PlayerIdParam, PlayerProgressSchema } from '../schemas.ts';
import { playerProgressView } from '../views.ts';
import { campaignOf, ids, type Mount } from './mount.ts';

/** The tenant's view of one player's progress in a campaign. */
export function registerProgressRoute(root: FastifyInstance, rewards: Rewards, m: Mount) {
  root.withTypeProvider<TypeBoxTypeProvider>().get(
    `${m.base}/campaigns/:campaignId/players/:playerId/progress`,
    {
      config: { auth: m.auth },
      schema: {
        tags: m.tags,
        operationId: m.operationId('get', 'PlayerProgress'),
        summary: "A player's progress on every challenge of the campaign, now.",
        params: m.params({ campaignId: Uuid, playerId: PlayerIdParam }),
        response: { 200: PlayerProgressSchema, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const campaign = await campaignOf(rewards, m, request);
      const { playerId } = ids(request);
      return playerProgressView(campaign, playerId, await rewards.standings.inCampaign(campaign, playerId));
    },
  );
}
