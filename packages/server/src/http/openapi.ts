import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import type { FastifySchema } from 'fastify';
import { Type } from 'typebox';
import type { AuthSpec } from './auth.ts';
import { MAX_TIMESTAMP, problemResponses, StringEnum } from './schemas.ts';

/**
 * What the OpenAPI document says beyond each route's own schema, in one place: who may call a route
 * (`security`), the answers every route can give (400, 401, 403, 429, 500, 503), the rate-limit headers,
 * and the document's servers, license and security schemes. Checked by Redocly's `recommended`
 * rules and Spectral's OWASP ruleset (`npm run lint:api`; `redocly.yaml`, `.spectral.yaml`).
 */

/** `GET /healthz`. */
export const HealthSchema = Type.Object({ status: Type.Literal('ok') });

/** `GET /readyz` (CONTRACT §9, §9.1). */
export const ReadinessSchema = Type.Object({
  status: Type.Literal('ready'),
  storage: StringEnum(['sqlite', 'postgres']),
  redis: Type.Optional(
    StringEnum(['up', 'down'], { description: 'With REDIS_URL: whether this process reaches Redis.' }),
  ),
});

/** What each tenant scope allows (CONTRACT §1); a scope missing here is still published. */
const SCOPE_DESCRIPTIONS: Record<string, string> = {
  'sessions:read': 'Read sessions, cohorts, events and commands.',
  'commands:send': 'Send realtime commands to sessions.',
  'events:write': 'Ingest events into sessions.',
  'tokens:issue': 'Mint device tokens for players.',
  'webhooks:manage': 'Register and manage webhook endpoints.',
  'campaigns:manage': 'Manage campaigns and challenges; read player progress.',
  'players:manage': "A player's data: list their sessions, export it, erase it (GDPR access and erasure).",
};

const RFC8725 =
  'Signed JWTs following RFC8725 (JWT best current practices): one algorithm accepted (the one the ' +
  'server signs with, ES256), issuer, audience (a different one per token kind) and expiry ' +
  'verified, keys by `kid` from `/.well-known/jwks.json`.';

/** The document's fixed parts: info, servers, security schemes with their scopes. */
export function openapiDefinition(scopes: readonly string[]): FastifyDynamicSwaggerOptions['openapi'] {
  return {
    openapi: '3.1.0',
    info: {
      title: 'liveline',
      version: '0.1.0',
      description:
        'Realtime commands, sessions, cohorts, events, webhooks and streaming challenges for apps on VR headsets.',
      // The repository carries no licence: the deployment's operator holds the rights.
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [
      {
        url: '/',
        description:
          'The server that serves this document: production, staging or a local one alike (its own origin).',
        'x-internal': false,
      } as { url: string; description: string },
    ],
    components: {
      securitySchemes: {
        tenantToken: {
          type: 'oauth2' as const,
          description: `Tenant access token from the client-credentials grant (\`POST /oauth/token\`), sent as \`Authorization: Bearer\`. ${RFC8725}`,
          flows: {
            clientCredentials: {
              tokenUrl: '/oauth/token',
              scopes: Object.fromEntries(
                scopes.map((s) => [s, SCOPE_DESCRIPTIONS[s] ?? `The \`${s}\` scope.`]),
              ),
            },
          },
        },
        deviceToken: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: `Device token minted by the tenant backend (\`POST /client-tokens\`). ${RFC8725}`,
        },
        operatorToken: {
          type: 'http',
          scheme: 'bearer',
          description:
            'The operator (admin) token: `LIVELINE_ADMIN_TOKEN`, or the one written at first start.',
        },
      },
      headers: RATE_LIMIT_HEADERS,
    },
  };
}

const header = (description: string, maximum: number) => ({
  description,
  schema: { type: 'integer' as const, format: 'int64', minimum: 0, maximum },
});

/**
 * The headers of @fastify/rate-limit (CONTRACT §8), on every answer to a request counted against a
 * tenant's or a session's budget; `Retry-After` on every 429 and on a 503 `overloaded`.
 */
const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': header(
    'Requests allowed per second on this budget: the tenant’s, or the device player’s.',
    1e9,
  ),
  'X-RateLimit-Remaining': header('Requests left in the current second.', 1e9),
  'X-RateLimit-Reset': header('Seconds until the budget is full again.', 3600),
  'Retry-After': header('Seconds to wait before trying again.', MAX_TIMESTAMP / 1000),
};
const headerRef = (name: keyof typeof RATE_LIMIT_HEADERS) => ({ $ref: `#/components/headers/${name}` });

type Schema = FastifySchema;

/**
 * Completes an API route's schema (one with `tags`) for the document: its `security` from
 * `config.auth` (a route without it is public: `security: []`), and the problem answers every such
 * route can give when its own schema leaves them out: 400 (its query or path is checked), 401 and 403
 * (it takes a token), 429 (tenant and device requests are rate limited), 500, and 503 `overloaded`
 * when `shed` (load shedding, http/load-shedding.ts: every route but the health, readiness and metrics ones).
 */
export function describeRoute(schema: Schema, auth: AuthSpec | undefined, shed = false): Schema {
  const security: Record<string, string[]>[] = [];
  if (auth?.tenant) {
    // Any one of the listed scopes will do: one requirement per scope (a requirement needs all of its).
    for (const scope of typeof auth.tenant === 'string' ? [auth.tenant] : auth.tenant)
      security.push({ tenantToken: [scope] });
  }
  if (auth?.device) security.push({ deviceToken: [] });
  if (auth?.operator) security.push({ operatorToken: [] });

  const statuses = [400, 500];
  if (auth) statuses.push(401, 403);
  if (auth?.tenant || auth?.device) statuses.push(429);
  if (shed) statuses.push(503);
  const response: Record<string, unknown> = { ...(schema.response as Record<string, unknown> | undefined) };
  for (const status of statuses) {
    const covered = Object.keys(response).some((k) => k === String(status) || k === `${String(status)[0]}xx`);
    if (!covered) Object.assign(response, problemResponses(status));
  }
  return { ...schema, security, response };
}

/** The query of an API route that declares none: nothing, or the token of a WebSocket upgrade. */
export function noQuery(auth: AuthSpec | undefined) {
  return auth?.queryToken
    ? Type.Object(
        { access_token: Type.Optional(Type.String({ maxLength: 4096, description: 'The device token.' })) },
        { additionalProperties: false },
      )
    : Type.Object({}, { additionalProperties: false });
}

type Document = {
  paths?: Record<string, Record<string, { security?: unknown[]; responses?: Record<string, Response> }>>;
};
type Response = { headers?: Record<string, unknown> };

/**
 * The last touch on the generated document (`@fastify/swagger`'s `transformObject`): the rate-limit
 * headers on the answers that carry them. Tenant and device requests are counted once their token is
 * checked, so every 2xx and 4xx answer to them but 401 and 403 has `X-RateLimit-*`; operator and
 * public requests are not counted. Every 429 says `Retry-After`, and so does a 503 `overloaded`.
 */
export function finishDocument<T>(document: T): T {
  for (const [path, item] of Object.entries((document as Document).paths ?? {})) {
    for (const operation of Object.values(item)) {
      const counted =
        !path.startsWith('/admin/') &&
        Array.isArray(operation.security) &&
        operation.security.some((r) => 'tenantToken' in (r as object) || 'deviceToken' in (r as object));
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const headers: Record<string, unknown> = {};
        if (counted && /^[24]/.test(status) && status !== '401' && status !== '403') {
          headers['X-RateLimit-Limit'] = headerRef('X-RateLimit-Limit');
          headers['X-RateLimit-Remaining'] = headerRef('X-RateLimit-Remaining');
          headers['X-RateLimit-Reset'] = headerRef('X-RateLimit-Reset');
        }
        if (status === '429' || status === '503') headers['Retry-After'] = headerRef('Retry-After');
        if (Object.keys(headers).length > 0) response.headers = { ...response.headers, ...headers };
      }
    }
  }
  return document;
}
