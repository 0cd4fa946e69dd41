import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import type { ModuleOptions } from '../../context.ts';
import type { AuthSpec } from '../../http/auth.ts';
import { tenantOf } from '../../http/auth.ts';
import { envelopeSchema, listEnvelope, PageSizeQuery } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import { problemResponses, Uuid } from '../../http/schemas.ts';
import { findTenant } from '../auth/store.ts';
import {
  CreateWebhookBody,
  DeliveriesQuery,
  DeliverySchema,
  ReplayBody,
  RotatedWebhookSchema,
  UpdateWebhookBody,
  WebhookSchema,
  WebhookWithSecretSchema,
} from './schemas.ts';

/** One mount of the webhook routes: the tenant's own (`/webhooks`) or the operator's, per tenant. */
interface Mount {
  prefix: string;
  params: Record<string, TSchema>;
  auth: AuthSpec;
  tags: string[];
  tenantId(request: FastifyRequest): Promise<string>;
}

type Params = { webhookId: string; deliveryId: string };

const NoBody = Type.Object({}, { additionalProperties: false, description: 'No body (or `{}`).' });

/** Webhook endpoints, secret rotation, tests and the delivery log (CONTRACT §6). */
export const webhooksRoutes: FastifyPluginAsync<ModuleOptions> = async (root, { ctx }) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const { webhooks, storage } = ctx;
  app.addSchema(WebhookSchema);
  app.addSchema(DeliverySchema);

  app.addHook('onReady', async () => webhooks.start());
  // preClose: before storage closes (onClose hooks run last-registered first, and storage's is last).
  app.addHook('preClose', async () => webhooks.stop());

  const mounts: Mount[] = [
    {
      prefix: '/webhooks',
      params: {},
      auth: { tenant: 'webhooks:manage' },
      tags: ['webhooks'],
      tenantId: async (request) => tenantOf(request).tenantId,
    },
    {
      prefix: '/admin/v1/tenants/:tenantId/webhooks',
      params: { tenantId: Uuid },
      auth: { operator: true },
      tags: ['admin'],
      tenantId: async (request) => {
        const { tenantId } = request.params as { tenantId: string };
        if (!(await findTenant(storage, tenantId))) throw problems.notFound('tenant');
        return tenantId;
      },
    },
  ];

  for (const m of mounts) {
    const params = (extra: Record<string, TSchema>) =>
      Type.Object({ ...m.params, ...extra }, { additionalProperties: false });
    const one = params({ webhookId: Uuid });
    const oneDelivery = params({ webhookId: Uuid, deliveryId: Uuid });
    const config = { auth: m.auth };
    const ids = (request: FastifyRequest) => request.params as Params;
    const emptyBody = async (request: FastifyRequest) => {
      if (request.body === undefined) request.body = {};
    };

    app.post(
      m.prefix,
      {
        config,
        schema: {
          tags: m.tags,
          summary: 'Register a webhook endpoint. The signing secret is shown only in this response.',
          params: params({}),
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
          summary: 'List webhook endpoints (never their secrets).',
          params: params({}),
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

    app.get(
      `${m.prefix}/:webhookId`,
      {
        config,
        schema: {
          tags: m.tags,
          summary: 'One webhook endpoint.',
          params: one,
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
          summary:
            'Change an endpoint: url, description, filters, enabled (`true` re-enables a disabled one).',
          params: one,
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
          summary: 'Delete an endpoint with its delivery log.',
          params: one,
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

    app.post(
      `${m.prefix}/:webhookId/secret/rotate`,
      {
        config,
        preValidation: emptyBody,
        schema: {
          tags: m.tags,
          summary:
            'Replace the signing secret. The previous one keeps signing (a second signature) for 24 h.',
          params: one,
          body: NoBody,
          response: { 200: RotatedWebhookSchema, ...problemResponses(400, 401, 403, 404, 415, 429) },
        },
      },
      async (request) => webhooks.rotateSecret(await m.tenantId(request), ids(request).webhookId),
    );

    app.post(
      `${m.prefix}/:webhookId/test`,
      {
        config,
        preValidation: emptyBody,
        schema: {
          tags: m.tags,
          summary: 'Send a `webhook.test` message to the endpoint (whatever its filters).',
          params: one,
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

    app.get(
      `${m.prefix}/:webhookId/deliveries`,
      {
        config,
        schema: {
          tags: m.tags,
          summary: 'The delivery log, newest first, each delivery with its attempts.',
          params: one,
          querystring: DeliveriesQuery,
          response: {
            200: Type.Object({
              deliveries: Type.Array(Type.Ref('WebhookDelivery')),
              nextCursor: Type.Union([Type.String(), Type.Null()]),
              hasMore: Type.Boolean(),
            }),
            ...problemResponses(400, 401, 403, 404, 429),
          },
        },
      },
      async (request) => {
        const { status, after, limit } = request.query;
        return webhooks.deliveries(await m.tenantId(request), ids(request).webhookId, {
          status,
          after,
          limit: limit ?? 100,
        });
      },
    );

    app.get(
      `${m.prefix}/:webhookId/deliveries/:deliveryId`,
      {
        config,
        schema: {
          tags: m.tags,
          summary: 'One delivery with its attempts.',
          params: oneDelivery,
          response: { 200: Type.Ref('WebhookDelivery'), ...problemResponses(400, 401, 403, 404, 429) },
        },
      },
      async (request) => {
        const { webhookId, deliveryId } = ids(request);
        return webhooks.delivery(await m.tenantId(request), webhookId, deliveryId);
      },
    );

    app.post(
      `${m.prefix}/:webhookId/deliveries/:deliveryId/retry`,
      {
        config,
        preValidation: emptyBody,
        schema: {
          tags: m.tags,
          summary: 'Send a delivery again now (same webhook-id), with a fresh retry schedule.',
          params: oneDelivery,
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
          summary:
            'Send again every delivery created since a time (each with its own webhook-id, as before).',
          params: one,
          body: ReplayBody,
          response: {
            202: Type.Object({
              replayed: Type.Integer({ description: 'How many deliveries were queued again.' }),
            }),
            ...problemResponses(400, 401, 403, 404, 409, 415, 429),
          },
        },
      },
      async (request, reply) =>
        reply
          .code(202)
          .send(await webhooks.replay(await m.tenantId(request), ids(request).webhookId, request.body.since)),
    );
  }
};
