import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type {
  AuthService,
  DevicePrincipal,
  Principal,
  Scope,
  TenantPrincipal,
} from '../modules/auth/index.ts';
import { problems } from './problem.ts';

/**
 * Who may call a route, declared in its `config.auth`. Every kind listed is accepted;
 * `tenant` names the scope a tenant token needs. A route without `auth` is public.
 */
export interface AuthSpec {
  operator?: true;
  /** The scope a tenant token needs; with a list, any one of them. */
  tenant?: Scope | readonly Scope[];
  device?: true;
  /** Accept the token in `?access_token=` too (WebSocket upgrades, where browsers cannot set headers). */
  queryToken?: true;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthSpec;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

function bearerToken(request: FastifyRequest, spec: AuthSpec): string | null {
  const header = request.headers.authorization;
  if (header) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return match ? match[1] : null;
  }
  if (spec.queryToken) {
    const q = (request.query as Record<string, unknown> | undefined)?.access_token;
    if (typeof q === 'string' && q !== '') return q;
  }
  return null;
}

export interface AuthPluginOptions {
  /**
   * Who holds a bearer token (`remembered`: at once, for a token this process verified before), and
   * whether the token is still honoured (revocation, in memory).
   */
  auth: Pick<AuthService, 'authenticate' | 'remembered' | 'refusal'>;
}

/** Authenticates every request against its route's `config.auth` before the body is read. */
export const authPlugin = fp(
  async (app: FastifyInstance, { auth }: AuthPluginOptions) => {
    app.decorateRequest('principal', null);
    /** Sets the request's principal, or throws the problem that refuses it for the route (`spec`). */
    const admit = (request: FastifyRequest, spec: AuthSpec, principal: Principal | null) => {
      if (principal?.kind === 'operator') {
        if (!spec.operator) throw problems.tokenNotAccepted('operator');
        request.principal = principal;
        return;
      }
      if (!principal) throw problems.invalidToken();
      // Revoked tokens (a deleted client, a player's revocation) fail at once: an in-memory check on
      // every request, kept current across processes by the bus.
      const refusal = auth.refusal(principal);
      if (refusal === 'expired') throw problems.invalidToken();
      if (refusal === 'revoked')
        throw principal.kind === 'tenant'
          ? problems.clientRevoked()
          : problems.unauthorized('This device token has been revoked.');
      if (principal.kind === 'tenant') {
        if (!spec.tenant) throw problems.tokenNotAccepted('tenant');
        const needed: readonly Scope[] = typeof spec.tenant === 'string' ? [spec.tenant] : spec.tenant;
        if (!needed.some((s) => principal.scopes.has(s))) throw problems.missingScope(needed);
      } else if (!spec.device) {
        throw problems.tokenNotAccepted('device');
      }
      request.principal = principal;
    };
    // Callback style: a token verified before (nearly every request) costs no promise.
    app.addHook('onRequest', (request, _reply, done) => {
      const spec = request.routeOptions.config?.auth;
      if (!spec) return done();
      const token = bearerToken(request, spec);
      if (!token) throw problems.unauthorized();
      const known = auth.remembered(token);
      if (known) {
        admit(request, spec, known);
        return done();
      }
      auth
        .authenticate(token)
        .then((principal) => admit(request, spec, principal))
        .then(() => done(), done);
    });
  },
  { name: 'liveline-auth' },
);

export function tenantOf(request: FastifyRequest): TenantPrincipal {
  const p = request.principal;
  if (p?.kind !== 'tenant') throw problems.unauthorized();
  return p;
}

export function deviceOf(request: FastifyRequest): DevicePrincipal {
  const p = request.principal;
  if (p?.kind !== 'device') throw problems.unauthorized();
  return p;
}

/** The tenant a tenant or device principal acts for. */
export function tenantIdOf(request: FastifyRequest): string {
  const p = request.principal;
  if (p?.kind === 'tenant' || p?.kind === 'device') return p.tenantId;
  throw problems.unauthorized();
}
