import { Readable } from 'node:stream';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { type AuthSpec, tenantOf } from '../../http/auth.ts';
import { listRoutes } from '../../http/list-routes.ts';
import { ndjsonResponse, sendNdjson } from '../../http/ndjson.ts';
import { serverBaseUrl } from '../../http/public-url.ts';
import { problemResponses, StringEnum, Uuid } from '../../http/schemas.ts';
import { AUDIT_ACTIONS, AuditEntry, Erased, PlayerId } from './schemas.ts';
import type { PlayersService } from './service.ts';

export interface PlayersPluginOptions {
  players: PlayersService;
  /** The session as the API shows it (the sessions module's schema, `$id` `Session`), for the list's items. */
  sessionSchema: TSchema & { $id?: string };
  /** 404 for an unknown tenant (the operator's mount). */
  requireTenant(tenantId: string): Promise<unknown>;
  publicUrl: string | null;
}

/**
 * One mount of the players' routes: the tenant's own (`/players/…`, scope `players:manage`) or the
 * operator's mirror (`/admin/v1/tenants/{tenantId}/players/…`); the handlers are the same.
 */
interface Mount {
  prefix: string;
  auth: AuthSpec;
  tags: string[];
  params: Record<string, TSchema>;
  tenantId(request: FastifyRequest): Promise<string>;
  /** Who asked, for the audit log. */
  actor(request: FastifyRequest): string;
  operationId(verb: string, noun: string): string;
}

function mounts(options: PlayersPluginOptions): Mount[] {
  return [
    {
      prefix: '/players/:playerId',
      auth: { tenant: 'players:manage' },
      tags: ['players'],
      params: { playerId: PlayerId },
      tenantId: async (request) => tenantOf(request).tenantId,
      actor: (request) => tenantOf(request).clientId,
      operationId: (verb, noun) => `${verb}${noun}`,
    },
    {
      prefix: '/admin/v1/tenants/:tenantId/players/:playerId',
      auth: { operator: true },
      tags: ['admin'],
      params: { tenantId: Uuid, playerId: PlayerId },
      tenantId: async (request) => {
        const { tenantId } = request.params as { tenantId: string };
        await options.requireTenant(tenantId);
        return tenantId;
      },
      actor: () => 'operator',
      operationId: (verb, noun) => `${verb}Tenant${noun}`,
    },
  ];
}

const playerOf = (request: FastifyRequest) => (request.params as { playerId: string }).playerId;

/** CONTRACT §16: a player's sessions, export and erasure; the operator's audit log. */
export const playersPlugin: FastifyPluginAsync<PlayersPluginOptions> = async (app, options) => {
  // The sessions plugin's schema lives in its own context: this one adds it for its own refs.
  app.addSchema(options.sessionSchema);
  for (const mount of mounts(options)) {
    registerSessions(app, options, mount);
    registerExport(app, options, mount);
    registerErase(app, options, mount);
  }
  registerAudit(app, options);
};

function registerSessions(app: FastifyInstance, { players, sessionSchema }: PlayersPluginOptions, m: Mount) {
  listRoutes(app, {
    url: `${m.prefix}/sessions`,
    operationId: m.operationId('list', 'PlayerSessions'),
    key: 'sessions',
    item: Type.Ref(String(sessionSchema.$id)),
    tags: m.tags,
    summary: "The player's sessions, newest first (an unknown player has none)",
    config: { auth: m.auth },
    params: m.params,
    errors: [400, 401, 403, 404, 429],
    list: async (request, page) => players.sessions(await m.tenantId(request), playerOf(request), page),
  });
}

function registerExport(root: FastifyInstance, { players, publicUrl }: PlayersPluginOptions, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    `${m.prefix}/export`,
    {
      config: { auth: m.auth },
      schema: {
        tags: m.tags,
        operationId: m.operationId('export', 'Player'),
        summary:
          'Everything kept of the player as NDJSON, streamed: `{"kind":"player"}`, then each session (`session`) with its `event`, `command` and `screenshot` lines, the `claim` lines, last `{"kind":"end","counts":{…}}`.',
        params: Type.Object(m.params, { additionalProperties: false }),
        response: {
          200: ndjsonResponse('One JSON object per line; the last line is the `end` line with the counts.'),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = await m.tenantId(request);
      const playerId = playerOf(request);
      const imageBase = serverBaseUrl(publicUrl, request);
      const auditId = await players.auditExport(tenantId, playerId, m.actor(request));
      const lines = players.exportLines(tenantId, playerId, auditId, imageBase);
      return sendNdjson(reply, Readable.from(lines, { objectMode: false }));
    },
  );
}

function registerErase(root: FastifyInstance, { players }: PlayersPluginOptions, m: Mount) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.delete(
    m.prefix,
    {
      config: { auth: m.auth },
      schema: {
        tags: m.tags,
        operationId: m.operationId('erase', 'Player'),
        summary:
          "Erase the player's data: their sessions, events, commands, stream intervals, screenshots and device tokens are gone at once for reads and within 60 s in the store; claims keep their codes but lose the player. `player.erased` is sent. Idempotent while pending.",
        params: Type.Object(m.params, { additionalProperties: false }),
        response: { 202: Erased, ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request, reply) => {
      const tenantId = await m.tenantId(request);
      return reply.code(202).send(await players.erase(tenantId, playerOf(request), m.actor(request)));
    },
  );
}

function registerAudit(app: FastifyInstance, { players }: PlayersPluginOptions) {
  listRoutes(app, {
    url: '/admin/v1/audit',
    operationId: 'listAudit',
    key: 'entries',
    item: AuditEntry,
    tags: ['admin'],
    summary: "The audit log of players' data (exports and erasures), newest first",
    config: { auth: { operator: true } },
    query: {
      tenantId: Type.Optional(Uuid),
      playerId: Type.Optional(PlayerId),
      action: Type.Optional(StringEnum(AUDIT_ACTIONS)),
    },
    errors: [400, 401, 403, 429],
    list: (request, page) => players.audit(request.query as { tenantId?: string; playerId?: string }, page),
  });
}
