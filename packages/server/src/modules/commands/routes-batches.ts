import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { tenantOf } from '../../http/auth.ts';
import { problems } from '../../http/problem.ts';
import {
  Count,
  Int32,
  Nullable,
  problemResponses,
  StringEnum,
  Text,
  Timestamp,
  Uuid,
} from '../../http/schemas.ts';
import { handlerValidatesBody } from '../../http/validation.ts';
import { StreamStartBody } from '../streams/index.ts';
import { BATCH_STATUSES, type CommandBatches } from './batches.ts';
import { LIMITS } from './catalogue.ts';
import { checkEnvelope, commandRoute, EnvelopeBody, keyOf, NoBody, TtlQuery } from './routes.ts';

/** Entries of the batch view's per-session list, per page (default and most). */
const MAX_BATCH_PAGE = 1000;
/** The most sessions a batch goes to (CONTRACT §12), and so the most entries its 202 lists. */
const MAX_BATCH_SESSIONS = 10_000;

const CohortParams = Type.Object(
  { TenantCohortId: Text(128, { description: 'TenantCohortId, defined by the tenant.' }) },
  { additionalProperties: false },
);

const Refusal = Type.Object(
  {
    sessionId: Uuid,
    error: Type.Object({
      code: Type.String({
        pattern: '^[a-z][a-z0-9_]*$',
        maxLength: 64,
        description: 'As in a problem document.',
      }),
      detail: Type.String({ maxLength: 2048 }),
    }),
  },
  { description: "The session's state refused the command (e.g. `already_streaming`): no command." },
);
const Entry = (statuses: readonly string[], description: string) =>
  Type.Union([
    Type.Object({ sessionId: Uuid, commandId: Uuid, status: StringEnum(statuses) }, { description }),
    Refusal,
  ]);

const BatchAnswer = Type.Object(
  {
    batchId: Uuid,
    total: Count('Live sessions of the cohort when the command was sent.'),
    accepted: Count('Sessions that got a command.'),
    refused: Count('Sessions whose state refused it.'),
    sessions: Type.Array(
      Entry(['queued', 'delivered'], 'The command: `delivered` (written to the socket) or `queued`.'),
      { maxItems: MAX_BATCH_SESSIONS, description: 'One entry per live session, in session id order.' },
    ),
  },
  { $id: 'CommandBatchAccepted' },
);

const Counts = Type.Object(
  Object.fromEntries(BATCH_STATUSES.map((s) => [s, Count()])) as Record<string, ReturnType<typeof Count>>,
  { description: "The batch's commands by their status now (an open command past its expiry: `expired`)." },
);

const BatchView = Type.Object(
  {
    batchId: Uuid,
    tenantCohortId: Text(128),
    name: Type.String({ maxLength: LIMITS.nameLength }),
    issuedAt: Timestamp(),
    total: Count('Live sessions of the cohort when the command was sent.'),
    accepted: Count('Sessions that got a command.'),
    refused: Count('Sessions whose state refused it.'),
    counts: Counts,
    sessions: Type.Array(Entry(BATCH_STATUSES, 'The command and its status now.'), {
      maxItems: MAX_BATCH_PAGE,
      description: 'One page of the per-session list, in session id order.',
    }),
    nextCursor: Nullable(Uuid),
    hasMore: Type.Boolean(),
  },
  { $id: 'CommandBatch' },
);

export interface BatchesPluginOptions {
  batches: CommandBatches;
}

type App = FastifyInstance;
type SendToCohort = (
  request: FastifyRequest,
  reply: FastifyReply,
  name: string,
  data: unknown,
) => Promise<unknown>;

const BASE = '/cohorts/:TenantCohortId/realtime/commands';
const batchSchema = (operationId: string, summary: string, body: TSchema) => ({
  tags: ['commands'],
  operationId,
  summary,
  params: CohortParams,
  querystring: TtlQuery,
  body,
  response: { 202: Type.Ref('CommandBatchAccepted'), ...problemResponses(400, 401, 403, 409, 415, 429) },
});

/** Cohort-wide commands (CONTRACT §12): the five command routes under a cohort, and the batch view. */
export const batchesPlugin: FastifyPluginAsync<BatchesPluginOptions> = async (app, { batches }) => {
  app.addSchema(BatchAnswer);
  app.addSchema(BatchView);
  const send: SendToCohort = async (request, reply, name, data) => {
    const { TenantCohortId } = request.params as { TenantCohortId: string };
    const body = await batches.send({
      tenantId: tenantOf(request).tenantId,
      tenantCohortId: TenantCohortId,
      name,
      data,
      ttlSeconds: (request.query as { ttlSeconds?: number }).ttlSeconds ?? LIMITS.ttlSeconds.default,
      ...keyOf(request),
    });
    // The kept text goes out as it is (with an Idempotency-Key, a retry gets the same bytes).
    return reply.code(202).type('application/json; charset=utf-8').send(body);
  };
  registerCohortCommands(app, send);
  registerBatchView(app, batches);
};

function registerCohortCommands(app: App, send: SendToCohort) {
  const summary = (what: string) =>
    `${what} on every live session of the cohort; a session whose state refuses it gets its own error.`;
  app.post(
    `${BASE}/stream`,
    {
      ...commandRoute,
      schema: batchSchema('sendCohortStreamStartCommand', summary('Start a stream'), StreamStartBody),
    },
    async (request, reply) => {
      const { resolution, aspectratio } = request.body as { resolution: number; aspectratio: number };
      return send(request, reply, 'stream.start', { resolution, aspectratio });
    },
  );
  const put = (path: string, name: string, operationId: string, what: string) =>
    app.put(
      `${BASE}/${path}`,
      { ...commandRoute, schema: batchSchema(operationId, summary(what), NoBody) },
      async (request, reply) => send(request, reply, name, {}),
    );
  put('stream/stop', 'stream.stop', 'sendCohortStreamStopCommand', 'Stop the stream');
  put('record', 'record.start', 'sendCohortRecordStartCommand', 'Start recording');
  put('record/stop', 'record.stop', 'sendCohortRecordStopCommand', 'Stop recording');
  app.post(
    BASE,
    {
      ...commandRoute,
      schema: batchSchema(
        'sendCohortCommand',
        summary('Send `camera`, `text` or typed variables'),
        EnvelopeBody,
      ),
      // As the per-session route: `data` depends on `name`, checked in the handler with exact paths.
      validatorCompiler: handlerValidatesBody,
    },
    async (request, reply) => {
      const body = checkEnvelope(request.body);
      return send(request, reply, body.name, body.data);
    },
  );
}

function registerBatchView(root: App, batches: CommandBatches) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/cohorts/:TenantCohortId/realtime/batches/:batchId',
    {
      config: { auth: { tenant: ['commands:send', 'sessions:read'] } },
      schema: {
        tags: ['commands'],
        operationId: 'getCommandBatch',
        summary:
          'A cohort-wide command: its commands counted by status now, and its sessions in session id ' +
          'order, a page at a time (`after`: the `nextCursor` of the previous page).',
        params: Type.Object(
          { TenantCohortId: CohortParams.properties.TenantCohortId, batchId: Uuid },
          { additionalProperties: false },
        ),
        querystring: Type.Object(
          {
            after: Type.Optional(Uuid),
            limit: Type.Optional(
              Int32(1, MAX_BATCH_PAGE, `Sessions per page, 1–${MAX_BATCH_PAGE} (default ${MAX_BATCH_PAGE}).`),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Ref('CommandBatch'), ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const { TenantCohortId, batchId } = request.params;
      const view = await batches.view(tenantOf(request).tenantId, TenantCohortId, batchId, {
        after: request.query.after ?? null,
        limit: request.query.limit ?? MAX_BATCH_PAGE,
      });
      if (!view) throw problems.notFound('batch');
      return view;
    },
  );
}
