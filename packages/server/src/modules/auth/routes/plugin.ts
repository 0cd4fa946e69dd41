import type { FastifyPluginAsync } from 'fastify';
import type { FailureWindow } from '../../../limits/index.ts';
import type { AuthService } from '../service.ts';
import { registerClientRevokeRoute, registerClientRoutes, registerClientSecretRoutes } from './clients.ts';
import { registerDeviceTokenRoutes, registerTokenRevocationRoute } from './device-tokens.ts';
import { registerJwksRoute } from './jwks.ts';
import { registerKeyRoutes } from './keys.ts';
import { registerTokenRoute } from './oauth.ts';
import {
  registerTenantCreateRoute,
  registerTenantListRoutes,
  registerTenantPatchRoute,
  registerTenantRoute,
} from './tenants.ts';

export interface AuthRoutesOptions {
  auth: AuthService;
  /** Refused client authentications at `/oauth/token`, per client id and address (none: no limit). */
  tokenFailures?: FailureWindow;
}

/**
 * OAuth2 client credentials, JWKS, device tokens and their revocation, client secret rotation, and the
 * operator's tenant, client and signing-key routes.
 */
export const authRoutes: FastifyPluginAsync<AuthRoutesOptions> = async (app, { auth, tokenFailures }) => {
  // Only /oauth/token takes a form (RFC 6749 §4.4); the parser stays inside this plugin.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
  registerTokenRoute(app, auth, tokenFailures);
  registerJwksRoute(app, auth);
  registerDeviceTokenRoutes(app, auth);
  registerTokenRevocationRoute(app, auth);
  registerTenantCreateRoute(app, auth);
  registerTenantListRoutes(app, auth);
  registerTenantRoute(app, auth);
  registerTenantPatchRoute(app, auth);
  registerClientRoutes(app, auth);
  registerClientRevokeRoute(app, auth);
  registerClientSecretRoutes(app, auth);
  registerKeyRoutes(app, auth);
};
