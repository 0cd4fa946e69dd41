import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { listRoutes } from '../../../http/list-routes.ts';
import { problemResponses, Uuid } from '../../../http/schemas.ts';
import { MAX_IMAGE_BYTES } from '../jpeg.ts';
import type { Rewards } from '../rewards.ts';
import { ChallengeCreateBody, ChallengePatchBody, ChallengeSchema } from '../schemas.ts';
import { challengeView } from '../views.ts';
import { campaignOf, challengeOf, ids, type Mount } from './mount.ts';

/** Creating a challenge from JSON (its image in base64). */
export function registerChallengeCreateRoute(root: FastifyInstance, rewards: Rewards, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    `${m.base}/campaigns/:campaignId/challenges`,
    {
      config: { auth: m.auth },
      bodyLimit: rewards.imports.limitBytes,
      schema: {
        tags: m.tags,
        operationId: m.operationId('create', 'Challenge'),
        summary:
          'Create a challenge; rewardImage is a base64 JPEG of exactly 200×200 (else 400 invalid_image).',
        params: m.params({ campaignId: Uuid }),
        body: ChallengeCreateBody,
        response: { 201: ChallengeSchema, ...problemResponses(400, 401, 403, 404, 409, 413, 415, 429) },
      },
    },
    async (request, reply) => {
      const campaign = await campaignOf(rewards, m, request);
      const urlBase = m.imageBase(request, campaign.tenant_id); // before the write: it may refuse a Host
      const row = await rewards.challenges.create(campaign, request.body);
      return reply.code(201).send(challengeView(row, urlBase));
    },
  );
}

/** Listing and reading a campaign's challenges. */
export function registerChallengeRoutes(root: FastifyInstance, rewards: Rewards, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  listRoutes(app, {
    url: `${m.base}/campaigns/:campaignId/challenges`,
    operationId: m.operationId('list', 'Challenges'),
    key: 'challenges',
    item: ChallengeSchema,
    tags: m.tags,
    summary: "The campaign's challenges, oldest first",
    config: { auth: m.auth },
    params: { ...m.pathParams, campaignId: Uuid },
    errors: [400, 401, 403, 404, 429],
    list: async (request, page) => {
      const campaign = await campaignOf(rewards, m, request);
      const { rows, ...meta } = await rewards.challenges.list(campaign, page);
      const urlBase = m.imageBase(request, campaign.tenant_id);
      return { items: rows.map((r) => challengeView(r, urlBase)), ...meta };
    },
  });

  app.get(
    `${m.base}/campaigns/:campaignId/challenges/:challengeId`,
    {
      config: { auth: m.auth },
      schema: {
        tags: m.tags,
        operationId: m.operationId('get', 'Challenge'),
        summary: 'One challenge.',
        params: m.params({ campaignId: Uuid, challengeId: Uuid }),
        response: { 200: ChallengeSchema, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const { campaign, row } = await challengeOf(rewards, m, request);
      return challengeView(row, m.imageBase(request, campaign.tenant_id));
    },
  );
}

/** Changing and deleting a challenge (its reward code and rule only while unclaimed). */
export function registerChallengeChangeRoutes(root: FastifyInstance, rewards: Rewards, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const params = m.params({ campaignId: Uuid, challengeId: Uuid });

  app.patch(
    `${m.base}/campaigns/:campaignId/challenges/:challengeId`,
    {
      config: { auth: m.auth },
      bodyLimit: rewards.imports.limitBytes,
      schema: {
        tags: m.tags,
        operationId: m.operationId('update', 'Challenge'),
        summary: 'Change a challenge. Once claimed, its rewardCode and rule stay (409 challenge_claimed).',
        params,
        body: ChallengePatchBody,
        response: { 200: ChallengeSchema, ...problemResponses(400, 401, 403, 404, 409, 413, 415, 429) },
      },
    },
    async (request) => {
      const { campaign, row } = await challengeOf(rewards, m, request);
      const urlBase = m.imageBase(request, campaign.tenant_id); // before the write: it may refuse a Host
      const updated = await rewards.challenges.update(row, request.body);
      return challengeView(updated, urlBase);
    },
  );

  app.delete(
    `${m.base}/campaigns/:campaignId/challenges/:challengeId`,
    {
      config: { auth: m.auth },
      schema: {
        tags: m.tags,
        operationId: m.operationId('delete', 'Challenge'),
        summary: 'Delete a challenge nobody has claimed (else 409 challenge_claimed).',
        params,
        response: {
          204: Type.Null({ description: 'Deleted.' }),
          ...problemResponses(400, 401, 403, 404, 409, 429),
        },
      },
    },
    async (request, reply) => {
      const { row } = await challengeOf(rewards, m, request);
      await rewards.challenges.remove(row);
      return reply.code(204).send(null);
    },
  );
}

const JpegSchema = Type.Unsafe<Buffer>({
  type: 'string',
  format: 'binary',
  maxLength: MAX_IMAGE_BYTES,
  description: 'JPEG bytes.',
});
const NotModified = Type.Unsafe<undefined>({
  type: 'null',
  description: 'Not modified (the `If-None-Match` ETag is current).',
});

/** The challenge's image: the viewer app loads it with its device token, tenants with theirs. */
export function registerImageRoute(root: FastifyInstance, rewards: Rewards, m: Mount) {
  root.withTypeProvider<TypeBoxTypeProvider>().get(
    `${m.base}/campaigns/:campaignId/challenges/:challengeId/image`,
    {
      config: { auth: m.imageAuth },
      schema: {
        tags: m.tags,
        operationId: m.operationId('get', 'ChallengeImage'),
        summary: "The challenge's 200×200 JPEG (image/jpeg).",
        description: 'Answers 304 to an `If-None-Match` with the ETag it gave.',
        params: m.params({ campaignId: Uuid, challengeId: Uuid }),
        response: {
          200: {
            description: 'The image.',
            content: { 'image/jpeg': { schema: JpegSchema } },
          },
          304: NotModified,
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request, reply) => {
      const { campaignId, challengeId } = ids(request);
      const image = await rewards.challenges.image(await m.tenantId(request), campaignId, challengeId);
      const etag = `"${challengeId}.${image.updatedAt}"`;
      reply.header('ETag', etag).header('Cache-Control', 'private, max-age=300');
      if (request.headers['if-none-match'] === etag) return reply.code(304).send();
      return reply.type('image/jpeg').send(image.bytes);
    },
  );
}
