import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { problemResponses } from '../../../http/schemas.ts';
import type { Rewards } from '../rewards.ts';
import { VerifyAnswer, VerifyBody } from '../schemas.ts';

/** The tenant's claims machine asks whether a code is a real claim (no bearer token: the secret is the credential). */
export function registerVerifyRoute(root: FastifyInstance, rewards: Rewards) {
  root.withTypeProvider<TypeBoxTypeProvider>().post(
    '/campaigns/verifyrewardcode',
    {
      schema: {
        tags: ['campaigns'],
        operationId: 'verifyRewardCode',
        summary: 'Verify a claim by its display code or achievement code.',
        description:
          'The campaign secret identifies the campaign (campaignId optional; when given it must match). ' +
          'The display code is read case-insensitively with or without its hyphen. The first verification ' +
          'sets verifiedAt; repeats answer alreadyVerified: true. 401 invalid_campaign_secret, 404 ' +
          'entitlement_not_found; more than 10 failures a minute from one address for one campaign → 429.',
        body: VerifyBody,
        response: { 200: VerifyAnswer, ...problemResponses(400, 401, 404, 415, 429) },
      },
    },
    async (request) => rewards.verification.verify(request.body, request.ip),
  );
}
