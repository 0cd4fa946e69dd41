import { createHash } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { tenantOf } from '../../http/auth.ts';
import { noBodyIsEmptyObject } from '../../http/empty-body.ts';
import { listRoutes } from '../../http/list-routes.ts';
import { type FieldError, problems } from '../../http/problem.ts';
import { Int32, Nullable, problemResponses, StringEnum, Timestamp, Uuid } from '../../http/schemas.ts';
import { handlerValidatesBody } from '../../http/validation.ts';
import type { SessionsService } from '../sessions/index.ts';
import { StreamStartBody } from '../streams/index.ts';
import { CAMERA_CONTROLS, LIMITS, SCREENSHOT_FORMATS, VARIABLE_TYPES } from './catalogue.ts';
import type { CommandsService } from './service.ts';
import { commandDataErrors } from './validation.ts';

const SessionParams = Type.Object({ SessionId: Uuid }, { additionalProperties: false });
export const TtlQuery = Type.Object(
  {
    ttlSeconds: Type.Optional(
      Int32(
        LIMITS.ttlSeconds.min,
        LIMITS.ttlSeconds.max,
        'How long the command waits for a disconnected device (default 30 s).',
      ),
    ),
  },
  { additionalProperties: false },
);
export const NoBody = Type.Object({}, { additionalProperties: false, description: 'No body (or `{}`).' });

const CommandSchema = Type.Object(
  {
    commandId: Uuid,
    sessionId: Uuid,
    name: Type.String({ pattern: '^[A-Za-z0-9_.-]+$', maxLength: LIMITS.nameLength }),
    data: Type.Unknown(),
    status: StringEnum(['queued', 'delivered', 'acknowledged', 'failed', 'expired', 'cancelled']),
    issuedAt: Timestamp(),
    expiresAt: Timestamp(),
    deliveredAt: Nullable(Timestamp()),
    settledAt: Nullable(Timestamp()),
    error: Type.Unknown({ description: 'What the device said when it refused the command.' }),
    batchId: Nullable(Uuid),
  },
  { $id: 'Command' },
);

export const EnvelopeBody = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: LIMITS.nameLength,
      pattern: '^[A-Za-z0-9_.-]+$',
      description:
        '`camera`, `text`, `screenshot` (the device takes one now and uploads it), or a custom name ([A-Za-z0-9_.-]) for typed variables.',
    }),
    data: Type.Union(
      [
        Type.Object(
          {
            controls: Type.Array(
              Type.Object({
                name: StringEnum(Object.keys(CAMERA_CONTROLS)),
                value: Type.String({
                  pattern: '^[-+0-9.eE]+$',
                  maxLength: 64,
                  description: 'A number as text (enum controls: the integer).',
                }),
              }),
              { minItems: 1, maxItems: LIMITS.cameraControls },
            ),
          },
          { title: 'camera' },
        ),
        Type.String({ minLength: 1, maxLength: LIMITS.textLength, title: 'text' }),
        Type.Object(
          { format: Type.Optional(StringEnum(SCREENSHOT_FORMATS)) },
          { title: 'screenshot', additionalProperties: false },
        ),
        Type.Object(
          {
            names: Type.Array(Type.String({ minLength: 1, maxLength: LIMITS.nameLength }), {
              minItems: 1,
              maxItems: LIMITS.variables,
            }),
            types: Type.Array(StringEnum(VARIABLE_TYPES), { minItems: 1, maxItems: LIMITS.variables }),
            values: Type.Array(
              Type.String({
                maxLength: LIMITS.stringValueLength,
                description: 'The value as text: `true`/`false`, an int32, a finite decimal, or a string.',
              }),
              { minItems: 1, maxItems: LIMITS.variables },
            ),
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

/** The request's Idempotency-Key and, with one, the digest that tells a retry from another request. */
export function keyOf(request: FastifyRequest) {
  const key = idempotencyKey(request);
  return { idempotencyKey: key, requestHash: key === null ? null : requestHash(request) };
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

export interface CommandsPluginOptions {
  commands: CommandsService;
  sessions: Pick<SessionsService, 'findForTenant'>;
}

type App = FastifyInstance;

const accepted = { 202: Type.Ref('Command'), ...problemResponses(400, 401, 403, 404, 409, 415, 429) };
const BASE = '/sessions/:SessionId/realtime/commands';
export const commandRoute = {
  config: { auth: { tenant: 'commands:send' } },
  preValidation: noBodyIsEmptyObject,
} as const;
const commandSchema = (operationId: string, summary: string, body: TSchema) => ({
  tags: ['commands'],
  operationId,
  summary,
  params: SessionParams,
  querystring: TtlQuery,
  body,
  response: accepted,
});

/** The seven command endpoints of the spec, plus reading the command log. */
export const commandsPlugin: FastifyPluginAsync<CommandsPluginOptions> = async (
  app,
  { commands, sessions },
) => {
  app.addSchema(CommandSchema);

  /**
   * Issues a command to the session the path names (404 for another tenant's) and answers 202. With
   * an Idempotency-Key the answer is the first one given for that key, as it was sent.
   */
  const send = async (request: FastifyRequest, reply: FastifyReply, name: string, data: unknown) => {
    const { SessionId } = request.params as { SessionId: string };
    const session = await sessions.findForTenant(tenantOf(request).tenantId, SessionId);
    if (!session) throw problems.notFound('session');
    const input = {
      name,
      data,
      ttlSeconds: (request.query as { ttlSeconds?: number }).ttlSeconds ?? LIMITS.ttlSeconds.default,
      ...keyOf(request),
    };
    if (input.idempotencyKey === null) return reply.code(202).send(await commands.issue(session, input));
    const answer = await commands.issueOnce(session, input, (view) => JSON.stringify(view));
    // The kept text goes out as it is (a string is not serialized again).
    return reply.code(answer.status_code).type('application/json; charset=utf-8').send(answer.body);
  };
  registerStreamCommands(app, send);
  registerEnvelopeCommand(app, send);
  registerCommandLog(app, commands, sessions);
  registerCancel(app, commands, sessions);
};

type Send = (request: FastifyRequest, reply: FastifyReply, name: string, data: unknown) => Promise<unknown>;

function registerStreamCommands(app: App, send: Send) {
  app.post(
    `${BASE}/stream`,
    {
      ...commandRoute,
      schema: commandSchema(
        'sendStreamStartCommand',
        'Start a stream on a live session (device answers; then StreamStarted).',
        StreamStartBody,
      ),
    },
    async (request, reply) => {
      const { resolution, aspectratio } = request.body as { resolution: number; aspectratio: number };
      return send(request, reply, 'stream.start', { resolution, aspectratio });
    },
  );
  const put = (path: string, name: string, operationId: string, summary: string) =>
    app.put(
      `${BASE}/${path}`,
      { ...commandRoute, schema: commandSchema(operationId, summary, NoBody) },
      async (request, reply) => send(request, reply, name, {}),
    );
  put(
    'stream/stop',
    'stream.stop',
    'sendStreamStopCommand',
    'Stop the stream (StreamStopped; a recording stops with it).',
  );
  put('record', 'record.start', 'sendRecordStartCommand', 'Start recording; the client must be streaming.');
  put('record/stop', 'record.stop', 'sendRecordStopCommand', 'Stop recording.');
}

function registerEnvelopeCommand(app: App, send: Send) {
  app.post(
    BASE,
    {
      ...commandRoute,
      schema: commandSchema(
        'sendCommand',
        'Send `camera` settings, a `text` message, or typed variables under any other name.',
        EnvelopeBody,
      ),
      // The envelope's `data` depends on `name`: its rules are checked in the handler, with exact paths.
      validatorCompiler: handlerValidatesBody,
    },
    async (request, reply) => {
      const body = checkEnvelope(request.body);
      return send(request, reply, body.name, body.data);
    },
  );
}

/** The envelope `{name, data}`, checked in full; 400 with every problem's path otherwise. */
export function checkEnvelope(raw: unknown): { name: string; data: unknown } {
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
  return { name: body.name as string, data: body.data };
}

function registerCommandLog(
  root: App,
  commands: CommandsService,
  sessions: CommandsPluginOptions['sessions'],
) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const read = { auth: { tenant: ['commands:send', 'sessions:read'] } } as const;
  app.get(
    `${BASE}/:commandId`,
    {
      config: read,
      schema: {
        tags: ['commands'],
        operationId: 'getCommand',
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
    url: BASE,
    operationId: 'listCommands',
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
      const { commands: items, ...meta } = await commands.list(session.session_id, page);
      return { items, ...meta };
    },
  });
}

/** `POST .../commands/{commandId}/cancel` (CONTRACT §14). */
function registerCancel(root: App, commands: CommandsService, sessions: CommandsPluginOptions['sessions']) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    `${BASE}/:commandId/cancel`,
    {
      config: { auth: { tenant: 'commands:send' } },
      preValidation: noBodyIsEmptyObject,
      schema: {
        tags: ['commands'],
        operationId: 'cancelCommand',
        summary:
          'Cancel a command that is still queued or delivered: it ends `cancelled`, a connected device ' +
          'gets `command.cancel`, and a stream or recording that was starting goes back to idle. ' +
          '409 `command_settled` (with its `commandStatus`) once it is acknowledged, failed, expired or cancelled.',
        params: Type.Object({ SessionId: Uuid, commandId: Uuid }, { additionalProperties: false }),
        body: NoBody,
        response: { 200: Type.Ref('Command'), ...problemResponses(400, 401, 403, 404, 409, 415, 429) },
      },
    },
    async (request) => {
      const session = await sessions.findForTenant(tenantOf(request).tenantId, request.params.SessionId);
      if (!session) throw problems.notFound('session');
      return commands.cancel(session, request.params.commandId);
    },
  );
}
