import { Readable } from 'node:stream';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ModuleOptions } from '../../context.ts';
import { deviceOf, tenantOf } from '../../http/auth.ts';
import { readGetBody } from '../../http/get-body.ts';
import { DEFAULT_PAGE_SIZE, envelopeSchema, listEnvelope, type PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import { sendRawJson } from '../../http/raw-json.ts';
import { problemResponses, Uuid } from '../../http/schemas.ts';
import { sessionEventBodies } from '../events/store.ts';
import { CohortId, DeviceInfo, ListQuery, MinutesBody, SessionSchema } from './schemas.ts';

const DEFAULT_MINUTES = 5;
const UNPAGINATED_PAGE_SIZE = 1000;

const SessionParams = Type.Object({ SessionId: Uuid }, { additionalProperties: false });
const DeviceSessionParams = Type.Object({ sessionId: Uuid }, { additionalProperties: false });
const PageParams = Type.Object({ pageNumber: Type.Integer({ minimum: 1 }) }, { additionalProperties: false });
const CohortParams = Type.Object({ TenantCohortId: CohortId }, { additionalProperties: false });
const CohortPageParams = Type.Object(
  { TenantCohortId: CohortId, pageNumber: Type.Integer({ minimum: 1 }) },
  { additionalProperties: false },
);
const SessionList = envelopeSchema('sessions', Type.Ref('Session'));

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

/** Device sessions (start, end) and the tenant's session and cohort queries. */
export const sessionsRoutes: FastifyPluginAsync<ModuleOptions> = async (root, { ctx }) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const { sessions, config, clock } = ctx;
  app.addSchema(SessionSchema);

  // The idle sweep: sessions without device contact for the timeout are ended by the server.
  let sweeper: NodeJS.Timeout | undefined;
  app.addHook('onReady', async () => {
    const every = Math.min(30_000, Math.max(250, (config.sessionIdleTimeoutS * 1000) / 4));
    sweeper = setInterval(() => {
      sessions
        .sweepIdle(config.sessionIdleTimeoutS * 1000)
        .catch((err) => app.log.error({ err }, 'idle sweep failed'));
    }, every);
    sweeper.unref();
  });
  app.addHook('onClose', async () => clearInterval(sweeper));

  const wsBase = (request: FastifyRequest) => {
    if (config.publicUrl) return config.publicUrl.replace(/^http/, 'ws').replace(/\/$/, '');
    return `${request.protocol === 'https' ? 'wss' : 'ws'}://${request.host}`;
  };

  app.post(
    '/client/v1/sessions',
    {
      config: { auth: { device: true } },
      // No body at all is the same as `{}`.
      preValidation: async (request) => {
        if (request.body === undefined) request.body = {};
      },
      schema: {
        tags: ['device'],
        summary: 'Start a session for the token’s player.',
        body: Type.Object(
          { tenantCohortId: Type.Optional(CohortId), device: Type.Optional(DeviceInfo) },
          { additionalProperties: false, description: 'May be omitted entirely.' },
        ),
        response: {
          201: Type.Object({
            sessionId: Uuid,
            realtimeUrl: Type.String(),
            heartbeatIntervalMs: Type.Integer(),
          }),
          ...problemResponses(400, 401, 403, 429),
        },
      },
    },
    async (request, reply) => {
      const row = await sessions.create(deviceOf(request), request.body);
      return reply.code(201).send({
        sessionId: row.session_id,
        realtimeUrl: `${wsBase(request)}/client/v1/sessions/${row.session_id}/realtime`,
        heartbeatIntervalMs: config.heartbeatIntervalMs,
      });
    },
  );

  app.post(
    '/client/v1/sessions/:sessionId/end',
    {
      config: { auth: { device: true } },
      schema: {
        tags: ['device'],
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

  const read = { auth: { tenant: 'sessions:read' } } as const;

  app.get(
    '/sessions/:SessionId',
    {
      config: read,
      schema: {
        tags: ['sessions'],
        summary: 'One session, including all its events ordered by timestamp then id.',
        params: SessionParams,
        response: {
          200: Type.Intersect([Type.Ref('Session'), Type.Object({ events: Type.Array(Type.Object({})) })]),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request, reply) => {
      const row = await sessions.findForTenant(tenantOf(request).tenantId, request.params.SessionId);
      if (!row) throw problems.notFound('session');
      const head = JSON.stringify(await sessions.view(row));
      const db = ctx.storage.db;
      // Streamed: the session, then its events page by page, never one giant string.
      async function* body() {
        yield `${head.slice(0, -1)},"events":[`;
        let first = true;
        for await (const event of sessionEventBodies(db, row!.session_id)) {
          yield first ? event : `,${event}`;
          first = false;
        }
        yield ']}';
      }
      return sendRawJson(reply, Readable.from(body()));
    },
  );

  const listRoute = (
    url: string,
    summary: string,
    params: typeof PageParams | typeof CohortParams | typeof CohortPageParams | null,
    active: boolean,
  ) => {
    app.get(
      url,
      {
        config: read,
        schema: {
          tags: ['sessions'],
          summary,
          ...(params ? { params } : {}),
          querystring: active
            ? params && 'pageNumber' in params.properties
              ? ListQuery.activePaged
              : ListQuery.active
            : params && 'pageNumber' in params.properties
              ? ListQuery.allPaged
              : ListQuery.all,
          response: { 200: SessionList, ...problemResponses(400, 401, 403, 413, 429) },
        },
      },
      async (request) => {
        const { tenantId } = tenantOf(request);
        const p = (request.params ?? {}) as { pageNumber?: number; TenantCohortId?: string };
        const q = request.query as { minutes?: number; pageSize?: number };
        const page: PageRequest =
          p.pageNumber === undefined
            ? { page: 1, pageSize: UNPAGINATED_PAGE_SIZE }
            : { page: p.pageNumber, pageSize: q.pageSize ?? DEFAULT_PAGE_SIZE };
        const filter = {
          tenantId,
          tenantCohortId: p.TenantCohortId,
          activeSince: active ? clock.now() - (await activeMinutes(request, q.minutes)) * 60_000 : undefined,
        };
        const { rows, totalCount } = await sessions.list(filter, page);
        const items = await sessions.views(rows);
        return listEnvelope('sessions', items, page, totalCount);
      },
    );
  };

  listRoute(
    '/sessions/active',
    'Sessions active within the last `minutes` (default 5); page 1 of 1000.',
    null,
    true,
  );
  listRoute(
    '/sessions/active/page/:pageNumber',
    'Sessions active within the last `minutes`, one page.',
    PageParams,
    true,
  );
  listRoute(
    '/cohorts/:TenantCohortId/sessions',
    'Sessions of a cohort, newest first; page 1 of 1000.',
    CohortParams,
    false,
  );
  listRoute(
    '/cohorts/:TenantCohortId/sessions/page/:pageNumber',
    'Sessions of a cohort, one page.',
    CohortPageParams,
    false,
  );
  listRoute(
    '/cohorts/:TenantCohortId/active',
    'Active sessions of a cohort; page 1 of 1000.',
    CohortParams,
    true,
  );
  listRoute(
    '/cohorts/:TenantCohortId/active/page/:pageNumber',
    'Active sessions of a cohort, one page.',
    CohortPageParams,
    true,
  );
};
