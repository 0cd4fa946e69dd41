import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { tenantOf } from '../../../http/auth.ts';
import { noBodyIsEmptyObject } from '../../../http/empty-body.ts';
import { UNPAGINATED_PAGE_SIZE } from '../../../http/list-routes.ts';
import { envelopeSchema, listEnvelope, PageSizeQuery } from '../../../http/pagination.ts';
import { problemResponses } from '../../../http/schemas.ts';
import {
  ClientParams,
  ClientSchema,
  CreateClientBody,
  CreatedClientSchema,
  RotatedClientSchema,
  RotateSecretBody,
  TenantClientParams,
  TenantParams,
} from '../schemas.ts';
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
        operationId: 'createTenantClient',
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
        operationId: 'listTenantClients',
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
        operationId: 'revokeTenantClient',
        summary:
          'Revoke a client: its access tokens and the device tokens it minted stop working at once ' +
          '(their realtime sockets close with 4003).',
        params: TenantClientParams,
        response: { 204: Type.Null({ description: 'Revoked.' }), ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      await auth.revokeClient(request.params.tenantId, request.params.clientId);
      return reply.code(204).send(null);
    },
  );
}

const ROTATE_DESCRIPTION =
  'The new secret is shown only in this answer. The current secret keeps working for 24 h ' +
  '(`previousSecretExpiresAt`), or stops at once with `{"immediately": true}`. Tokens already issued ' +
  'stay valid until they expire; delete the client to stop them.';

/** A client's secret replaced: by the operator, or by the tenant for its own clients (`tokens:issue`). */
export function registerClientSecretRoutes(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const response = { 200: RotatedClientSchema, ...problemResponses(400, 401, 403, 404, 415) };

  app.post(
    '/admin/v1/tenants/:tenantId/clients/:clientId/secret/rotate',
    {
      config: operatorOnly,
      preValidation: noBodyIsEmptyObject,
      schema: {
        tags: ['admin'],
        operationId: 'rotateTenantClientSecret',
        summary: "Replace a client's secret; the old one keeps working for 24 h.",
        description: ROTATE_DESCRIPTION,
        params: TenantClientParams,
        body: RotateSecretBody,
        response,
      },
    },
    async (request) =>
      auth.rotateClientSecret(
        request.params.tenantId,
        request.params.clientId,
        request.body.immediately === true,
      ),
  );

  app.post(
    '/clients/:clientId/secret/rotate',
    {
      config: { auth: { tenant: 'tokens:issue' } },
      preValidation: noBodyIsEmptyObject,
      schema: {
        tags: ['auth'],
        operationId: 'rotateClientSecret',
        summary: "Replace the secret of one of the tenant's clients; the old one keeps working for 24 h.",
        description: ROTATE_DESCRIPTION,
        params: ClientParams,
        body: RotateSecretBody,
        response,
      },
    },
    async (request) =>
      auth.rotateClientSecret(
        tenantOf(request).tenantId,
        request.params.clientId,
        request.body.immediately === true,
      ),
  );
}
