import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ServerEventSchema } from '@liveline/protocol';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { problems } from '../../http/problem.ts';
import { jsonTextOf, sendRawJson } from '../../http/raw-json.ts';
import { Count, Nullable, problemResponses, Uuid } from '../../http/schemas.ts';
import { handlerValidatesBody } from '../../http/validation.ts';
import { EventBatchSchema, EventSchema } from './event-types.ts';
import type { EventSession, EventsService } from './service.ts';

const IngestResultSchema = Type.Object({
  accepted: Count('Events stored by this request.'),
  duplicates: Count('Events whose id was already stored for the session (not stored again).'),
});

/**
 * Longest `after` cursor (`nextCursor`) of the event query: base64url of `[timestamp, id]`, an id
 * being up to 128 characters that JSON may write as `\u00XX` each, so at most 1052 characters.
 */
const MAX_CURSOR_LENGTH = 1100;
const Cursor = (description: string) =>
  Type.String({ pattern: '^[A-Za-z0-9_-]*$', maxLength: MAX_CURSOR_LENGTH, description });

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
    const source = principal?.kind === 'device' ? 'device' : 'tenant';
    return events.ingestBatch(session, request.body, source, jsonTextOf(request));
  }

  const ingestSchema = (operationId: string, params: ReturnType<typeof Type.Object>) => ({
    tags: ['events'],
    operationId,
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
        schema: { ...ingestSchema('ingestEvents', SessionParams), hide: url.endsWith('/events') },
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
        ...ingestSchema(
          'ingestDeviceEvents',
          Type.Object({ sessionId: Uuid }, { additionalProperties: false }),
        ),
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
        operationId: 'listSessionEvents',
        summary: 'Page through a session’s events (ordered by timestamp, then id), with filters.',
        params: SessionParams,
        querystring: Type.Object(
          {
            eventType: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
            // Any safe integer (not only a Date's range): `to=9007199254740991` means "no upper bound".
            from: Type.Optional(Count('Only events with timestamp ≥ from (ms).')),
            to: Type.Optional(Count('Only events with timestamp < to (ms).')),
            after: Type.Optional(Cursor('The `nextCursor` of the previous page.')),
            limit: Type.Optional(
              Type.Integer({ format: 'int32', minimum: 1, maximum: 1000, description: 'Default 100.' }),
            ),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            events: Type.Array(Type.Union([EventSchema, ServerEventSchema]), {
              maxItems: 1000,
              description:
                'Events as stored: as sent, with `sessionId`, and `streamingSessionId` while a stream was live.',
            }),
            nextCursor: Nullable(Cursor('Pass as `after` for the next page.')),
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
