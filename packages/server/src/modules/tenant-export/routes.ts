import { Readable } from 'node:stream';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyPluginAsync } from 'fastify';
import { Type } from 'typebox';
import { ndjsonResponse, sendNdjson } from '../../http/ndjson.ts';
import { problems } from '../../http/problem.ts';
import { problemResponses, Uuid } from '../../http/schemas.ts';
import type { TenantExport } from './service.ts';

export interface TenantExportPluginOptions {
  exporter: TenantExport;
}

const ExportQuery = Type.Object(
  {
    since: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 64,
        description:
          'Only sessions started at or after this time (RFC 3339, e.g. 2026-01-31T00:00:00Z), each with all its events.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** `since` as Unix ms (0 when absent), or a 400 for a time before 1970 or beyond what a Date holds. */
function sinceOf(raw: string | undefined): number {
  if (raw === undefined) return 0;
  const ms = Date.parse(raw);
  if (!Number.isFinite(ms) || ms < 0) {
    throw problems.validation('`since` must be a time from 1970 on, such as 2026-01-31T00:00:00Z.', [
      { path: 'query.since', message: 'is not a time from 1970 on' },
    ]);
  }
  return ms;
}

/** `GET /admin/v1/tenants/{tenantId}/export`: the operator's NDJSON export of one tenant, streamed. */
export const tenantExportPlugin: FastifyPluginAsync<TenantExportPluginOptions> = async (
  root,
  { exporter },
) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/admin/v1/tenants/:tenantId/export',
    {
      config: { auth: { operator: true } },
      schema: {
        tags: ['admin'],
        operationId: 'exportTenant',
        summary:
          'A tenant\'s sessions and events as NDJSON, streamed: each session (`"kind":"session"`) followed by its events (`"kind":"event"`), then `{"kind":"end","sessions":n,"events":m}`.',
        params: Type.Object({ tenantId: Uuid }, { additionalProperties: false }),
        querystring: ExportQuery,
        response: {
          200: ndjsonResponse('One JSON object per line; the last line is the `end` line with the counts.'),
          ...problemResponses(400, 401, 403, 404),
        },
      },
    },
    async (request, reply) => {
      const since = sinceOf(request.query.since);
      await exporter.requireTenant(request.params.tenantId);
      return sendNdjson(
        reply,
        Readable.from(exporter.lines(request.params.tenantId, since), { objectMode: false }),
      );
    },
  );
};
