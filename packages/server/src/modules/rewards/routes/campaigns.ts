import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { listRoutes } from '../../../http/list-routes.ts';
import { EmptyObject, problemResponses, Uuid } from '../../../http/schemas.ts';
import { handlerValidatesBody } from '../../../http/validation.ts';
import { parseCampaignCreate, parseCampaignPatch } from '../campaign-input.ts';
import type { Rewards } from '../rewards.ts';
import {
  CampaignCreateBody,
  CampaignPatchBody,
  CampaignSchema,
  CampaignWithSecretSchema,
} from '../schemas.ts';
import { campaignView } from '../views.ts';
import { campaignOf, emptyBody, type Mount, rootParams } from './mount.ts';

/** Creating, listing and reading campaigns. */
export function registerCampaignRoutes(root: FastifyInstance, rewards: Rewards, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: m.auth };

  app.post(
    `${m.base}/campaigns`,
    {
      config,
      // The redemption union is checked per method by parseCampaignCreate, for exact error paths.
      validatorCompiler: handlerValidatesBody,
      schema: {
        tags: m.tags,
        operationId: m.operationId('create', 'Campaign'),
        summary: 'Create a campaign. Its campaignSecret is shown only in this response.',
        ...rootParams(m),
        body: CampaignCreateBody,
        response: { 201: CampaignWithSecretSchema, ...problemResponses(400, 401, 403, 404, 415, 429) },
      },
    },
    async (request, reply) => {
      const tenantId = await m.tenantId(request);
      const { row, secret } = await rewards.campaigns.create(tenantId, parseCampaignCreate(request.body));
      return reply.code(201).send({ ...campaignView(row), campaignSecret: secret });
    },
  );

  listRoutes(app, {
    url: `${m.base}/campaigns`,
    operationId: m.operationId('list', 'Campaigns'),
    key: 'campaigns',
    item: CampaignSchema,
    tags: m.tags,
    summary: 'List campaigns, oldest first',
    config,
    params: m.pathParams,
    errors: [400, 401, 403, 404, 429],
    list: async (request, page) => {
      const { rows, ...meta } = await rewards.campaigns.list(await m.tenantId(request), page);
      return { items: rows.map(campaignView), ...meta };
    },
  });

  app.get(
    `${m.base}/campaigns/:campaignId`,
    {
      config,
      schema: {
        tags: m.tags,
        operationId: m.operationId('get', 'Campaign'),
        summary: 'One campaign (never its secret).',
        params: m.params({ campaignId: Uuid }),
        response: { 200: CampaignSchema, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => campaignView(await campaignOf(rewards, m, request)),
  );
}

/** Changing a campaign and rotating its secret. */
export function registerCampaignChangeRoutes(root: FastifyInstance, rewards: Rewards, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: m.auth };
  const params = m.params({ campaignId: Uuid });

  app.patch(
    `${m.base}/campaigns/:campaignId`,
    {
      config,
      validatorCompiler: handlerValidatesBody,
      schema: {
        tags: m.tags,
        operationId: m.operationId('update', 'Campaign'),
        summary:
          'Change a campaign: name, timezone, window (null clears a bound), redemption (replaced whole).',
        description: 'Claims already made keep the redemption they were given.',
        params,
        body: CampaignPatchBody,
        response: { 200: CampaignSchema, ...problemResponses(400, 401, 403, 404, 415, 429) },
      },
    },
    async (request) => {
      const row = await campaignOf(rewards, m, request);
      const patch = parseCampaignPatch(request.body, campaignView(row));
      return campaignView(await rewards.campaigns.update(row, patch));
    },
  );

  app.post(
    `${m.base}/campaigns/:campaignId/secret/rotate`,
    {
      config,
      preValidation: emptyBody,
      schema: {
        tags: m.tags,
        operationId: m.operationId('rotate', 'CampaignSecret'),
        summary:
          'Replace the campaign secret; the old one stops working at once. Shown only in this response.',
        params,
        body: EmptyObject,
        response: { 200: CampaignWithSecretSchema, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const { row, secret } = await rewards.campaigns.rotateSecret(await campaignOf(rewards, m, request));
      return { ...campaignView(row), campaignSecret: secret };
    },
  );
}
