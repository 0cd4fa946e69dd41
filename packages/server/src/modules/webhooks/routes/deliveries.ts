import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { Count, Nullable, problemResponses, Uuid } from '../../../http/schemas.ts';
import { DeliveriesQuery, ReplayBody } from '../schemas.ts';
import type { WebhooksService } from '../service.ts';
import { emptyBody, ids, type Mount, NoBody } from './mount.ts';

/** A `webhook.test` message, whatever the endpoint's filters. */
export function registerTestRoute(root: FastifyInstance, webhooks: WebhooksService, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    `${m.prefix}/:webhookId/test`,
    {
      config: { auth: m.auth },
      preValidation: emptyBody,
      schema: {
        tags: m.tags,
        operationId: m.operationId('test', 'Webhook'),
        summary: 'Send a `webhook.test` message to the endpoint (whatever its filters).',
        params: m.params({ webhookId: Uuid }),
        body: NoBody,
        response: {
          202: Type.Ref('WebhookDelivery'),
          ...problemResponses(400, 401, 403, 404, 409, 415, 429),
        },
      },
    },
    async (request, reply) =>
      reply.code(202).send(await webhooks.sendTest(await m.tenantId(request), ids(request).webhookId)),
  );
}

/** The delivery log. */
export function registerDeliveryLogRoutes(root: FastifyInstance, webhooks: WebhooksService, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: m.auth };

  app.get(
    `${m.prefix}/:webhookId/deliveries`,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('list', 'WebhookDeliveries'),
        summary: 'The delivery log, newest first, each delivery with its attempts.',
        params: m.params({ webhookId: Uuid }),
        querystring: DeliveriesQuery,
        response: {
          200: Type.Object({
            deliveries: Type.Array(Type.Ref('WebhookDelivery'), { maxItems: 1000 }),
            nextCursor: Nullable(Uuid),
            hasMore: Type.Boolean(),
          }),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request) => {
      const { status, after, limit } = request.query;
      const query = { status, after, limit: limit ?? 100 };
      return webhooks.deliveries(await m.tenantId(request), ids(request).webhookId, query);
    },
  );

  app.get(
    `${m.prefix}/:webhookId/deliveries/:deliveryId`,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('get', 'WebhookDelivery'),
        summary: 'One delivery with its attempts.',
        params: m.params({ webhookId: Uuid, deliveryId: Uuid }),
        response: { 200: Type.Ref('WebhookDelivery'), ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const { webhookId, deliveryId } = ids(request);
      return webhooks.delivery(await m.tenantId(request), webhookId, deliveryId);
    },
  );
}

/** Sending deliveries again: one (retry) or every one since a time (replay). */
export function registerRedeliveryRoutes(root: FastifyInstance, webhooks: WebhooksService, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: m.auth };

  app.post(
    `${m.prefix}/:webhookId/deliveries/:deliveryId/retry`,
    {
      config,
      preValidation: emptyBody,
      schema: {
        tags: m.tags,
        operationId: m.operationId('retry', 'WebhookDelivery'),
        summary: 'Send a delivery again now (same webhook-id), with a fresh retry schedule.',
        params: m.params({ webhookId: Uuid, deliveryId: Uuid }),
        body: NoBody,
        response: {
          202: Type.Ref('WebhookDelivery'),
          ...problemResponses(400, 401, 403, 404, 409, 415, 429),
        },
      },
    },
    async (request, reply) => {
      const { webhookId, deliveryId } = ids(request);
      return reply.code(202).send(await webhooks.retry(await m.tenantId(request), webhookId, deliveryId));
    },
  );

  app.post(
    `${m.prefix}/:webhookId/replay`,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('replay', 'WebhookDeliveries'),
        summary: 'Send again every delivery created since a time (each with its own webhook-id, as before).',
        params: m.params({ webhookId: Uuid }),
        body: ReplayBody,
        response: {
          202: Type.Object({ replayed: Count('How many deliveries were queued again.') }),
          ...problemResponses(400, 401, 403, 404, 409, 415, 429),
        },
      },
    },
    async (request, reply) => {
      const { webhookId } = ids(request);
      return reply
        .code(202)
        .send(await webhooks.replay(await m.tenantId(request), webhookId, request.body.since));
    },
  );
}
