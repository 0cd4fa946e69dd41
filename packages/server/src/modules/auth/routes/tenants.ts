import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { PageNumber, UNPAGINATED_PAGE_SIZE } from '../../../http/list-routes.ts';
import {
  DEFAULT_PAGE_SIZE,
  envelopeSchema,
  listEnvelope,
  type PageRequest,
  PageSizeQuery,
} from '../../../http/pagination.ts';
import { problemResponses } from '../../../http/schemas.ts';
import { TenantParams, TenantPatchSchema, TenantSchema } from '../schemas.ts';
import type { AuthService } from '../service.ts';

/** Route config of the operator's routes. */
export const operatorOnly = { auth: { operator: true } } as const;

/** Creating a tenant. */
export function registerTenantCreateRoute(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    '/admin/v1/tenants',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        operationId: 'createTenant',
        summary: 'Create a tenant.',
        body: Type.Object({ name: TenantSchema.properties.name }, { additionalProperties: false }),
        response: { 201: TenantSchema, ...problemResponses(400, 401, 403) },
      },
    },
    async (request, reply) => reply.code(201).send(await auth.createTenant(request.body.name)),
  );
}

/** One tenant. */
export function registerTenantRoute(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/admin/v1/tenants/:tenantId',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        operationId: 'getTenant',
        summary: 'One tenant.',
        params: TenantParams,
        response: { 200: TenantSchema, ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request) => auth.requireTenant(request.params.tenantId),
  );
}

/** The operator's settings of a tenant: its event retention. */
export function registerTenantPatchRoute(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.patch(
    '/admin/v1/tenants/:tenantId',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        operationId: 'updateTenant',
        summary:
          "Change a tenant's settings: `eventRetentionDays` (0 keeps its events forever, null follows LIVELINE_EVENT_RETENTION_DAYS).",
        params: TenantParams,
        body: TenantPatchSchema,
        response: { 200: TenantSchema, ...problemResponses(400, 401, 403, 404) },
      },
    },
    async (request) => auth.setEventRetention(request.params.tenantId, request.body.eventRetentionDays),
  );
}

/**
 * The tenant list and its pages. Not `listRoutes`: this list has taken `pageSize` on its first form
 * from the start (and the published document says so), so it keeps its own pair.
 */
export function registerTenantListRoutes(root: FastifyInstance, auth: AuthService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const response = () => ({
    200: envelopeSchema('tenants', TenantSchema),
    ...problemResponses(400, 401, 403),
  });
  const list = async (page: PageRequest) => {
    const { tenants, totalCount } = await auth.listTenants(page);
    return listEnvelope('tenants', tenants, page, totalCount);
  };

  app.get(
    '/admin/v1/tenants',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        operationId: 'listTenants',
        summary: 'List tenants.',
        querystring: PageSizeQuery,
        response: response(),
      },
    },
    async (request) => list({ page: 1, pageSize: request.query.pageSize ?? UNPAGINATED_PAGE_SIZE }),
  );

  app.get(
    '/admin/v1/tenants/page/:pageNumber',
    {
      config: operatorOnly,
      schema: {
        tags: ['admin'],
        operationId: 'listTenantsPage',
        summary: 'List tenants, one page.',
        params: Type.Object({ pageNumber: PageNumber }, { additionalProperties: false }),
        querystring: PageSizeQuery,
        response: response(),
      },
    },
    async (request) =>
      list({ page: request.params.pageNumber, pageSize: request.query.pageSize ?? DEFAULT_PAGE_SIZE }),
  );
}
