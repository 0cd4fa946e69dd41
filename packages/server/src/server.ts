import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { buildApp } from './app.ts';
import { MemoryBus } from './bus/memory.ts';
import { type Clock, systemClock } from './clock.ts';
import type { Config } from './config.ts';
import type { AppContext } from './context.ts';
import { createMetrics } from './http/metrics.ts';
import { Scheduler } from './jobs.ts';
import { loadServerKeys } from './modules/auth/keys.ts';
import { resolveOperatorToken } from './modules/auth/operator.ts';
import { findTenant } from './modules/auth/store.ts';
import { TokenService } from './modules/auth/tokens.ts';
import { CommandsService } from './modules/commands/service.ts';
import { EventsService } from './modules/events/service.ts';
import { SessionsService } from './modules/sessions/service.ts';
import { StreamsService } from './modules/streams/service.ts';
import { createWebhooks, type WebhooksService } from './modules/webhooks/index.ts';
import { Signals } from './signals.ts';
import { openStorage } from './storage/index.ts';

export interface RunningServer {
  app: FastifyInstance;
  ctx: AppContext;
  /** Base URL the server listens on, e.g. http://127.0.0.1:8080 */
  url: string;
  close(): Promise<void>;
}

/**
 * Every stored event becomes a `session.event` for the tenant's endpoints, in its own (group-commit)
 * transaction, with its session's cohort. Only the events of tenants with such an endpoint are looked at.
 */
function recordEventsForWebhooks(
  events: EventsService,
  sessions: SessionsService,
  webhooks: WebhooksService,
) {
  events.writer.addTransactionHook(async (trx, group) => {
    if (group.inserted.length === 0) return;
    const taking = await webhooks.outbox.tenantsTakingEvents(trx, group.tenants.values());
    if (taking.size === 0) return;
    const rows = group.inserted.filter((r) => taking.has(group.tenants.get(r.session_id) ?? ''));
    if (rows.length === 0) return;
    const cohorts = await sessions.cohortsOf(trx, [...new Set(rows.map((r) => r.session_id))]);
    await webhooks.outbox.recordStoredEvents(
      trx,
      rows.map((r) => ({
        tenantId: group.tenants.get(r.session_id) ?? '',
        tenantCohortId: cohorts.get(r.session_id) ?? null,
        eventType: r.event_type,
        receivedAt: r.received_at,
        body: r.body,
      })),
    );
  });
}

export function createLogger(level: string): Logger {
  return pino({
    level,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.clientSecret', '*.token'],
      remove: true,
    },
    serializers: {
      req: (req: { method: string; url: string; id: string }) => ({
        id: req.id,
        method: req.method,
        url: req.url.replace(/([?&]access_token=)[^&]*/g, '$1[redacted]'),
      }),
    },
  });
}

/** Opens storage, loads keys, builds the app and listens. Background jobs start with the app. */
export async function startServer(
  config: Config,
  options: { clock?: Clock; logger?: Logger } = {},
): Promise<RunningServer> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger(config.logLevel);
  const storage = await openStorage(config);
  try {
    const keys = await loadServerKeys(storage, config.secretKey, clock.now());
    const operator = resolveOperatorToken(config.adminToken, config.dataDir);
    const issuer = config.publicUrl ?? 'urn:liveline';
    const metrics = createMetrics();
    const events = new EventsService(storage, clock, metrics);
    const signals = new Signals((err, signal) => logger.error({ err, signal }, 'signal handler failed'));
    const sessions = new SessionsService(storage, clock, events, signals);
    const bus = new MemoryBus();
    const webhooks = createWebhooks({
      storage,
      clock,
      config,
      logger,
      metrics,
      tenants: { tenantExists: async (tenantId) => (await findTenant(storage, tenantId)) !== null },
    });
    recordEventsForWebhooks(events, sessions, webhooks);
    const ctx: AppContext = {
      config,
      storage,
      clock,
      logger,
      tokens: new TokenService(keys, issuer, clock),
      operator,
      digestKey: keys.digestKey,
      metrics,
      bus,
      signals,
      events,
      sessions,
      streams: new StreamsService(storage, clock, sessions, events, signals),
      commands: new CommandsService(storage, clock, bus, signals),
      outbox: webhooks.outbox,
      webhooks,
    };
    const app = await buildApp(ctx);
    const scheduler = new Scheduler(webhooks.jobs(), (err, job) => logger.error({ err, job }, 'job failed'));
    const workers = webhooks.workers();
    // preClose: before storage closes (onClose hooks run last-registered first, and storage's is last).
    app.addHook('preClose', async () => {
      await Promise.all([scheduler.stop(), ...workers.map((w) => w.stop())]);
    });
    app.addHook('onClose', async () => {
      await bus.close();
      await storage.close();
    });
    await app.listen({ port: config.port, host: config.host });
    for (const worker of workers) worker.start();
    scheduler.start();
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    return { app, ctx, url: `http://${host}:${port}`, close: () => app.close() };
  } catch (err) {
    await storage.close();
    throw err;
  }
}
