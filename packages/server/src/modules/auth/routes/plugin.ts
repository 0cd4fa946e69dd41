import type { FastifyPluginAsync } from 'fastify';
import type { AuthService } from '../service.ts';
import { registerClientRevokeRoute, registerClientRoutes } from './clients.ts';
import { registerDeviceTokenRoutes } from './device-tokens.ts';
import { registerJwksRoute } from './jwks.ts';
import { registerTokenRoute } from './oauth.ts';
import { registerTenantCreateRoute, registerTenantListRoutes, registerTenantRoute } from './tenants.ts';

export interface AuthRoutesOptions {
  auth: AuthService;
}

/** OAuth2 client credentials, JWKS, device tokens, and the operator's tenant and client routes. */
export const authRoutes: FastifyPluginAsync<AuthRoutesOptions> = async (app, { auth }) => {
  // Only /oauth/token takes a form (RFC 6749 §4.4); the parser stays inside this plugin.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
  registerTokenRoute(app, auth);
  registerJwksRoute(app, auth);
  registerDeviceTokenRoutes(app, auth);
  registerTenantCreateRoute(app, auth);
  registerTenantListRoutes(app, auth);
  registerTenantRoute(app, auth);
  registerClientRoutes(app, auth);
  registerClientRevokeRoute(app, auth);
};
