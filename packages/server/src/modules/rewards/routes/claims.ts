import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { deviceOf } from '../../../http/auth.ts';
import { EmptyObject, problemResponses, Uuid } from '../../../http/schemas.ts';
import type { Rewards } from '../rewards.ts';
import { ClaimSchema } from '../schemas.ts';
import { claimView } from '../views.ts';
import { emptyBody } from './mount.ts';

/** The viewer app claims a completed challenge for its player. */
export function registerClaimRoute(root: FastifyInstance, rewards: Rewards) {
  root.withTypeProvider<TypeBoxTypeProvider>().post(
    '/client/v1/challenges/:challengeId/claim',
    {
      config: { auth: { device: true } },
      preValidation: emptyBody,
      schema: {
        tags: ['device'],
        operationId: 'claimChallenge',
        summary: 'Claim a completed challenge: 201 the new claim, 200 the same claim again.',
        description:
          '409 `challenge_not_complete` (with `progress`) before the rule is met; 409 `campaign_not_active`.',
        params: Type.Object({ challengeId: Uuid }, { additionalProperties: false }),
        body: EmptyObject,
        response: {
          200: ClaimSchema,
          201: ClaimSchema,
          ...problemResponses(400, 401, 403, 404, 409, 429),
        },
      },
    },
    async (request, reply) => {
      const { tenantId, playerId } = deviceOf(request);
      const { claim, created } = await rewards.claims.claim(tenantId, playerId, request.params.challengeId);
      return reply.code(created ? 201 : 200).send(claimView(claim));
    },
  );
}
