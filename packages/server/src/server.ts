import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { buildApp } from './app.ts';
import { MemoryBus } from './bus/memory.ts';
import { type Clock, systemClock } from './clock.ts';
import type { Config } from './config.ts';
import type { AppContext } from './context.ts';
import { createMetrics } from './http/metrics.ts';
import { loadServerKeys } from './modules/auth/keys.ts';
import { resolveOperatorToken } from './modules/auth/operator.ts';
import { TokenService } from './modules/auth/tokens.ts';
import { CommandsService } from './modules/commands/service.ts';
import { EventsService } from './modules/events/service.ts';
import { SessionsService } from './modules/sessions/service.ts';
import { StreamsService } from './modules/streams/service.ts';
import { WebhooksService } from './modules/webhooks/service.ts';
import { Signals } from './signals.ts';
import { openStorage } from './storage/index.ts';

export interface RunningServer {
  app: FastifyInstance;
  ctx: AppContext;
  /** Base URL the server listens on, e.g. http://127.0.0.1:8080 */
  url: string;
  close(): Promise<void>;
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
    const webhooks = new WebhooksService(storage, clock, config, logger, metrics, events, sessions);
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
    app.addHook('onClose', async () => {
      await bus.close();
      await storage.close();
    });
    await app.listen({ port: config.port, host: config.host });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    return { app, ctx, url: `http://${host}:${port}`, close: () => app.close() };
  } catch (err) {
    await storage.close();
    throw err;
  }
}
