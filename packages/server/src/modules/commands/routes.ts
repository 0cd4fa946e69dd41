import { createHash } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { ModuleOptions } from '../../context.ts';
import { tenantOf } from '../../http/auth.ts';
import { listRoutes } from '../../http/list-routes.ts';
import { type FieldError, problems } from '../../http/problem.ts';
import { problemResponses, StringEnum, Uuid } from '../../http/schemas.ts';
import { handlerValidatesBody } from '../../http/validation.ts';
import type { Database } from '../../storage/index.ts';
import type { SessionRow } from '../sessions/service.ts';
import { ASPECT_RATIOS, CAMERA_CONTROLS, LIMITS, RESOLUTIONS, VARIABLE_TYPES } from './catalogue.ts';
import type { IssueCommand } from './service.ts';
import { commandDataErrors } from './validation.ts';

const SessionParams = Type.Object({ SessionId: Uuid }, { additionalProperties: false });
const TtlQuery = Type.Object(
  {
    ttlSeconds: Type.Optional(
      Type.Integer({
        minimum: LIMITS.ttlSeconds.min,
        maximum: LIMITS.ttlSeconds.max,
        description: 'How long the command waits for a disconnected device (default 30 s).',
      }),
    ),
  },
  { additionalProperties: false },
);
const NoBody = Type.Object({}, { additionalProperties: false, description: 'No body (or `{}`).' });

const CommandSchema = Type.Object(
  {
    commandId: Uuid,
    sessionId: Uuid,
    name: Type.String(),
    data: Type.Unknown(),
    status: StringEnum(['queued', 'delivered', 'acknowledged', 'failed', 'expired']),
    issuedAt: Type.Integer(),
    expiresAt: Type.Integer(),
    deliveredAt: Type.Union([Type.Integer(), Type.Null()]),
    settledAt: Type.Union([Type.Integer(), Type.Null()]),
    error: Type.Unknown({ description: 'What the device said when it refused the command.' }),
  },
  { $id: 'Command' },
);

const enumDescription = (values: Record<number, string>) =>
  Object.entries(values)
    .map(([k, v]) => `${k} = ${v}`)
    .join(', ');

const StreamStartBody = Type.Object(
  {
    resolution: Type.Integer({ minimum: 0, maximum: 4, description: enumDescription(RESOLUTIONS) }),
    aspectratio: Type.Integer({ minimum: 0, maximum: 4, description: enumDescription(ASPECT_RATIOS) }),
  },
  { additionalProperties: false },
);

const EnvelopeBody = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 64,
      description: '`camera`, `text`, or a custom name ([A-Za-z0-9_.-]) for typed variables.',
    }),
    data: Type.Union(
      [
        Type.Object(
          {
            controls: Type.Array(
              Type.Object({
                name: StringEnum(Object.keys(CAMERA_CONTROLS)),
                value: Type.String({ description: 'A number as text (enum controls: the integer).' }),
              }),
              { minItems: 1, maxItems: LIMITS.cameraControls },
            ),
          },
          { title: 'camera' },
        ),
        Type.String({ minLength: 1, maxLength: LIMITS.textLength, title: 'text' }),
        Type.Object(
          {
            names: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 256 }),
            types: Type.Array(StringEnum(VARIABLE_TYPES)),
            values: Type.Array(Type.String()),
          },
          { title: 'variables' },
        ),
      ],
      { description: 'Depends on `name`; checked in full by the server.' },
    ),
  },
  { additionalProperties: false },
);

function requestHash(request: FastifyRequest) {
  const path = request.url.split('?')[0];
  return createHash('sha256')
    .update(JSON.stringify([request.method, path, request.body ?? null, request.query ?? null]))
    .digest('base64url');
}

function idempotencyKey(request: FastifyRequest): string | null {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined) return null;
  const key = Array.isArray(raw) ? raw[0] : raw;
  if (!/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw problems.validation('The Idempotency-Key header is invalid.', [
      { path: 'headers.idempotency-key', message: 'must be 1 to 255 visible ASCII characters' },
    ]);
  }
  return key;
}

type Prepare = (
  trx: Kysely<Database>,
  session: SessionRow,
  commandId: string,
) => Promise<Record<string, unknown> | undefined>;

/** The seven command endpoints of the spec, plus reading the command log. */
export const commandsRoutes: FastifyPluginAsync<ModuleOptions> = async (root, { ctx }) => {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const { sessions, commands, streams, config } = ctx;
  app.addSchema(CommandSchema);

  // Expiry: open commands past their time become `expired` (and the streams module rolls back).
  let sweeper: NodeJS.Timeout | undefined;
  app.addHook('onReady', async () => {
    sweeper = setInterval(() => {
      commands.sweepExpired().catch((err) => app.log.error({ err }, 'command expiry sweep failed'));
    }, config.commandSweepIntervalMs);
    sweeper.unref();
  });
  app.addHook('onClose', async () => clearInterval(sweeper));

  async function send(request: FastifyRequest, name: string, data: unknown, prepare?: Prepare) {
    const { tenantId } = tenantOf(request);
    const { SessionId } = request.params as { SessionId: string };
    const session = await sessions.findForTenant(tenantId, SessionId);
    if (!session) throw problems.notFound('session');
    const input: IssueCommand = {
      name,
      data,
      ttlSeconds: (request.query as { ttlSeconds?: number }).ttlSeconds ?? LIMITS.ttlSeconds.default,
      idempotencyKey: idempotencyKey(request),
      requestHash: requestHash(request),
      prepare: prepare ? (trx, commandId) => prepare(trx, session, commandId) : undefined,
    };
    return commands.issue(session, input);
  }

  const commandRoute = {
    config: { auth: { tenant: 'commands:send' } },
    preValidation: async (request: FastifyRequest) => {
      if (request.body === undefined) request.body = {};
    },
  } as const;
  const accepted = { 202: Type.Ref('Command'), ...problemResponses(400, 401, 403, 404, 409, 415, 429) };
  const base = '/sessions/:SessionId/realtime/commands';

  app.post(
    `${base}/stream`,
    {
      ...commandRoute,
      schema: {
        tags: ['commands'],
        summary: 'Start a stream on a live session (device answers; then StreamStarted).',
        params: SessionParams,
        querystring: TtlQuery,
        body: StreamStartBody,
        response: accepted,
      },
    },
    async (request, reply) => {
      const { resolution, aspectratio } = request.body;
      const command = await send(
        request,
        'stream.start',
        { resolution, aspectratio },
        async (trx, session, id) => {
          const { streamingSessionId } = await streams.requestStreamStart(
            trx,
            session,
            { resolution, aspectratio },
            id,
          );
          return { streamingSessionId };
        },
      );
      return reply.code(202).send(command);
    },
  );

  const putRoute = (path: string, name: string, summary: string, prepare: Prepare) =>
    app.put(
      `${base}/${path}`,
      {
        ...commandRoute,
        schema: {
          tags: ['commands'],
          summary,
          params: SessionParams,
          querystring: TtlQuery,
          body: NoBody,
          response: accepted,
        },
      },
      async (request, reply) => reply.code(202).send(await send(request, name, {}, prepare)),
    );

  putRoute(
    'stream/stop',
    'stream.stop',
    'Stop the stream (StreamStopped; a recording stops with it).',
    async (trx, s, id) => {
      await streams.requestStreamStop(trx, s, id);
      return undefined;
    },
  );
  putRoute('record', 'record.start', 'Start recording; the client must be streaming.', async (trx, s, id) => {
    const { recordingId } = await streams.requestRecordStart(trx, s, id);
    return { recordingId };
  });
  putRoute('record/stop', 'record.stop', 'Stop recording.', async (trx, s, id) => {
    await streams.requestRecordStop(trx, s, id);
    return undefined;
  });

  app.post(
    base,
    {
      ...commandRoute,
      schema: {
        tags: ['commands'],
        summary: 'Send `camera` settings, a `text` message, or typed variables under any other name.',
        params: SessionParams,
        querystring: TtlQuery,
        body: EnvelopeBody,
        response: accepted,
      },
      // The envelope's `data` depends on `name`: its rules are checked in the handler, with exact paths.
      validatorCompiler: handlerValidatesBody,
    },
    async (request, reply) => {
      const raw: unknown = request.body;
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
        throw problems.validation('The body must be a JSON object {name, data}.', [
          { path: '', message: 'must be object' },
        ]);
      }
      const body = raw as { name?: unknown; data?: unknown };
      const errors: FieldError[] = Object.keys(body)
        .filter((k) => k !== 'name' && k !== 'data')
        .map((k) => ({ path: k, message: 'is not an allowed field' }));
      if (typeof body.name !== 'string' || body.name === '')
        errors.push({ path: 'name', message: 'must be a non-empty string' });
      if (!('data' in body)) errors.push({ path: 'data', message: 'is required' });
      if (typeof body.name === 'string' && 'data' in body)
        errors.push(...commandDataErrors(body.name, body.data));
      if (errors.length > 0) {
        throw problems.validation(`The command is invalid: ${errors[0].path} ${errors[0].message}.`, errors);
      }
      return reply.code(202).send(await send(request, body.name as string, body.data));
    },
  );

  const read = { auth: { tenant: ['commands:send', 'sessions:read'] } } as const;

  app.get(
    `${base}/:commandId`,
    {
      config: read,
      schema: {
        tags: ['commands'],
        summary: 'One command with its status.',
        params: Type.Object({ SessionId: Uuid, commandId: Uuid }, { additionalProperties: false }),
        response: { 200: Type.Ref('Command'), ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const session = await sessions.findForTenant(tenantOf(request).tenantId, request.params.SessionId);
      const command = session ? await commands.find(session.session_id, request.params.commandId) : null;
      if (!command) throw problems.notFound('command');
      return command;
    },
  );

  listRoutes(app, {
    url: base,
    key: 'commands',
    item: Type.Ref('Command'),
    tags: ['commands'],
    summary: "The session's commands, newest first",
    config: read,
    params: { SessionId: Uuid },
    errors: [400, 401, 403, 404, 429],
    list: async (request, page) => {
      const { SessionId } = request.params as { SessionId: string };
      const session = await sessions.findForTenant(tenantOf(request).tenantId, SessionId);
      if (!session) throw problems.notFound('session');
      const { commands: items, totalCount } = await commands.list(session.session_id, page);
      return { items, totalCount };
    },
  });
};
