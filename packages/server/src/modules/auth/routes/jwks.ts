import type { FastifyInstance } from 'fastify';
import { JwksSchema } from '../schemas.ts';
import type { AuthService } from '../service.ts';

/** `GET /.well-known/jwks.json`: the keys that verify access and device tokens. */
export function registerJwksRoute(app: FastifyInstance, auth: AuthService) {
  app.get(
    '/.well-known/jwks.json',
    {
      schema: {
        tags: ['auth'],
        operationId: 'getJwks',
        summary: 'Public keys that verify access and device tokens.',
        response: { 200: JwksSchema },
      },
    },
    async () => auth.jwks,
  );
}
