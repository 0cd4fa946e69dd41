import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { buildApp } from './app.ts';
import { type Clock, systemClock } from './clock.ts';
import { compose, type Services } from './compose.ts';
import type { Config } from './config.ts';
import { Scheduler } from './jobs.ts';
import { setupTracing, type TracingOptions } from './tracing.ts';

export interface RunningServer {
  app: FastifyInstance;
  services: Services;
  /** Base URL the server listens on, e.g. http://127.0.0.1:8080 */
  url: string;
  close(): Promise<void>;
}

/**
 * The server's logger: JSON lines on stdout. They are written in chunks of 4 KiB, or every 100 ms
 * (`minLength`, `periodicFlush`), not one write each: at `info`, every request logs a line (2,000 a
 * second at 2,000 commands/s). Pino flushes what is left when the process
 * exits (a fatal error, a signal); a SIGKILL can lose the last 100 ms of lines.
 */
export function createLogger(level: string): Logger {
  return pino(
    {
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
    },
    pino.destination({ dest: 1, minLength: 4096, periodicFlush: 100 }),
  );
}

/**
 * Sets up tracing (when on: it must be there before the store and the app are built), composes the
 * services, builds the app, starts the jobs and listens. `spanProcessor` (tracing.ts) turns tracing on
 * with finished spans going there instead of to OTLP: for tests and benches.
 */
export async function startServer(
  config: Config,
  options: { clock?: Clock; logger?: Logger } & TracingOptions = {},
): Promise<RunningServer> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger(config.logLevel);
  const tracing = await setupTracing(config.tracing, { spanProcessor: options.spanProcessor });
  let services: Services;
  try {
    services = await compose(config, clock, logger);
  } catch (err) {
    await tracing?.shutdown();
    throw err;
  }
  try {
    const app = await buildApp(services, { tracing });
    const scheduler = new Scheduler(services.jobs, (err, job) => logger.error({ err, job }, 'job failed'));
    app.addHook('onReady', async () => {
      scheduler.start();
      for (const worker of services.workers) worker.start();
    });
    app.addHook('onClose', async () => {
      // The sockets are closed (preClose) and the requests answered; frames read before the close are
      // still being handled and need the store.
      await services.hub.drain();
      await scheduler.stop();
      for (const worker of services.workers) await worker.stop();
      await services.close();
      // Last: the spans of the shutdown itself are sent too.
      await tracing?.shutdown().catch((err: unknown) => logger.warn({ err }, 'could not flush traces'));
    });
    await app.listen({ port: config.port, host: config.host });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    return { app, services, url: `http://${host}:${port}`, close: () => app.close() };
  } catch (err) {
    await services.close();
    await tracing?.shutdown();
    throw err;
  }
}
