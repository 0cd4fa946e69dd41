import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { ModuleOptions } from '../../context.ts';
import { tenantOf } from '../../http/auth.ts';
import { DEFAULT_PAGE_SIZE, envelopeSchema, listEnvelope, PageSizeQuery } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import { problemResponses, StringEnum, Uuid } from '../../http/schemas.ts';
import { handlerValidatesBody } from '../../http/validation.ts';
import { constantTimeEqual, digestSecret } from '../../secrets.ts';
import { isScope, SCOPES, type Scope } from './scopes.ts';
import {
  createClient,
  createTenant,
  findClient,
  findTenant,
  listClients,
  listTenants,
  revokeClient,
} from './store.ts';

const ScopeSchema = StringEnum(SCOPES, { description: 'A tenant API scope.' });
const TenantSchema = Type.Object({ tenantId: Uuid, name: Type.String(), createdAt: Type.Integer() });
const ClientSchema = Type.Object({
  clientId: Uuid,
  tenantId: Uuid,
  name: Type.Union([Type.String(), Type.Null()]),
  scopes: Type.Array(ScopeSchema),
  createdAt: Type.Integer(),
  revokedAt: Type.Union([Type.Integer(), Type.Null()]),
});
const TenantParams = Type.Object({ tenantId: Uuid }, { additionalProperties: false });
const PlayerId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\s]+$' });
const CohortId = Type.String({
  minLength: 1,
  maxLength: 128,
  description: 'TenantCohortId, defined by the tenant.',
});
const DeviceTokenSchema = Type.Object({
  token: Type.String(),
  playerId: Type.String(),
  tenantCohortId: Type.Union([Type.String(), Type.Null()]),
  expiresAt: Type.Integer(),
});

function oauthError(reply: FastifyReply, status: number, error: string, description: string) {
  if (status === 401) reply.header('WWW-Authenticate', 'Basic realm="liveline"');
  return reply
    .code(status)
    .header('Cache-Control', 'no-store')
    .send({ error, error_description: description });
}

/** Credentials from HTTP Basic (RFC 6749 §2.3.1: form-urlencoded, then base64) or the request body. */
function clientCredentials(header: string | undefined, body: Record<string, unknown>) {
  if (header?.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return null;
    try {
      return {
        id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')),
        secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')),
      };
    } catch {
      return null;
    }
  }
  const { client_id: id, client_secret: secret } = body;
  return typeof id === 'string' && typeof secret === 'string' ? { id, secret } : null;
}

/** OAuth2 client credentials, JWKS, device tokens, and the operator's tenant and client routes. */
export const authRoutes: FastifyPluginAsync<ModuleOptions> = async (root, { ctx }) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const { storage, clock, config } = ctx;

  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  app.post(
    '/oauth/token',
    {
      // Errors here follow RFC 6749 §5.2 (`{error, error_description}`), so the handler checks the
      // form itself; the schemas document it.
      validatorCompiler: handlerValidatesBody,
      schema: {
        tags: ['auth'],
        summary: 'Exchange client credentials for an access token (RFC 6749 §4.4).',
        description:
          'Client authentication by HTTP Basic (`client_id:client_secret`) or in the form. ' +
          'Errors: 401 `invalid_client`; 400 `invalid_request`, `unsupported_grant_type`, `invalid_scope`.',
        consumes: ['application/x-www-form-urlencoded'],
        body: Type.Object({
          grant_type: Type.Literal('client_credentials'),
          scope: Type.Optional(
            Type.String({ description: 'Space-separated subset of the client’s scopes.' }),
          ),
          client_id: Type.Optional(Type.String()),
          client_secret: Type.Optional(Type.String()),
        }),
        response: {
          200: Type.Object({
            access_token: Type.String(),
            token_type: Type.Literal('Bearer'),
            expires_in: Type.Integer(),
            scope: Type.String(),
          }),
          '4xx': Type.Object({ error: Type.String(), error_description: Type.String() }),
        },
      },
    },
    async (request, reply) => {
      const body = (request.body ?? {}) as Record<string, unknown>;
      const creds = clientCredentials(request.headers.authorization, body);
      if (!creds) return oauthError(reply, 401, 'invalid_client', 'Client authentication is required.');
      const client = await findClient(storage, creds.id);
      const presented = digestSecret(ctx.digestKey, creds.secret);
      // Compare even when the client is unknown, so timing does not tell which ids exist.
      const secretOk = constantTimeEqual(presented, client?.secretDigest ?? '');
      if (!client || !secretOk || client.revokedAt !== null) {
        return oauthError(reply, 401, 'invalid_client', 'Unknown client or wrong secret.');
      }
      if (body.grant_type === undefined)
        return oauthError(reply, 400, 'invalid_request', 'grant_type is required.');
      if (body.grant_type !== 'client_credentials') {
        return oauthError(reply, 400, 'unsupported_grant_type', 'Only client_credentials is supported.');
      }
      let scopes: Scope[] = client.scopes;
      if (typeof body.scope === 'string' && body.scope.trim() !== '') {
        const asked = body.scope.trim().split(/\s+/);
        const bad = asked.filter((s) => !isScope(s) || !client.scopes.includes(s));
        if (bad.length > 0)
          return oauthError(reply, 400, 'invalid_scope', `Not granted to this client: ${bad.join(' ')}`);
        scopes = [...new Set(asked)] as Scope[];
      }
      const token = await ctx.tokens.issueAccessToken({
        tenantId: client.tenantId,
        clientId: client.clientId,
        scopes,
        ttlSeconds: config.accessTokenTtlS,
      });
      return reply.header('Cache-Control', 'no-store').send(token);
    },
  );

  app.get(
    '/.well-known/jwks.json',
    { schema: { tags: ['auth'], summary: 'Public keys that verify access and device tokens.' } },
    async () => ctx.tokens.jwks,
  );

  const issueDeviceToken = (
    tenantId: string,
    playerId: string,
    tenantCohortId: string | null,
    ttl?: number,
  ) =>
    ctx.tokens.issueDeviceToken({
      tenantId,
      playerId,
      tenantCohortId,
      ttlSeconds: ttl ?? config.deviceTokenTtlS,
    });

  app.post(
    '/client-tokens',
    {
      config: { auth: { tenant: 'tokens:issue' } },
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
      const { tenantId } = tenantOf(request);
      const { playerId, tenantCohortId, ttlSeconds } = request.body;
      return issueDeviceToken(tenantId, playerId, tenantCohortId ?? null, ttlSeconds);
    },
  );

  app.get(
    '/poolusers/newtoken',
    {
      config: { auth: { tenant: 'tokens:issue' } },
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
    async (request) => {
      const { tenantId } = tenantOf(request);
      return issueDeviceToken(tenantId, `pool-${crypto.randomUUID()}`, request.query.tenantCohortId ?? null);
    },
  );

  // Operator routes.
  const operator = { auth: { operator: true } } as const;

  app.post(
    '/admin/v1/tenants',
    {
      config: operator,
      schema: {
        tags: ['admin'],
        summary: 'Create a tenant.',
        body: Type.Object(
          { name: Type.String({ minLength: 1, maxLength: 200 }) },
          { additionalProperties: false },
        ),
        response: { 201: TenantSchema, ...problemResponses(400, 401, 403) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await createTenant(storage, request.body.name, clock.now())),
  );

  app.get(
    '/admin/v1/tenants',
    {
      config: operator,
      schema: {
        tags: ['admin'],
        summary: 'List tenants.',
        querystring: PageSizeQuery,
        response: { 200: envelopeSchema('tenants', TenantSchema), ...problemResponses(400, 401, 403) },
      },
    },
    async (request) => {
      const page = { page: 1, pageSize: request.query.pageSize ?? 1000 };
      const { tenants, totalCount } = await listTenants(storage, page);
      return listEnvelope('tenants', tenants, page, totalCount);
    },
  );

  app.get(
    '/admin/v1/tenants/page/:pageNumber',
    {
      config: operator,
      schema: {
        tags: ['admin'],
        summary: 'List tenants, one page.',
        params: Type.Object({ pageNumber: Type.Integer({ minimum: 1 }) }, { additionalProperties: false }),
        querystring: PageSizeQuery,
        response: { 200: envelopeSchema('tenants', TenantSchema), ...problemResponses(400, 401, 403) },
      },
    },
    async (request) => {
      const page = { page: request.params.pageNumber, pageSize: request.query.pageSize ?? DEFAULT_PAGE_SIZE };
      const { tenants, totalCount } = await listTenants(storage, page);
      return listEnvelope('tenants', tenants, page, totalCount);
    },
  );

  app.get(
    '/admin/v1/tenants/:tenantId',
    {
      config: operator,
      schema: {
        tags: ['admin'],
        summary: 'One tenant.',
        params: TenantParams,
        response: { 200: TenantSchema, ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const tenant = await findTenant(storage, request.params.tenantId);
      if (!tenant) throw problems.notFound('tenant');
      return tenant;
    },
  );

  const requireTenant = async (tenantId: string) => {
    if (!(await findTenant(storage, tenantId))) throw problems.notFound('tenant');
  };

  app.post(
    '/admin/v1/tenants/:tenantId/clients',
    {
      config: operator,
      schema: {
        tags: ['admin'],
        summary: 'Create an OAuth2 client for a tenant. The secret is shown only in this response.',
        params: TenantParams,
        body: Type.Object(
          {
            name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
            scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({
            clientId: Uuid,
            clientSecret: Type.String(),
            tenantId: Uuid,
            name: Type.Union([Type.String(), Type.Null()]),
            scopes: Type.Array(ScopeSchema),
            createdAt: Type.Integer(),
          }),
          ...problemResponses(400, 401, 403, 404),
        },
      },
    },
    async (request, reply) => {
      const { tenantId } = request.params;
      await requireTenant(tenantId);
      const body = request.body ?? {};
      const client = await createClient(
        storage,
        ctx.digestKey,
        { tenantId, name: body.name ?? null, scopes: (body.scopes as Scope[] | undefined) ?? [...SCOPES] },
        clock.now(),
      );
      return reply.code(201).send(client);
    },
  );

  app.get(
    '/admin/v1/tenants/:tenantId/clients',
    {
      config: operator,
      schema: {
        tags: ['admin'],
        summary: "List a tenant's clients (never their secrets).",
        params: TenantParams,
        querystring: PageSizeQuery,
        response: { 200: envelopeSchema('clients', ClientSchema), ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      await requireTenant(request.params.tenantId);
      const page = { page: 1, pageSize: request.query.pageSize ?? 1000 };
      const { clients, totalCount } = await listClients(storage, request.params.tenantId, page);
      return listEnvelope('clients', clients, page, totalCount);
    },
  );

  app.delete(
    '/admin/v1/tenants/:tenantId/clients/:clientId',
    {
      config: operator,
      schema: {
        tags: ['admin'],
        summary: 'Revoke a client: its tokens stop working at once.',
        params: Type.Object({ tenantId: Uuid, clientId: Uuid }, { additionalProperties: false }),
        response: { 204: Type.Null({ description: 'Revoked.' }), ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      const ok = await revokeClient(storage, request.params.tenantId, request.params.clientId, clock.now());
      if (!ok) throw problems.notFound('client');
      return reply.code(204).send(null);
    },
  );
};
