import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import websocket from '@fastify/websocket';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { uuidv7 } from 'uuidv7';
import type { Services } from './compose.ts';
import { authPlugin } from './http/auth.ts';
import { errorHandler, notFoundHandler } from './http/errors.ts';
import { metricsPlugin } from './http/metrics.ts';
import { problems } from './http/problem.ts';
import { ProblemSchema } from './http/schemas.ts';
import { buildValidator } from './http/validation.ts';
import { authRoutes } from './modules/auth/index.ts';
import { commandsPlugin } from './modules/commands/index.ts';
import { eventsPlugin } from './modules/events/index.ts';
import { realtimePlugin } from './modules/realtime/index.ts';
import { rewardsPlugin } from './modules/rewards/index.ts';
import { eventSession, sessionsPlugin } from './modules/sessions/index.ts';
import { streamsPlugin } from './modules/streams/index.ts';
import { webhooksPlugin } from './modules/webhooks/index.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

function rateLimitKey(request: FastifyRequest): string {
  const p = request.principal;
  if (p?.kind === 'device') {
    const params = request.params as Record<string, unknown> | undefined;
    const sessionId = params?.sessionId ?? params?.SessionId;
    return `d:${p.tenantId}:${typeof sessionId === 'string' ? sessionId : p.playerId}`;
  }
  return p?.kind === 'tenant' ? `t:${p.tenantId}` : 'none';
}

/** The HTTP face of the services: shared infrastructure, then one plugin per module with what it uses. */
export async function buildApp(services: Services): Promise<FastifyInstance> {
  const ctx = services;
  const { config, sessions, events, streams, commands, hub, clock } = services;
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : uuidv7();
    },
    return503OnClosing: true,
    // The router's refusals (a malformed or too long path) are problem documents like every error.
    frameworkErrors: errorHandler,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true },
    // Fastify's type names Ajv's own compile signature; ours has the route-compiler shape it calls at run time.
    schemaController: { compilersFactory: { buildValidator: buildValidator as never } },
  });
  // JSON only (and form bodies on /oauth/token): anything else is a 415.
  app.removeContentTypeParser('text/plain');
  // An empty JSON body is no body at all (some clients send the header anyway).
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') done(null, undefined);
    else parseJson(request, body as string, done);
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  app.addSchema(ProblemSchema);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
  });
  // Node closes only the connections idle when close begins; a keep-alive connection busy at that
  // moment would hold shutdown open until its client lets go, so its last response closes it.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('Connection', 'close');
    // No browser guesses a type the server did not send; API answers (tokens, secrets, personal data)
    // are never stored by a cache on the way.
    reply.header('X-Content-Type-Options', 'nosniff');
    const type = String(reply.getHeader('content-type') ?? '');
    if (type.includes('json') && !reply.hasHeader('cache-control')) reply.header('Cache-Control', 'no-store');
  });
  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth;
    if (!route.schema?.tags) return;
    // An API route without query parameters takes none: an unknown one is a 400, not ignored.
    if (!route.schema.querystring) {
      const querystring = auth?.queryToken
        ? Type.Object({ access_token: Type.Optional(Type.String()) }, { additionalProperties: false })
        : Type.Object({}, { additionalProperties: false });
      route.schema = { ...route.schema, querystring };
    }
    // Routes that require a token say so in the OpenAPI document.
    if (!auth) return;
    const security: Record<string, string[]>[] = [];
    if (auth.tenant)
      security.push({ tenantToken: typeof auth.tenant === 'string' ? [auth.tenant] : [...auth.tenant] });
    if (auth.device) security.push({ deviceToken: [] });
    if (auth.operator) security.push({ operatorToken: [] });
    route.schema = { ...route.schema, security };
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'liveline',
        version: '0.1.0',
        description:
          'Realtime commands, sessions, cohorts, events, webhooks and streaming challenges for apps on VR headsets.',
      },
      components: {
        securitySchemes: {
          tenantToken: {
            type: 'oauth2',
            flows: { clientCredentials: { tokenUrl: '/oauth/token', scopes: {} } },
          },
          deviceToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          operatorToken: { type: 'http', scheme: 'bearer' },
        },
      },
    },
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
    preClose: (done) => {
      for (const client of app.websocketServer.clients) client.close(1012, 'server restarting');
      app.websocketServer.close(() => done());
    },
  });
  await app.register(authPlugin, { auth: services.auth });

  await app.register(metricsPlugin, { metrics: ctx.metrics });
  await app.register(rateLimit, {
    global: true,
    // Route-level onRequest hooks run after the auth hook, so the principal is known here; limiting
    // before the body is read means a flood of large or invalid requests is throttled too.
    hook: 'onRequest',
    timeWindow: 1000,
    // With several processes the counts live in Redis; while it is unreachable requests go through.
    ...(services.redis
      ? { redis: services.redis.command, nameSpace: `${config.redisPrefix}rl:`, skipOnError: true }
      : {}),
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

  app.get('/healthz', { schema: { tags: ['ops'], summary: 'The process is up.' } }, async () => ({
    status: 'ok',
  }));
  app.get(
    '/readyz',
    {
      schema: {
        tags: ['ops'],
        summary:
          'Storage is reachable. With REDIS_URL, `redis` says whether this process reaches Redis; ' +
          'a process without Redis still serves its own sockets, so it stays ready (CONTRACT §9.1).',
      },
    },
    async () => {
      try {
        await ctx.storage.ping();
      } catch {
        throw problems.unavailable('Storage is not reachable.');
      }
      const redis = services.redis ? { redis: services.redis.up ? 'up' : 'down' } : {};
      return { status: 'ready', storage: ctx.storage.dialect, ...redis };
    },
  );
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await app.register(authRoutes, { auth: services.auth });
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
  await app.register(commandsPlugin, { commands, sessions });
  await app.register(realtimePlugin, { hub, sessions });
  await app.register(rewardsPlugin, { rewards: services.rewards, publicUrl: config.publicUrl });
  await app.register(webhooksPlugin, { webhooks: services.webhooks });
  return app;
}
