import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { tenantOf } from '../../../http/auth.ts';
import { problemResponses } from '../../../http/schemas.ts';
import { CohortId, DeviceTokenSchema, PlayerId } from '../schemas.ts';
import type { AuthService } from '../service.ts';

/** Device tokens minted by the tenant backend: for a known player, or for a new anonymous pool player. */
export function registerDeviceTokenRoutes(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: { tenant: 'tokens:issue' } } as const;

  app.post(
    '/client-tokens',
    {
      config,
      schema: {
        tags: ['auth'],
        summary: 'Mint a device token for a player.',
        body: Type.Object(
          {
            playerId: PlayerId,
            tenantCohortId: Type.Optional(CohortId),
            ttlSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 30 * 86400 })),
          },
          { additionalProperties: false },
        ),
        response: { 200: DeviceTokenSchema, ...problemResponses(400, 401, 403) },
      },
    },
    async (request) => {
      const { playerId, tenantCohortId, ttlSeconds } = request.body;
      const player = { playerId, tenantCohortId: tenantCohortId ?? null, ttlSeconds };
      return auth.mintDeviceToken(tenantOf(request).tenantId, player);
    },
  );

  app.get(
    '/poolusers/newtoken',
    {
      config,
      schema: {
        tags: ['auth'],
        summary: 'Mint a device token for a new anonymous pool player.',
        querystring: Type.Object(
          { tenantCohortId: Type.Optional(CohortId) },
          { additionalProperties: false },
        ),
        response: { 200: DeviceTokenSchema, ...problemResponses(400, 401, 403) },
      },
    },
    async (request) =>
      auth.mintPoolUserToken(tenantOf(request).tenantId, request.query.tenantCohortId ?? null),
  );
}
