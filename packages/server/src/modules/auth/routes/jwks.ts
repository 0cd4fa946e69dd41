import type { FastifyInstance } from 'fastify';
import type { AuthService } from '../service.ts';

/** `GET /.well-known/jwks.json`: the keys that verify access and device tokens. */
export function registerJwksRoute(app: FastifyInstance, auth: AuthService) {
  app.get(
    '/.well-known/jwks.json',
    { schema: { tags: ['auth'], summary: 'Public keys that verify access and device tokens.' } },
    async () => auth.jwks,
  );
}
