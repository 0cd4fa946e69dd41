import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { envelopeSchema, listEnvelope, PageSizeQuery } from '../../../http/pagination.ts';
import { problemResponses, Uuid } from '../../../http/schemas.ts';
import {
  CreateWebhookBody,
  RotatedWebhookSchema,
  UpdateWebhookBody,
  WebhookWithSecretSchema,
} from '../schemas.ts';
import type { WebhooksService } from '../service.ts';
import { emptyBody, ids, type Mount, NoBody } from './mount.ts';

/** Registering and listing endpoints. */
export function registerEndpointRoutes(root: FastifyInstance, webhooks: WebhooksService, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: m.auth };

  app.post(
    m.prefix,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('create', 'Webhook'),
        summary: 'Register a webhook endpoint. The signing secret is shown only in this response.',
        params: m.params(),
        body: CreateWebhookBody,
        response: { 201: WebhookWithSecretSchema, ...problemResponses(400, 401, 403, 404, 415, 429) },
      },
    },
    async (request, reply) => {
      const tenantId = await m.tenantId(request);
      return reply.code(201).send(await webhooks.create(tenantId, request.body));
    },
  );

  app.get(
    m.prefix,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('list', 'Webhooks'),
        summary: 'List webhook endpoints (never their secrets).',
        params: m.params(),
        querystring: PageSizeQuery,
        response: {
          200: envelopeSchema('webhooks', Type.Ref('Webhook')),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request) => {
      const tenantId = await m.tenantId(request);
      const page = { page: 1, pageSize: request.query.pageSize ?? 1000 };
      const { webhooks: items, totalCount } = await webhooks.list(tenantId, page.pageSize);
      return listEnvelope('webhooks', items, page, totalCount);
    },
  );
}

/** Reading, changing and deleting one endpoint. */
export function registerEndpointChangeRoutes(root: FastifyInstance, webhooks: WebhooksService, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: m.auth };
  const params = m.params({ webhookId: Uuid });

  app.get(
    `${m.prefix}/:webhookId`,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('get', 'Webhook'),
        summary: 'One webhook endpoint.',
        params,
        response: { 200: Type.Ref('Webhook'), ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => webhooks.get(await m.tenantId(request), ids(request).webhookId),
  );

  app.patch(
    `${m.prefix}/:webhookId`,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('update', 'Webhook'),
        summary: 'Change an endpoint: url, description, filters, enabled (`true` re-enables a disabled one).',
        params,
        body: UpdateWebhookBody,
        response: { 200: Type.Ref('Webhook'), ...problemResponses(400, 401, 403, 404, 415, 429) },
      },
    },
    async (request) => webhooks.update(await m.tenantId(request), ids(request).webhookId, request.body),
  );

  app.delete(
    `${m.prefix}/:webhookId`,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('delete', 'Webhook'),
        summary: 'Delete an endpoint with its delivery log.',
        params,
        response: {
          204: Type.Null({ description: 'Deleted.' }),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request, reply) => {
      await webhooks.remove(await m.tenantId(request), ids(request).webhookId);
      return reply.code(204).send(null);
    },
  );
}

/** Rotating an endpoint's signing secret. */
export function registerSecretRotationRoute(root: FastifyInstance, webhooks: WebhooksService, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: m.auth };
  const params = m.params({ webhookId: Uuid });

  app.post(
    `${m.prefix}/:webhookId/secret/rotate`,
    {
      config,
      preValidation: emptyBody,
      schema: {
        tags: m.tags,
        operationId: m.operationId('rotate', 'WebhookSecret'),
        summary: 'Replace the signing secret. The previous one keeps signing (a second signature) for 24 h.',
        params,
        body: NoBody,
        response: { 200: RotatedWebhookSchema, ...problemResponses(400, 401, 403, 404, 415, 429) },
      },
    },
    async (request) => webhooks.rotateSecret(await m.tenantId(request), ids(request).webhookId),
  );
}
