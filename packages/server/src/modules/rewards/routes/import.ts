import multipart from '@fastify/multipart';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { Count, problemResponses, Uuid } from '../../../http/schemas.ts';
import type { Rewards } from '../rewards.ts';
import { ChallengeSchema } from '../schemas.ts';
import { MAX_TEMPLATE_ROWS } from '../template-import.ts';
import { challengeView } from '../views.ts';
import { campaignOf, type Mount } from './mount.ts';

const DESCRIPTION =
  'multipart/form-data: a `template` part (file or field) holding the CSV with the header ' +
  '`Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target`, and one file part ' +
  'per image; a Reward Image cell names a part by its field name or its file name. Reward Rules: ' +
  'Total mins streamed; Mins streamed in a single session; Unique days streamed on; Streak of days ' +
  'streamed on; Stream session count. Any bad row rejects the whole import (400, errors like ' +
  '`rows[3].Reward Rules`, rows counted from 0 after the header).';

/** The template import. It takes multipart bodies: its parser is registered for this route alone. */
export async function registerImportRoute(root: FastifyInstance, rewards: Rewards, m: Mount) {
  const limit = rewards.imports.limitBytes;
  await root.register(async (child) => {
    await child.register(multipart, {
      throwFileSizeLimit: true,
      limits: {
        fileSize: limit,
        fieldSize: limit,
        files: MAX_TEMPLATE_ROWS + 1,
        fields: 16,
        parts: MAX_TEMPLATE_ROWS + 17,
        headerPairs: 64,
      },
    });
    child.withTypeProvider<TypeBoxTypeProvider>().post(
      `${m.base}/campaigns/:campaignId/challenges/import`,
      {
        config: { auth: m.auth },
        schema: {
          tags: m.tags,
          operationId: m.operationId('import', 'Challenges'),
          summary: 'Import challenges from the template CSV (multipart), all or nothing.',
          description: DESCRIPTION,
          consumes: ['multipart/form-data'],
          params: m.params({ campaignId: Uuid }),
          response: {
            201: Type.Object({
              imported: Count('Challenges created.'),
              challenges: Type.Array(ChallengeSchema, { maxItems: MAX_TEMPLATE_ROWS }),
            }),
            ...problemResponses(400, 401, 403, 404, 409, 413, 415, 429),
          },
        },
      },
      async (request, reply) => {
        const campaign = await campaignOf(rewards, m, request);
        const urlBase = m.imageBase(request, campaign.tenant_id); // before the write: it may refuse a Host
        const rows = await rewards.imports.importChallenges(campaign, {
          multipart: request.isMultipart(),
          declaredBytes: Number(request.headers['content-length'] ?? 0),
          parts: () => request.parts(),
        });
        const challenges = rows.map((r) => challengeView(r, urlBase));
        return reply.code(201).send({ imported: rows.length, challenges });
      },
    );
  });
}
