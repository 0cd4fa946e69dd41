import { Readable } from 'node:stream';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Clock } from '../../clock.ts';
import { deviceOf, tenantOf } from '../../http/auth.ts';
import { noBodyIsEmptyObject } from '../../http/empty-body.ts';
import { readGetBody } from '../../http/get-body.ts';
import { listRoutes } from '../../http/list-routes.ts';
import { problems } from '../../http/problem.ts';
import { socketBaseUrl } from '../../http/public-url.ts';
import { sendRawJson } from '../../http/raw-json.ts';
import { Int32, problemResponses, UrlOut, Uuid } from '../../http/schemas.ts';
import type { EventsService } from '../events/index.ts';
import { CohortId, DeviceInfo, Minutes, MinutesBody, SessionSchema } from './schemas.ts';
import type { SessionsService } from './service.ts';

const DEFAULT_MINUTES = 5;

const SessionParams = Type.Object({ SessionId: Uuid }, { additionalProperties: false });
const DeviceSessionParams = Type.Object({ sessionId: Uuid }, { additionalProperties: false });

/** `minutes` from the query or the JSON body (the spec's way); both and different → 400. */
async function activeMinutes(request: FastifyRequest, fromQuery: number | undefined) {
  const body = await readGetBody<{ minutes?: number }>(request, MinutesBody);
  const fromBody = body?.minutes;
  if (fromQuery !== undefined && fromBody !== undefined && fromQuery !== fromBody) {
    throw problems.validation('`minutes` was given in the query and the body with different values.', [
      { path: 'minutes', message: `query says ${fromQuery}, body says ${fromBody}` },
    ]);
  }
  return fromQuery ?? fromBody ?? DEFAULT_MINUTES;
}

export interface SessionsPluginOptions {
  sessions: SessionsService;
  /** A session's events, for `GET /sessions/{id}`. */
  events: Pick<EventsService, 'sessionEventPages'>;
  clock: Clock;
  publicUrl: string | null;
  heartbeatIntervalMs: number;
}

type App = FastifyInstance;

/** Device sessions (start, end) and the tenant's session and cohort queries. */
export const sessionsPlugin: FastifyPluginAsync<SessionsPluginOptions> = async (app, options) => {
  app.addSchema(SessionSchema);
  registerDeviceRoutes(app, options);
  registerSessionRead(app, options);
  registerSessionLists(app, options);
};

const StartBody = Type.Object(
  { tenantCohortId: Type.Optional(CohortId), device: Type.Optional(DeviceInfo) },
  { additionalProperties: false, description: 'May be omitted entirely.' },
);
const Started = Type.Object({
  sessionId: Uuid,
  realtimeUrl: UrlOut(4096, 'The WebSocket URL of the session’s realtime channel (ws: or wss:).'),
  heartbeatIntervalMs: Int32(1, 2 ** 31 - 1, 'How often the device sends `heartbeat`.'),
});

function registerDeviceRoutes(
  root: App,
  { sessions, publicUrl, heartbeatIntervalMs }: SessionsPluginOptions,
) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  // LIVELINE_PUBLIC_URL when set; never a Host header then (docs/configuration.md).
  const wsBase = (request: FastifyRequest) => socketBaseUrl(publicUrl, request);

  app.post(
    '/client/v1/sessions',
    {
      config: { auth: { device: true } },
      preValidation: noBodyIsEmptyObject,
      schema: {
        tags: ['device'],
        operationId: 'startSession',
        summary: 'Start a session for the token’s player.',
        body: StartBody,
        response: { 201: Started, ...problemResponses(400, 401, 403, 429) },
      },
    },
    async (request, reply) => {
      const base = wsBase(request); // a Host it cannot use is refused before anything is written
      const row = await sessions.create(deviceOf(request), request.body);
      return reply.code(201).send({
        sessionId: row.session_id,
        realtimeUrl: `${base}/client/v1/sessions/${row.session_id}/realtime`,
        heartbeatIntervalMs,
      });
    },
  );

  app.post(
    '/client/v1/sessions/:sessionId/end',
    {
      config: { auth: { device: true } },
      schema: {
        tags: ['device'],
        operationId: 'endSession',
        summary:
          'End the session; emits SessionEnd with its duration in seconds. Ending twice changes nothing.',
        params: DeviceSessionParams,
        response: { 200: Type.Ref('Session'), ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const row = await sessions.findForDevice(deviceOf(request), request.params.sessionId);
      if (!row) throw problems.notFound('session');
      await sessions.touch(row.session_id);
      return sessions.view(await sessions.end(row, 'device'));
    },
  );
}

const read = { auth: { tenant: 'sessions:read' } } as const;

function registerSessionRead(root: App, { sessions, events }: SessionsPluginOptions) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/sessions/:SessionId',
    {
      config: read,
      schema: {
        tags: ['sessions'],
        operationId: 'getSession',
        summary: 'One session, including all its events ordered by timestamp then id.',
        params: SessionParams,
        response: {
          200: Type.Intersect([
            Type.Ref('Session'),
            Type.Object({
              events: Type.Array(Type.Object({}), {
                description:
                  'Every event of the session, streamed (no limit: use `GET /sessions/{SessionId}/events` to page).',
              }),
            }),
          ]),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request, reply) => {
      const row = await sessions.findForTenant(tenantOf(request).tenantId, request.params.SessionId);
      if (!row) throw problems.notFound('session');
      const head = JSON.stringify(await sessions.view(row));
      // Streamed: the session, then its events a page (one chunk) at a time, never one giant string.
      async function* body() {
        yield `${head.slice(0, -1)},"events":[`;
        let separator = '';
        for await (const page of events.sessionEventPages(row!.session_id)) {
          yield separator + page.join(',');
          separator = ',';
        }
        yield ']}';
      }
      return sendRawJson(reply, Readable.from(body()));
    },
  );
}

function registerSessionLists(app: App, { sessions, clock }: SessionsPluginOptions) {
  const sessionsList = (
    url: string,
    operationId: string,
    summary: string,
    active: boolean,
    cohort: boolean,
  ) =>
    listRoutes(app, {
      url,
      operationId,
      key: 'sessions',
      item: Type.Ref('Session'),
      tags: ['sessions'],
      summary,
      config: read,
      params: cohort ? { TenantCohortId: CohortId } : undefined,
      query: active ? { minutes: Type.Optional(Minutes) } : undefined,
      errors: [400, 401, 403, 413, 429],
      list: async (request, page) => {
        const { tenantId } = tenantOf(request);
        const { TenantCohortId } = (request.params ?? {}) as { TenantCohortId?: string };
        const { minutes } = request.query as { minutes?: number };
        const filter = {
          tenantId,
          tenantCohortId: TenantCohortId,
          activeSince: active ? clock.now() - (await activeMinutes(request, minutes)) * 60_000 : undefined,
        };
        const { rows, ...meta } = await sessions.list(filter, page);
        return { items: await sessions.views(rows), ...meta };
      },
    });

  sessionsList(
    '/sessions/active',
    'listActiveSessions',
    'Sessions active within the last `minutes` (default 5)',
    true,
    false,
  );
  sessionsList(
    '/cohorts/:TenantCohortId/sessions',
    'listCohortSessions',
    'Sessions of a cohort, newest first',
    false,
    true,
  );
  sessionsList(
    '/cohorts/:TenantCohortId/active',
    'listActiveCohortSessions',
    'Active sessions of a cohort',
    true,
    true,
  );
}
