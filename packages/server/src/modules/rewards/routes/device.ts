import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { deviceOf } from '../../../http/auth.ts';
import { envelopeSchema, listEnvelope } from '../../../http/pagination.ts';
import { problemResponses } from '../../../http/schemas.ts';
import type { Rewards } from '../rewards.ts';
import { DeviceChallengeSchema } from '../schemas.ts';
import { deviceChallengeView } from '../views.ts';
import { serverUrl } from './mount.ts';

/** The viewer app's list: its player's challenges with progress, status and claim. */
export function registerDeviceChallengesRoute(
  root: FastifyInstance,
  rewards: Rewards,
  publicUrl: string | null,
) {
  root.withTypeProvider<TypeBoxTypeProvider>().get(
    '/client/v1/challenges',
    {
      config: { auth: { device: true } },
      schema: {
        tags: ['device'],
        operationId: 'listPlayerChallenges',
        summary: "Every challenge of the tenant's current campaigns, with the player's progress and status.",
        response: {
          200: envelopeSchema('challenges', DeviceChallengeSchema),
          ...problemResponses(400, 401, 403, 429),
        },
      },
    },
    async (request) => {
      const { tenantId, playerId } = deviceOf(request);
      const all = await rewards.device.list(tenantId, playerId);
      const page = { page: 1, pageSize: 1000 };
      const urlBase = serverUrl(publicUrl, request);
      const items = all.slice(0, page.pageSize).map((e) => deviceChallengeView(e, urlBase));
      return listEnvelope('challenges', items, page, all.length);
    },
  );
}
