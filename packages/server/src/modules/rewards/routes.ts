import multipart from '@fastify/multipart';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { type TProperties, Type } from 'typebox';
import type { AppContext, ModuleOptions } from '../../context.ts';
import { deviceOf, tenantIdOf } from '../../http/auth.ts';
import {
  DEFAULT_PAGE_SIZE,
  envelopeSchema,
  listEnvelope,
  PageNumberParam,
  PageSizeQuery,
} from '../../http/pagination.ts';
import { type FieldError, ProblemError, problems } from '../../http/problem.ts';
import { EmptyObject, problemResponses, Uuid } from '../../http/schemas.ts';
import { handlerValidatesBody } from '../../http/validation.ts';
import { findTenant } from '../auth/store.ts';
import { parseCampaignCreate, parseCampaignPatch } from './campaign-input.ts';
import { checkRewardImage, decodeBase64Image } from './jpeg.ts';
import type { RuleType } from './progress.ts';
import {
  CampaignCreateBody,
  CampaignPatchBody,
  CampaignSchema,
  CampaignWithSecretSchema,
  ChallengeCreateBody,
  ChallengePatchBody,
  ChallengeSchema,
  ClaimSchema,
  DeviceChallengeSchema,
  PlayerIdParam,
  PlayerProgressSchema,
  VerifyAnswer,
  VerifyBody,
} from './schemas.ts';
import { type EvaluatedChallenge, RewardsService } from './service.ts';
import type { CampaignRow } from './store.ts';
import { MAX_TEMPLATE_ROWS, readTemplate, type UploadedFile } from './template-import.ts';
import { campaignView, challengeView, claimView } from './views.ts';

interface RoutesOptions {
  ctx: AppContext;
  rewards: RewardsService;
}

/** The server's own URL as the caller reached it (or LIVELINE_PUBLIC_URL), for `imageUrl`. */
function serverUrl(ctx: AppContext, request: FastifyRequest): string {
  return ctx.config.publicUrl?.replace(/\/+$/, '') ?? `${request.protocol}://${request.host}`;
}

/** A base64 JPEG from a JSON body, or 400 `invalid_image`. */
function rewardImageFromJson(text: string, path = 'rewardImage'): Buffer {
  const decoded = decodeBase64Image(text);
  const check = decoded.ok ? checkRewardImage(decoded.bytes) : decoded;
  if (decoded.ok && check.ok) return decoded.bytes;
  const reason = check.ok ? 'is not usable' : check.reason;
  throw problems.invalidImage(`The reward image is not usable: ${reason}.`, [{ path, message: reason }]);
}

function importProblem(errors: FieldError[], onlyImages: boolean) {
  const first = errors[0];
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  const detail = `The template was rejected, nothing was imported: ${first.path} ${first.message}${more}.`;
  return onlyImages ? problems.invalidImage(detail, errors) : problems.validation(detail, errors);
}

/** Errors of the multipart reader (busboy, @fastify/multipart) as problem documents. */
function multipartProblem(err: unknown): ProblemError {
  if (err instanceof ProblemError) return err;
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (status === 413) return problems.payloadTooLarge('The import is larger than this route accepts.');
  return problems.validation('The request body is not well-formed multipart/form-data.', [
    { path: '', message: 'is not well-formed multipart/form-data' },
  ]);
}

/**
 * Campaign and challenge routes, mounted twice: for tenants (`campaigns:manage`) at `/campaigns…`,
 * and for the operator at `/admin/v1/tenants/{tenantId}/campaigns…`.
 */
const campaignRoutes: FastifyPluginAsync<RoutesOptions & { operator: boolean }> = async (
  root,
  { ctx, rewards, operator },
) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const base = operator ? '/admin/v1/tenants/:tenantId' : '';
  const auth = operator ? ({ operator: true } as const) : ({ tenant: 'campaigns:manage' } as const);
  const tags = [operator ? 'admin' : 'campaigns'];
  const importLimit = ctx.config.rewards.importLimitBytes;
  const params = (props: TProperties) =>
    Type.Object(operator ? { tenantId: Uuid, ...props } : props, { additionalProperties: false });
  const CampaignParams = params({ campaignId: Uuid });
  const ChallengeParams = params({ campaignId: Uuid, challengeId: Uuid });

  async function tenantFor(request: FastifyRequest): Promise<string> {
    if (!operator) return tenantIdOf(request);
    const { tenantId } = request.params as { tenantId: string };
    if (!(await findTenant(ctx.storage, tenantId))) throw problems.notFound('tenant');
    return tenantId;
  }
  async function campaignFor(request: FastifyRequest): Promise<CampaignRow> {
    const tenantId = await tenantFor(request);
    return rewards.campaign(tenantId, (request.params as { campaignId: string }).campaignId);
  }
  async function challengeFor(request: FastifyRequest) {
    const campaign = await campaignFor(request);
    const row = await rewards.challenge(campaign, (request.params as { challengeId: string }).challengeId);
    return { campaign, row };
  }
  const imageBase = (request: FastifyRequest, tenantId: string) =>
    `${serverUrl(ctx, request)}${operator ? `/admin/v1/tenants/${tenantId}` : ''}`;

  app.post(
    `${base}/campaigns`,
    {
      config: { auth },
      validatorCompiler: handlerValidatesBody,
      schema: {
        tags,
        summary: 'Create a campaign. Its campaignSecret is shown only in this response.',
        ...(operator ? { params: params({}) } : {}),
        body: CampaignCreateBody,
        response: { 201: CampaignWithSecretSchema, ...problemResponses(400, 401, 403, 404, 415, 429) },
      },
    },
    async (request, reply) => {
      const tenantId = await tenantFor(request);
      const input = parseCampaignCreate(request.body);
      const { row, secret } = await rewards.createCampaign(tenantId, input);
      return reply.code(201).send({ ...campaignView(row), campaignSecret: secret });
    },
  );

  const listCampaigns = async (request: FastifyRequest, page: { page: number; pageSize: number }) => {
    const { rows, totalCount } = await rewards.listCampaigns(await tenantFor(request), page);
    return listEnvelope('campaigns', rows.map(campaignView), page, totalCount);
  };
  app.get(
    `${base}/campaigns`,
    {
      config: { auth },
      schema: {
        tags,
        summary: 'List campaigns (page 1 of 1000), oldest first.',
        ...(operator ? { params: params({}) } : {}),
        response: {
          200: envelopeSchema('campaigns', CampaignSchema),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request) => listCampaigns(request, { page: 1, pageSize: 1000 }),
  );
  app.get(
    `${base}/campaigns/page/:pageNumber`,
    {
      config: { auth },
      schema: {
        tags,
        summary: 'List campaigns, one page.',
        params: params({ pageNumber: PageNumberParam }),
        querystring: PageSizeQuery,
        response: {
          200: envelopeSchema('campaigns', CampaignSchema),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request) => {
      const { pageNumber } = request.params as { pageNumber: number };
      return listCampaigns(request, {
        page: pageNumber,
        pageSize: request.query.pageSize ?? DEFAULT_PAGE_SIZE,
      });
    },
  );

  app.get(
    `${base}/campaigns/:campaignId`,
    {
      config: { auth },
      schema: {
        tags,
        summary: 'One campaign (never its secret).',
        params: CampaignParams,
        response: { 200: CampaignSchema, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => campaignView(await campaignFor(request)),
  );

  app.patch(
    `${base}/campaigns/:campaignId`,
    {
      config: { auth },
      validatorCompiler: handlerValidatesBody,
      schema: {
        tags,
        summary:
          'Change a campaign: name, timezone, window (null clears a bound), redemption (replaced whole).',
        description: 'Claims already made keep the redemption they were given.',
        params: CampaignParams,
        body: CampaignPatchBody,
        response: { 200: CampaignSchema, ...problemResponses(400, 401, 403, 404, 415, 429) },
      },
    },
    async (request) => {
      const row = await campaignFor(request);
      const current = campaignView(row);
      const patch = parseCampaignPatch(request.body, current);
      return campaignView(await rewards.updateCampaign(row, patch));
    },
  );

  app.post(
    `${base}/campaigns/:campaignId/secret/rotate`,
    {
      config: { auth },
      preValidation: async (request) => {
        if (request.body === undefined) request.body = {};
      },
      schema: {
        tags,
        summary:
          'Replace the campaign secret; the old one stops working at once. Shown only in this response.',
        params: CampaignParams,
        body: EmptyObject,
        response: { 200: CampaignWithSecretSchema, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const { row, secret } = await rewards.rotateSecret(await campaignFor(request));
      return { ...campaignView(row), campaignSecret: secret };
    },
  );

  app.post(
    `${base}/campaigns/:campaignId/challenges`,
    {
      config: { auth },
      bodyLimit: importLimit,
      schema: {
        tags,
        summary:
          'Create a challenge; rewardImage is a base64 JPEG of exactly 200×200 (else 400 invalid_image).',
        params: CampaignParams,
        body: ChallengeCreateBody,
        response: { 201: ChallengeSchema, ...problemResponses(400, 401, 403, 404, 409, 413, 415, 429) },
      },
    },
    async (request, reply) => {
      const campaign = await campaignFor(request);
      const body = request.body;
      const image = rewardImageFromJson(body.rewardImage);
      const [row] = await rewards.createChallenges(campaign, [
        {
          rewardCode: body.rewardCode,
          rewardTitle: body.rewardTitle,
          rewardRequirement: body.rewardRequirement,
          image,
          rule: body.rule,
        },
      ]);
      return reply.code(201).send(challengeView(row, imageBase(request, campaign.tenant_id)));
    },
  );

  // The import takes multipart bodies: its parser is registered for this route alone.
  await app.register(async (child) => {
    await child.register(multipart, {
      throwFileSizeLimit: true,
      limits: {
        fileSize: importLimit,
        fieldSize: importLimit,
        files: MAX_TEMPLATE_ROWS + 1,
        fields: 16,
        parts: MAX_TEMPLATE_ROWS + 17,
        headerPairs: 64,
      },
    });
    child.withTypeProvider<TypeBoxTypeProvider>().post(
      `${base}/campaigns/:campaignId/challenges/import`,
      {
        config: { auth },
        schema: {
          tags,
          summary: 'Import challenges from the template CSV (multipart), all or nothing.',
          description:
            'multipart/form-data: a `template` part (file or field) holding the CSV with the header ' +
            '`Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target`, and one file part ' +
            'per image; a Reward Image cell names a part by its field name or its file name. Reward Rules: ' +
            'Total mins streamed; Mins streamed in a single session; Unique days streamed on; Streak of days ' +
            'streamed on; Stream session count. Any bad row rejects the whole import (400, errors like ' +
            '`rows[3].Reward Rules`, rows counted from 0 after the header).',
          consumes: ['multipart/form-data'],
          params: CampaignParams,
          response: {
            201: Type.Object({ imported: Type.Integer(), challenges: Type.Array(ChallengeSchema) }),
            ...problemResponses(400, 401, 403, 404, 409, 413, 415, 429),
          },
        },
      },
      async (request, reply) => {
        const campaign = await campaignFor(request);
        if (!request.isMultipart()) {
          throw problems.unsupportedMediaType('Send the template and its images as multipart/form-data.');
        }
        const declared = Number(request.headers['content-length'] ?? 0);
        if (declared > importLimit)
          throw problems.payloadTooLarge(`An import may hold at most ${importLimit} bytes.`);
        let template: string | null = null;
        const files: UploadedFile[] = [];
        const unknown: FieldError[] = [];
        let total = 0;
        const count = (n: number) => {
          total += n;
          if (total > importLimit)
            throw problems.payloadTooLarge(`An import may hold at most ${importLimit} bytes.`);
        };
        try {
          for await (const part of request.parts()) {
            if (part.type === 'file') {
              const bytes = await part.toBuffer();
              count(bytes.length);
              if (part.fieldname === 'template') template = bytes.toString('utf8');
              else files.push({ field: part.fieldname, filename: part.filename || null, bytes });
            } else {
              const value = typeof part.value === 'string' ? part.value : String(part.value);
              count(Buffer.byteLength(value));
              if (part.fieldname === 'template') template = value;
              else
                unknown.push({
                  path: part.fieldname,
                  message: 'is not an allowed field (images go in file parts)',
                });
            }
          }
        } catch (err) {
          throw multipartProblem(err);
        }
        if (template === null)
          unknown.push({ path: 'template', message: 'is required: the challenge template CSV' });
        if (unknown.length > 0 || template === null) throw importProblem(unknown, false);
        let result = readTemplate(template, files, new Set());
        if (result.ok) {
          // Codes already in the campaign: read again with them, for per-row errors.
          const taken = await rewards.rewardCodesTaken(
            campaign.campaign_id,
            result.challenges.map((c) => c.rewardCode),
          );
          if (taken.size > 0) result = readTemplate(template, files, taken);
        }
        if (!result.ok) throw importProblem(result.errors, result.onlyImages);
        const rows = await rewards.createChallenges(campaign, result.challenges);
        const urlBase = imageBase(request, campaign.tenant_id);
        return reply
          .code(201)
          .send({ imported: rows.length, challenges: rows.map((r) => challengeView(r, urlBase)) });
      },
    );
  });

  const listChallenges = async (request: FastifyRequest, page: { page: number; pageSize: number }) => {
    const campaign = await campaignFor(request);
    const { rows, totalCount } = await rewards.listChallenges(campaign, page);
    const urlBase = imageBase(request, campaign.tenant_id);
    return listEnvelope(
      'challenges',
      rows.map((r) => challengeView(r, urlBase)),
      page,
      totalCount,
    );
  };
  app.get(
    `${base}/campaigns/:campaignId/challenges`,
    {
      config: { auth },
      schema: {
        tags,
        summary: "The campaign's challenges (page 1 of 1000), oldest first.",
        params: CampaignParams,
        response: {
          200: envelopeSchema('challenges', ChallengeSchema),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request) => listChallenges(request, { page: 1, pageSize: 1000 }),
  );
  app.get(
    `${base}/campaigns/:campaignId/challenges/page/:pageNumber`,
    {
      config: { auth },
      schema: {
        tags,
        summary: "The campaign's challenges, one page.",
        params: params({ campaignId: Uuid, pageNumber: PageNumberParam }),
        querystring: PageSizeQuery,
        response: {
          200: envelopeSchema('challenges', ChallengeSchema),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request) => {
      const { pageNumber } = request.params as { pageNumber: number };
      return listChallenges(request, {
        page: pageNumber,
        pageSize: request.query.pageSize ?? DEFAULT_PAGE_SIZE,
      });
    },
  );

  app.get(
    `${base}/campaigns/:campaignId/challenges/:challengeId`,
    {
      config: { auth },
      schema: {
        tags,
        summary: 'One challenge.',
        params: ChallengeParams,
        response: { 200: ChallengeSchema, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const { campaign, row } = await challengeFor(request);
      return challengeView(row, imageBase(request, campaign.tenant_id));
    },
  );

  app.patch(
    `${base}/campaigns/:campaignId/challenges/:challengeId`,
    {
      config: { auth },
      bodyLimit: importLimit,
      schema: {
        tags,
        summary: 'Change a challenge. Once claimed, its rewardCode and rule stay (409 challenge_claimed).',
        params: ChallengeParams,
        body: ChallengePatchBody,
        response: { 200: ChallengeSchema, ...problemResponses(400, 401, 403, 404, 409, 413, 415, 429) },
      },
    },
    async (request) => {
      const { campaign, row } = await challengeFor(request);
      const { rewardImage, ...rest } = request.body;
      const image = rewardImage === undefined ? undefined : rewardImageFromJson(rewardImage);
      const updated = await rewards.updateChallenge(row, { ...rest, image });
      return challengeView(updated, imageBase(request, campaign.tenant_id));
    },
  );

  app.delete(
    `${base}/campaigns/:campaignId/challenges/:challengeId`,
    {
      config: { auth },
      schema: {
        tags,
        summary: 'Delete a challenge nobody has claimed (else 409 challenge_claimed).',
        params: ChallengeParams,
        response: {
          204: Type.Null({ description: 'Deleted.' }),
          ...problemResponses(400, 401, 403, 404, 409, 429),
        },
      },
    },
    async (request, reply) => {
      const { row } = await challengeFor(request);
      await rewards.deleteChallenge(row);
      return reply.code(204).send(null);
    },
  );

  app.get(
    `${base}/campaigns/:campaignId/challenges/:challengeId/image`,
    {
      // The viewer app loads the image with its device token; tenants with theirs.
      config: { auth: operator ? auth : { tenant: 'campaigns:manage', device: true } },
      schema: {
        tags,
        summary: "The challenge's 200×200 JPEG (image/jpeg).",
        params: ChallengeParams,
        produces: ['image/jpeg'],
        response: problemResponses(400, 401, 403, 404, 429),
      },
    },
    async (request, reply: FastifyReply) => {
      const tenantId = await tenantFor(request);
      const { campaignId, challengeId } = request.params as { campaignId: string; challengeId: string };
      const image = await rewards.image(tenantId, campaignId, challengeId);
      const etag = `"${challengeId}.${image.updatedAt}"`;
      reply.header('ETag', etag).header('Cache-Control', 'private, max-age=300');
      if (request.headers['if-none-match'] === etag) return reply.code(304).send();
      return reply.type('image/jpeg').send(image.bytes);
    },
  );

  app.get(
    `${base}/campaigns/:campaignId/players/:playerId/progress`,
    {
      config: { auth },
      schema: {
        tags,
        summary: "A player's progress on every challenge of the campaign, now.",
        params: params({ campaignId: Uuid, playerId: PlayerIdParam }),
        response: { 200: PlayerProgressSchema, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const campaign = await campaignFor(request);
      const { playerId } = request.params as { playerId: string };
      const progress = await rewards.playerProgress(campaign, playerId);
      return {
        campaignId: campaign.campaign_id,
        playerId,
        evaluatedAt: progress.evaluatedAt,
        metrics: progress.metrics,
        challenges: progress.challenges.map((e) => ({
          challengeId: e.challenge.challenge_id,
          rewardCode: e.challenge.reward_code,
          rewardTitle: e.challenge.reward_title,
          rule: { type: e.challenge.rule_type as RuleType, target: e.challenge.rule_target },
          progress: e.progress,
          status: e.status,
          claimId: e.claim?.claim_id ?? null,
          claimedAt: e.claim?.claimed_at ?? null,
          verifiedAt: e.claim?.verified_at ?? null,
        })),
      };
    },
  );
};

/** The viewer app: its player's challenges and claims. */
const deviceRoutes: FastifyPluginAsync<RoutesOptions> = async (root, { ctx, rewards }) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const deviceView = (e: EvaluatedChallenge, urlBase: string) => ({
    ...challengeView(e.challenge, urlBase),
    progress: e.progress,
    status: e.status,
    claim: e.claim ? claimView(e.claim) : null,
  });

  app.get(
    '/client/v1/challenges',
    {
      config: { auth: { device: true } },
      schema: {
        tags: ['device'],
        summary: "Every challenge of the tenant's current campaigns, with the player's progress and status.",
        response: {
          200: envelopeSchema('challenges', DeviceChallengeSchema),
          ...problemResponses(400, 401, 403, 429),
        },
      },
    },
    async (request) => {
      const device = deviceOf(request);
      const all = await rewards.deviceChallenges(device.tenantId, device.playerId);
      const page = { page: 1, pageSize: 1000 };
      const urlBase = serverUrl(ctx, request);
      return listEnvelope(
        'challenges',
        all.slice(0, page.pageSize).map((e) => deviceView(e, urlBase)),
        page,
        all.length,
      );
    },
  );

  app.post(
    '/client/v1/challenges/:challengeId/claim',
    {
      config: { auth: { device: true } },
      preValidation: async (request) => {
        if (request.body === undefined) request.body = {};
      },
      schema: {
        tags: ['device'],
        summary: 'Claim a completed challenge: 201 the new claim, 200 the same claim again.',
        description:
          '409 `challenge_not_complete` (with `progress`) before the rule is met; 409 `campaign_not_active`.',
        params: Type.Object({ challengeId: Uuid }, { additionalProperties: false }),
        body: EmptyObject,
        response: {
          200: ClaimSchema,
          201: ClaimSchema,
          ...problemResponses(400, 401, 403, 404, 409, 429),
        },
      },
    },
    async (request, reply) => {
      const device = deviceOf(request);
      const { claim, created } = await rewards.claim(
        device.tenantId,
        device.playerId,
        request.params.challengeId,
      );
      return reply.code(created ? 201 : 200).send(claimView(claim));
    },
  );
};

/** The tenant's claims machine asks whether a code is a real claim (no bearer token: the secret is the credential). */
const verifyRoute: FastifyPluginAsync<RoutesOptions> = async (root, { rewards }) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/campaigns/verifyrewardcode',
    {
      schema: {
        tags: ['campaigns'],
        summary: 'Verify a claim by its display code or achievement code.',
        description:
          'The campaign secret identifies the campaign (campaignId optional; when given it must match). ' +
          'The display code is read case-insensitively with or without its hyphen. The first verification ' +
          'sets verifiedAt; repeats answer alreadyVerified: true. 401 invalid_campaign_secret, 404 ' +
          'entitlement_not_found; more than 10 failures a minute from one address for one campaign → 429.',
        body: VerifyBody,
        response: { 200: VerifyAnswer, ...problemResponses(400, 401, 404, 415, 429) },
      },
    },
    async (request) => rewards.verify(request.body, request.ip),
  );
};

/** Campaigns, challenges, progress, claims and verification (CONTRACT §7). */
export const rewardsRoutes: FastifyPluginAsync<ModuleOptions> = async (app, { ctx }) => {
  const rewards = new RewardsService(ctx);
  await app.register(campaignRoutes, { ctx, rewards, operator: false });
  await app.register(campaignRoutes, { ctx, rewards, operator: true });
  await app.register(deviceRoutes, { ctx, rewards });
  await app.register(verifyRoute, { ctx, rewards });
};
