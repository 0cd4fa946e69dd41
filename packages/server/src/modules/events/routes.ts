import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ModuleOptions } from '../../context.ts';
import { problems } from '../../http/problem.ts';
import { sendRawJson } from '../../http/raw-json.ts';
import { problemResponses, Uuid } from '../../http/schemas.ts';
import { handlerValidatesBody } from '../../http/validation.ts';
import { ingestBatch } from './batch.ts';
import { EventBatchSchema, EventSchema } from './event-types.ts';
import { decodeCursor, encodeCursor, queryEvents } from './store.ts';

const IngestResultSchema = Type.Object({
  accepted: Type.Integer({ description: 'Events stored by this request.' }),
  duplicates: Type.Integer({
    description: 'Events whose id was already stored for the session (not stored again).',
  }),
});

// The batch body is validated by `validateEventBatch` (per-type validators, all-or-nothing, paths
// like `events[3].timestamp`); its schema is in the route for the OpenAPI document only.
const batchBodyCompiler = handlerValidatesBody;

/** Event ingestion (device or tenant) and the tenant's paged event query. */
export const eventsRoutes: FastifyPluginAsync<ModuleOptions> = async (root, { ctx }) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const { sessions } = ctx;

  async function ingest(request: FastifyRequest, sessionId: string) {
    const principal = request.principal;
    const row =
      principal?.kind === 'device'
        ? await sessions.findForDevice(principal, sessionId)
        : principal?.kind === 'tenant'
          ? await sessions.findForTenant(principal.tenantId, sessionId)
          : null;
    if (!row) throw problems.notFound('session');
    return ingestBatch(ctx, row, request.body, principal?.kind === 'device' ? 'device' : 'tenant');
  }

  const ingestSchema = (params: ReturnType<typeof Type.Object>) => ({
    tags: ['events'],
    summary: 'Ingest a batch of 1–1000 events. All-or-nothing; ids already stored count as duplicates.',
    params,
    body: EventBatchSchema,
    response: { 200: IngestResultSchema, ...problemResponses(400, 401, 403, 404, 413, 415, 429) },
  });
  const SessionParams = Type.Object({ SessionId: Uuid }, { additionalProperties: false });
  const auth = { auth: { tenant: 'events:write', device: true } } as const;

  for (const url of ['/sessions/:SessionId/Events', '/sessions/:SessionId/events']) {
    app.post(
      url,
      {
        config: auth,
        validatorCompiler: batchBodyCompiler,
        schema: { ...ingestSchema(SessionParams), hide: url.endsWith('/events') },
      },
      async (request) => ingest(request, (request.params as { SessionId: string }).SessionId),
    );
  }
  app.post(
    '/client/v1/sessions/:sessionId/events',
    {
      config: { auth: { device: true } },
      validatorCompiler: batchBodyCompiler,
      schema: {
        ...ingestSchema(Type.Object({ sessionId: Uuid }, { additionalProperties: false })),
        tags: ['device'],
      },
    },
    async (request) => ingest(request, (request.params as { sessionId: string }).sessionId),
  );

  app.get(
    '/sessions/:SessionId/events',
    {
      config: { auth: { tenant: 'sessions:read' } },
      schema: {
        tags: ['events'],
        summary: 'Page through a session’s events (ordered by timestamp, then id), with filters.',
        params: SessionParams,
        querystring: Type.Object(
          {
            eventType: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
            from: Type.Optional(
              Type.Integer({ minimum: 0, description: 'Only events with timestamp ≥ from (ms).' }),
            ),
            to: Type.Optional(
              Type.Integer({ minimum: 0, description: 'Only events with timestamp < to (ms).' }),
            ),
            after: Type.Optional(
              Type.String({ maxLength: 400, description: 'The `nextCursor` of the previous page.' }),
            ),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Default 100.' })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            events: Type.Array(EventSchema),
            nextCursor: Type.Union([Type.String(), Type.Null()]),
            hasMore: Type.Boolean(),
          }),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request, reply) => {
      const p = request.principal;
      if (p?.kind !== 'tenant') throw problems.unauthorized();
      const row = await sessions.findForTenant(p.tenantId, request.params.SessionId);
      if (!row) throw problems.notFound('session');
      const q = request.query;
      const after = q.after === undefined ? undefined : decodeCursor(q.after);
      if (after === null) {
        throw problems.validation('`after` is not a cursor this server issued.', [
          { path: 'query.after', message: 'is not a valid cursor' },
        ]);
      }
      const limit = q.limit ?? 100;
      const rows = await queryEvents(ctx.storage.db, row.session_id, {
        eventType: q.eventType,
        from: q.from,
        to: q.to,
        after,
        limit: limit + 1,
      });
      const hasMore = rows.length > limit;
      const page = hasMore ? rows.slice(0, limit) : rows;
      const last = page[page.length - 1];
      const nextCursor =
        hasMore && last ? encodeCursor({ timestamp: last.timestamp, id: last.event_id }) : null;
      // Stored bodies are JSON already: splice them in rather than parse and re-serialise.
      return sendRawJson(
        reply,
        `{"events":[${page.map((r) => r.body).join(',')}],"nextCursor":${JSON.stringify(nextCursor)},"hasMore":${hasMore}}`,
      );
    },
  );
};
