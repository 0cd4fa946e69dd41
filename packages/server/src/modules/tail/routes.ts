import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { tenantOf } from '../../http/auth.ts';
import { problems } from '../../http/problem.ts';
import { problemResponses, Uuid } from '../../http/schemas.ts';
import { CohortId } from '../sessions/index.ts';
import { decodeTailCursor } from './cursor.ts';
import type { TailHub } from './hub.ts';
import type { TailScope } from './store.ts';

export interface TailPluginOptions {
  tail: TailHub;
  /** Whether the tenant has this session (another tenant's is a 404 like an unknown one). */
  hasSession(tenantId: string, sessionId: string): Promise<boolean>;
}

const EVENT_STREAM = 'text/event-stream';
const MAX_TYPES = 32;

const EventTypeName = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.]+$' });
const TailQuery = Type.Object(
  {
    eventType: Type.Optional(
      Type.Union([EventTypeName, Type.Array(EventTypeName, { minItems: 1, maxItems: MAX_TYPES })], {
        description:
          'Only these types (repeat the parameter for several): event types such as `Health`, and presence (`session.started`, `session.ended`, `device.connected`, `device.disconnected`). Default: everything.',
      }),
    ),
  },
  { additionalProperties: false },
);
const LastEventId = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({
      maxLength: 1024,
      pattern: '^[A-Za-z0-9_-]*$',
      description:
        'The `id` of the last event received: the stream resumes after it, with the events stored meanwhile (up to 24 h back).',
    }),
  ),
});

const streamResponse = {
  200: {
    description:
      'Server-Sent Events, open until the client leaves: `id: <cursor>`, `event: <eventType>`, `data: <event JSON>` per stored event; presence as `event: session.started|session.ended|device.connected|device.disconnected` with `data: {sessionId, playerId, tenantCohortId, at}` (no id: live only); a comment line every 15 s.',
    content: { [EVENT_STREAM]: { schema: Type.String({ maxLength: Number.MAX_SAFE_INTEGER }) } },
  },
};

const read = { auth: { tenant: 'sessions:read' } } as const;

type Query = { eventType?: string | string[] };
type Cohort = { TenantCohortId: string };
type Session = { SessionId: string };

/** The live tail (CONTRACT §11): the tenant's events and presence as Server-Sent Events. */
export const tailPlugin: FastifyPluginAsync<TailPluginOptions> = async (root, { tail, hasSession }) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const schema = (operationId: string, summary: string, params?: ReturnType<typeof Type.Object>) => ({
    tags: ['sessions'],
    operationId,
    summary,
    ...(params ? { params } : {}),
    querystring: TailQuery,
    headers: LastEventId,
    response: { ...streamResponse, ...problemResponses(400, 401, 403, 404, 429) },
  });

  app.get(
    '/events/stream',
    { config: read, schema: schema('tailEvents', 'Every event and presence change of the tenant, live.') },
    (request, reply) => serve(tail, request, reply, {}),
  );
  app.get(
    '/cohorts/:TenantCohortId/events/stream',
    {
      config: read,
      schema: schema(
        'tailCohortEvents',
        'The events and presence changes of one cohort, live.',
        Type.Object({ TenantCohortId: CohortId }, { additionalProperties: false }),
      ),
    },
    (request, reply) =>
      serve(tail, request, reply, { tenantCohortId: (request.params as Cohort).TenantCohortId }),
  );
  app.get(
    '/sessions/:SessionId/events/stream',
    {
      config: read,
      schema: schema(
        'tailSessionEvents',
        'The events and presence changes of one session, live.',
        Type.Object({ SessionId: Uuid }, { additionalProperties: false }),
      ),
    },
    async (request, reply) => {
      const { SessionId } = request.params as Session;
      if (!(await hasSession(tenantOf(request).tenantId, SessionId))) throw problems.notFound('session');
      return serve(tail, request, reply, { sessionId: SessionId });
    },
  );
};

/** Checks the resume point, then holds the response open for the hub. */
async function serve(
  tail: TailHub,
  request: FastifyRequest,
  reply: FastifyReply,
  narrow: Pick<TailScope, 'sessionId' | 'tenantCohortId'>,
) {
  const raw = request.headers['last-event-id'];
  const resume = typeof raw === 'string' && raw !== '' ? decodeTailCursor(raw) : null;
  if (typeof raw === 'string' && raw !== '' && resume === null) {
    throw problems.validation('Last-Event-ID is not an id this stream sent.', [
      { path: 'headers.last-event-id', message: 'not a tail cursor' },
    ]);
  }
  const { eventType } = request.query as Query;
  const eventTypes = eventType === undefined ? undefined : [eventType].flat();
  const scope: TailScope = { tenantId: tenantOf(request).tenantId, ...narrow, eventTypes };
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    ...(reply.getHeaders() as Record<string, string>),
    'content-type': `${EVENT_STREAM}; charset=utf-8`,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    // nginx and friends would otherwise hold the stream back to fill their buffers.
    'x-accel-buffering': 'no',
  });
  // The headers go now; a reader that reconnects is told to wait a second first.
  res.write('retry: 1000\n\n');
  await tail.open(tenantOf(request), scope, res, resume);
}
