import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { UNPAGINATED_PAGE_SIZE } from '../../../http/list-routes.ts';
import { envelopeSchema, listEnvelope, PageSizeQuery } from '../../../http/pagination.ts';
import { problemResponses, Uuid } from '../../../http/schemas.ts';
import { ClientSchema, CreateClientBody, CreatedClientSchema, TenantParams } from '../schemas.ts';
import type { AuthService } from '../service.ts';
import { operatorOnly } from './tenants.ts';

/** A tenant's OAuth2 clients: created (the secret shown only then) and listed. */
export function registerClientRoutes(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    '/admin/v1/tenants/:tenantId/clients',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        summary: 'Create an OAuth2 client for a tenant. The secret is shown only in this response.',
        params: TenantParams,
        body: CreateClientBody,
        response: { 201: CreatedClientSchema, ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      const client = await auth.createClient(request.params.tenantId, request.body ?? {});
      return reply.code(201).send(client);
    },
  );

  app.get(
    '/admin/v1/tenants/:tenantId/clients',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        summary: "List a tenant's clients (never their secrets).",
        params: TenantParams,
        querystring: PageSizeQuery,
        response: { 200: envelopeSchema('clients', ClientSchema), ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const page = { page: 1, pageSize: request.query.pageSize ?? UNPAGINATED_PAGE_SIZE };
      const { clients, totalCount } = await auth.listClients(request.params.tenantId, page);
      return listEnvelope('clients', clients, page, totalCount);
    },
  );
}

/** Revoking a client. */
export function registerClientRevokeRoute(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.delete(
    '/admin/v1/tenants/:tenantId/clients/:clientId',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        summary: 'Revoke a client: its tokens stop working at once.',
        params: Type.Object({ tenantId: Uuid, clientId: Uuid }, { additionalProperties: false }),
        response: { 204: Type.Null({ description: 'Revoked.' }), ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      await auth.revokeClient(request.params.tenantId, request.params.clientId);
      return reply.code(204).send(null);
    },
  );
}
