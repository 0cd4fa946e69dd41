import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { problems } from '../../http/problem.ts';
import { sendRawJson } from '../../http/raw-json.ts';
import { problemResponses, Uuid } from '../../http/schemas.ts';
import { handlerValidatesBody } from '../../http/validation.ts';
import { EventBatchSchema, EventSchema } from './event-types.ts';
import type { EventSession, EventsService } from './service.ts';

const IngestResultSchema = Type.Object({
  accepted: Type.Integer({ description: 'Events stored by this request.' }),
  duplicates: Type.Integer({
    description: 'Events whose id was already stored for the session (not stored again).',
  }),
});

// The batch body is validated by `validateEventBatch` (per-type validators, all-or-nothing, paths
// like `events[3].timestamp`); its schema is in the route for the OpenAPI document only.
const batchBodyCompiler = handlerValidatesBody;

/** How the events routes find the session a request names, as its caller may see it. */
export interface SessionFinder {
  findForPrincipal(principal: FastifyRequest['principal'], sessionId: string): Promise<EventSession | null>;
}

export interface EventsPluginOptions {
  events: EventsService;
  sessions: SessionFinder;
}

const SessionParams = Type.Object({ SessionId: Uuid }, { additionalProperties: false });

/** Event ingestion (device or tenant) and the tenant's paged event query. */
export const eventsPlugin: FastifyPluginAsync<EventsPluginOptions> = async (app, options) => {
  registerIngestion(app, options);
  registerEventQuery(app, options);
};

function registerIngestion(root: FastifyInstance, { events, sessions }: EventsPluginOptions) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  async function ingest(request: FastifyRequest, sessionId: string) {
    const principal = request.principal;
    const session = await sessions.findForPrincipal(principal, sessionId);
    if (!session) throw problems.notFound('session');
    return events.ingestBatch(session, request.body, principal?.kind === 'device' ? 'device' : 'tenant');
  }

  const ingestSchema = (params: ReturnType<typeof Type.Object>) => ({
    tags: ['events'],
    summary: 'Ingest a batch of 1–1000 events. All-or-nothing; ids already stored count as duplicates.',
    params,
    body: EventBatchSchema,
    response: { 200: IngestResultSchema, ...problemResponses(400, 401, 403, 404, 413, 415, 429) },
  });
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
}

function registerEventQuery(root: FastifyInstance, { events, sessions }: EventsPluginOptions) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
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
      if (request.principal?.kind !== 'tenant') throw problems.unauthorized();
      const session = await sessions.findForPrincipal(request.principal, request.params.SessionId);
      if (!session) throw problems.notFound('session');
      const { bodies, nextCursor, hasMore } = await events.page(session.sessionId, {
        ...request.query,
        limit: request.query.limit ?? 100,
      });
      // Stored bodies are JSON already: splice them in rather than parse and re-serialise.
      return sendRawJson(
        reply,
        `{"events":[${bodies.join(',')}],"nextCursor":${JSON.stringify(nextCursor)},"hasMore":${hasMore}}`,
      );
    },
  );
}
