import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { noBodyIsEmptyObject } from '../../../http/empty-body.ts';
import { problemResponses } from '../../../http/schemas.ts';
import { RotatedKeySchema, RotateKeyBody, SigningKeysSchema } from '../schemas.ts';
import type { AuthService } from '../service.ts';
import { operatorOnly } from './tenants.ts';

/** The operator's view of the token signing keys, and their rotation (`liveline admin keys`). */
export function registerKeyRoutes(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/admin/v1/keys',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        operationId: 'listSigningKeys',
        summary: 'The token signing keys (public facts only), newest last; the newest signs.',
        response: { 200: SigningKeysSchema, ...problemResponses(401, 403) },
      },
    },
    async () => ({ keys: auth.signingKeys() }),
  );

  app.post(
    '/admin/v1/keys/rotate',
    {
      config: operatorOnly,
      preValidation: noBodyIsEmptyObject,
      schema: {
        tags: ['admin'],
        operationId: 'rotateSigningKey',
        summary: 'Make a new signing key: it signs from now on, on every process within a second.',
        description:
          'Older keys keep verifying the tokens they signed until the longest token lifetime (30 days) ' +
          'has passed, then are deleted. `{"retireOthers": true}` deletes them at once (a key leaked): ' +
          'every token signed before stops working.',
        body: RotateKeyBody,
        response: { 200: RotatedKeySchema, ...problemResponses(400, 401, 403, 415) },
      },
    },
    async (request) => auth.rotateSigningKey({ retireOthers: request.body.retireOthers === true }),
  );
}
