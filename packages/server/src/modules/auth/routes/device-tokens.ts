import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { tenantOf } from '../../../http/auth.ts';
import { Int32, problemResponses } from '../../../http/schemas.ts';
import { MAX_TOKEN_LIFETIME_S } from '../keys.ts';
import {
  CohortId,
  DeviceTokenSchema,
  PlayerId,
  PlayerTokensRevokedSchema,
  RevokePlayerTokensBody,
} from '../schemas.ts';
import type { AuthService } from '../service.ts';

/**
 * Device tokens minted by the tenant backend: for a known player, or for a new anonymous pool player.
 */
export function registerDeviceTokenRoutes(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: { tenant: 'tokens:issue' } } as const;

  app.post(
    '/client-tokens',
    {
      config,
      schema: {
        tags: ['auth'],
        operationId: 'issueDeviceToken',
        summary: 'Mint a device token for a player.',
        body: Type.Object(
          {
            playerId: PlayerId,
            tenantCohortId: Type.Optional(CohortId),
            ttlSeconds: Type.Optional(
              Int32(60, MAX_TOKEN_LIFETIME_S, 'Lifetime of the token, 60 s to 30 days.'),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: DeviceTokenSchema, ...problemResponses(400, 401, 403) },
      },
    },
    async (request) => {
      const { playerId, tenantCohortId, ttlSeconds } = request.body;
      const player = { playerId, tenantCohortId: tenantCohortId ?? null, ttlSeconds };
      return auth.mintDeviceToken(tenantOf(request), player);
    },
  );

  app.get(
    '/poolusers/newtoken',
    {
      config,
      schema: {
        tags: ['auth'],
        operationId: 'issuePoolUserToken',
        summary: 'Mint a device token for a new anonymous pool player.',
        querystring: Type.Object(
          { tenantCohortId: Type.Optional(CohortId) },
          { additionalProperties: false },
        ),
        response: { 200: DeviceTokenSchema, ...problemResponses(400, 401, 403) },
      },
    },
    async (request) => auth.mintPoolUserToken(tenantOf(request), request.query.tenantCohortId ?? null),
  );
}

/** A player's device tokens revoked. */
export function registerTokenRevocationRoute(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: { tenant: 'tokens:issue' } } as const;

  app.post(
    '/client-tokens/revoke',
    {
      config,
      schema: {
        tags: ['auth'],
        operationId: 'revokePlayerTokens',
        summary:
          "Revoke every device token of a player issued before now: they fail at once (401) and the player's " +
          'open realtime sockets close with 4003. Tokens minted afterwards work.',
        body: RevokePlayerTokensBody,
        response: { 200: PlayerTokensRevokedSchema, ...problemResponses(400, 401, 403) },
      },
    },
    async (request) => auth.revokePlayerTokens(tenantOf(request).tenantId, request.body.playerId),
  );
}
