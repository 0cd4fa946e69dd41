import rateLimit, { type FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import websocket from '@fastify/websocket';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Services } from './compose.ts';
import { authPlugin } from './http/auth.ts';
import { clientErrorHandler, errorHandler, notFoundHandler } from './http/errors.ts';
import { isShed, loadSheddingPlugin, overloadOf } from './http/load-shedding.ts';
import { metricsPlugin } from './http/metrics.ts';
import {
  describeRoute,
  finishDocument,
  HealthSchema,
  noQuery,
  openapiDefinition,
  ReadinessSchema,
} from './http/openapi.ts';
import { pagesPlugin } from './http/pages.ts';
import { problems } from './http/problem.ts';
import { decorateJsonText, rememberJsonText } from './http/raw-json.ts';
import { ProblemSchema, problemResponses } from './http/schemas.ts';
import { buildSerializer } from './http/serialization.ts';
import { buildValidator, refuseNul } from './http/validation.ts';
import { uuidv7 } from './ids.ts';
import { failureWindow, requestBudget } from './limits/index.ts';
import { alertsPlugin } from './modules/alerts/index.ts';
import { authRoutes, SCOPES } from './modules/auth/index.ts';
import { batchesPlugin, commandsPlugin } from './modules/commands/index.ts';
import { eventsPlugin } from './modules/events/index.ts';
import { playersPlugin } from './modules/players/index.ts';
import { realtimePlugin } from './modules/realtime/index.ts';
import { rewardsPlugin } from './modules/rewards/index.ts';
import { screenshotsPlugin } from './modules/screenshots/index.ts';
import { eventSession, SessionSchema, sessionsPlugin } from './modules/sessions/index.ts';
import { streamsPlugin } from './modules/streams/index.ts';
import { tailPlugin } from './modules/tail/index.ts';
import { TenantExport, tenantExportPlugin } from './modules/tenant-export/index.ts';
import { webhooksPlugin } from './modules/webhooks/index.ts';
import { registerTracing, type Tracing } from './tracing.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** The window of the tenant and device request budgets (CONTRACT §8: requests per second). */
const RATE_WINDOW_MS = 1000;

/**
 * A device spends its own budget — its token's tenant and player — whatever session its request
 * names, so another player's device cannot use up a session's budget with requests that fail.
 * Its WebSocket frames are charged to the same key.
 */
function deviceBudgetKey(p: { tenantId: string; playerId: string }): string {
  return `d:${p.tenantId}:${p.playerId}`;
}

function rateLimitKey(request: FastifyRequest): string {
  const p = request.principal;
  if (p?.kind === 'device') return deviceBudgetKey(p);
  return p?.kind === 'tenant' ? `t:${p.tenantId}` : 'none';
}

/**
 * One log line a request, when it completes: its request id, method, path, status and time (Fastify's
 * own two lines, at start and completion, each its own write, cost ~7.5 % of a core at 2,000
 * commands/s at `info`; this one, written in chunks, ~3.6 %). The start is logged at `debug`.
 */
class OneLinePerRequest extends LogController {
  override incomingRequest(request: FastifyRequest) {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply) {
    const responseTime = reply.elapsedTime;
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime }, 'request completed');
  }
}

/** The HTTP face of the services: shared infrastructure, then one plugin per module with what it uses. */
export async function buildApp(
  services: Services,
  options: { tracing?: Tracing | null } = {},
): Promise<FastifyInstance> {
  const ctx = services;
  const { config, sessions, events, streams, commands, hub, clock } = services;
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    // Behind a load balancer, `request.ip` is the client's address from X-Forwarded-For (LIVELINE_TRUST_PROXY).
    // (A number of hops is what Fastify does with one, in the function form its types accept.)
    trustProxy:
      typeof config.trustProxy === 'number'
        ? (
            (hops) => (_address: string, hop: number) =>
              hop < hops
          )(config.trustProxy)
        : config.trustProxy,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : uuidv7();
    },
    return503OnClosing: true,
    logController: new OneLinePerRequest(),
    // The router's refusals (a malformed or too long path) are problem documents like every error.
    frameworkErrors: errorHandler,
    // ...and so are the HTTP parser's (headers too large, not HTTP at all).
    clientErrorHandler,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true },
    // Fastify's type names Ajv's own compile signature; ours has the route-compiler shape it calls at run time.
    schemaController: {
      compilersFactory: { buildValidator: buildValidator as never, buildSerializer },
    },
  });
  // Before every hook and route, so each request has its span (when tracing is on).
  await registerTracing(app, options.tracing);
  // JSON only (and form bodies on /oauth/token): anything else is a 415.
  app.removeContentTypeParser('text/plain');
  // An empty JSON body is no body at all (some clients send the header anyway).
  const parseJson = app.getDefaultJsonParser('error', 'error');
  decorateJsonText(app);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    // The text is kept beside the value: ingestion stores events as written (modules/events).
    parseJson(request, body as string, (err, value) => {
      if (!err) rememberJsonText(request, body as string);
      done(err, value);
    });
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  // Callback-style hooks (here and below) cost no promise per request.
  // PostgreSQL text cannot hold U+0000: refused in paths, queries and JSON bodies on every store (400).
  app.addHook('preValidation', (request, _reply, done) => {
    refuseNul(request);
    done();
  });
  app.addSchema(ProblemSchema);
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-Id', request.id);
    done();
  });
  // Node closes only the connections idle when close begins; a keep-alive connection busy at that
  // moment would hold shutdown open until its client lets go, so its last response closes it.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    // Live tails never end by themselves: they end here, or closing would wait for their readers.
    services.tail.close();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('Connection', 'close');
    // No browser guesses a type the server did not send; API answers (tokens, secrets, personal data)
    // are never stored by a cache on the way.
    reply.header('X-Content-Type-Options', 'nosniff');
    const type = String(reply.getHeader('content-type') ?? '');
    if (type.includes('json') && !reply.hasHeader('cache-control')) reply.header('Cache-Control', 'no-store');
    done(null, payload);
  });
  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth;
    if (!route.schema?.tags) return;
    // An API route without query parameters takes none: an unknown one is a 400, not ignored.
    if (!route.schema.querystring) route.schema = { ...route.schema, querystring: noQuery(auth) };
    // Who may call it, and the answers every API route can give, for the OpenAPI document.
    route.schema = describeRoute(route.schema, auth, isShed(route.url));
  });

  await app.register(swagger, {
    openapi: openapiDefinition(SCOPES),
    // The rate-limit headers, once every route is in (http/openapi.ts).
    transformObject: (document) =>
      'openapiObject' in document ? finishDocument(document.openapiObject) : document.swaggerObject,
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: true,
    // The default policy upgrades the page's own assets to https, which leaves /docs blank whenever the
    // server is reached over plain http by anything but localhost (a LAN address, Safari on localhost).
    transformStaticCSP: (header) => header.replace(/\s*upgrade-insecure-requests;?/, ''),
  });

  // Before auth: its onRequest hook marks upgrade requests, so a refused upgrade's socket is destroyed.
  await app.register(websocket, {
    options: { maxPayload: config.wsMaxMessageBytes },
    // On shutdown every device socket closes with 1012 (service restart): devices reconnect elsewhere.
    // A device that does not answer the close (asleep, its network gone) would hold the shutdown for
    // ws's 30 s close timeout: after a grace its connection is ended, the 1012 frame already sent.
    preClose: (done) => {
      const sockets = app.websocketServer;
      for (const client of sockets.clients) client.close(1012, 'server restarting');
      const graceMs = Math.min(2000, config.shutdownTimeoutMs / 4);
      const grace = setTimeout(() => {
        for (const client of sockets.clients) client.terminate();
      }, graceMs);
      sockets.close(() => {
        clearTimeout(grace);
        done();
      });
    },
  });
  // After websocket (a refused upgrade's socket is destroyed) and before auth: a shed request costs
  // no token check and no rate-limit count.
  await app.register(loadSheddingPlugin, {
    maxEventLoopDelayMs: config.maxEventLoopDelayMs,
    metrics: ctx.metrics,
  });
  await app.register(authPlugin, { auth: services.auth });

  await app.register(metricsPlugin, { metrics: ctx.metrics });
  // One set of counters for HTTP requests and device frames; with several processes they live in
  // Redis (while it is unreachable each process counts on its own).
  const budget = requestBudget(services.redis, { windowMs: RATE_WINDOW_MS, log: ctx.logger });
  const store = budget.store;
  await app.register(rateLimit, {
    global: true,
    // Route-level onRequest hooks run after the auth hook, so the principal is known here; limiting
    // before the body is read means a flood of large or invalid requests is throttled too.
    hook: 'onRequest',
    timeWindow: RATE_WINDOW_MS,
    // The plugin builds its store with `new`: this one hands over the shared counters.
    store: function sharedStore() {
      return store;
    } as unknown as FastifyRateLimitStoreCtor,
    keyGenerator: rateLimitKey,
    max: (_request, key) => (key.startsWith('d:') ? config.rateLimitDeviceRps : config.rateLimitTenantRps),
    allowList: (request) => {
      const key = rateLimitKey(request);
      if (key === 'none') return true;
      return key.startsWith('d:') ? config.rateLimitDeviceRps === 0 : config.rateLimitTenantRps === 0;
    },
    errorResponseBuilder: (_request, context) =>
      problems.rateLimited(Math.max(1, Math.ceil(context.ttl / 1000))),
  });

  app.get(
    '/healthz',
    {
      schema: {
        tags: ['ops'],
        operationId: 'getHealth',
        summary: 'The process is up.',
        response: { 200: HealthSchema },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        tags: ['ops'],
        operationId: 'getReadiness',
        response: { 200: ReadinessSchema, ...problemResponses(503) },
        summary:
          'Storage is reachable. With REDIS_URL, `redis` says whether this process reaches Redis and has ' +
          'rejoined the others (subscribed again, its presence re-written); ' +
          'a process without Redis still serves its own sockets, so it stays ready (CONTRACT §9.1). ' +
          '503 `overloaded` (with `Retry-After`) while the process sheds load (CONTRACT §16), ' +
          '503 `unavailable` when storage is not reachable.',
      },
    },
    async () => {
      const overload = overloadOf(app);
      if (overload) throw overload;
      try {
        await ctx.storage.ping();
      } catch {
        throw problems.unavailable('Storage is not reachable.');
      }
      const redis = services.redis ? { redis: services.redis.joined ? 'up' : 'down' } : {};
      return { status: 'ready', storage: ctx.storage.dialect, ...redis };
    },
  );
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await app.register(authRoutes, {
    auth: services.auth,
    // Refused client authentications per client id and address (a secret cannot be guessed at speed).
    tokenFailures: failureWindow(services.redis, clock, {
      name: 'token',
      limit: config.tokenFailuresPerMinute,
      windowMs: 60_000,
      log: ctx.logger,
    }),
  });
  await app.register(sessionsPlugin, {
    sessions,
    events,
    clock,
    publicUrl: config.publicUrl,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
  });
  await app.register(eventsPlugin, {
    events,
    sessions: {
      findForPrincipal: async (principal, id) => {
        const row = await sessions.findForPrincipal(principal, id);
        return row && eventSession(row);
      },
    },
  });
  await app.register(streamsPlugin, { streams, sessions });
  await app.register(commandsPlugin, { commands, sessions: services.liveSessions });
  await app.register(batchesPlugin, { batches: services.batches });
  await app.register(realtimePlugin, {
    hub,
    sessions,
    limits: {
      spend: (principal) => budget.spend(deviceBudgetKey(principal), config.rateLimitDeviceRps),
      pausePending: config.wsPausePending,
      // Four of the largest frames: a device may have a few big batches in flight, no more.
      pauseBytes: 4 * config.wsMaxMessageBytes,
      maxPending: config.wsMaxPending,
    },
  });
  await app.register(rewardsPlugin, { rewards: services.rewards, publicUrl: config.publicUrl });
  await app.register(webhooksPlugin, { webhooks: services.webhooks });
  await app.register(screenshotsPlugin, {
    screenshots: services.screenshots,
    sessions: {
      findForDevice: async (principal, id) => {
        const row = await sessions.findForDevice(principal, id);
        return row && eventSession(row);
      },
      findForTenant: async (tenantId, id) => {
        const row = await sessions.findForTenant(tenantId, id);
        return row && eventSession(row);
      },
      noteContact: (id) => sessions.noteContact(id),
    },
  });
  await app.register(tenantExportPlugin, {
    exporter: new TenantExport({ auth: services.auth, sessions, events }),
  });
  await app.register(alertsPlugin, { alerts: services.alerts });
  await app.register(playersPlugin, {
    players: services.players,
    sessionSchema: SessionSchema,
    requireTenant: (tenantId) => services.auth.requireTenant(tenantId),
    publicUrl: config.publicUrl,
  });
  await app.register(tailPlugin, {
    tail: services.tail,
    hasSession: async (tenantId, sessionId) => (await sessions.findForTenant(tenantId, sessionId)) !== null,
  });
  // The web console and the viewer page (CONTRACT §10), built by @liveline/console.
  await app.register(pagesPlugin, {});
  return app;
}
