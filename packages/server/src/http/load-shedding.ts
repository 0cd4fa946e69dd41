import underPressure from '@fastify/under-pressure';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Metrics } from './metrics.ts';
import { problems } from './problem.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Whether this process sheds load now (LIVELINE_MAX_EVENT_LOOP_DELAY_MS). */
    overloaded(): boolean;
  }
}

/**
 * Routes that answer however late the event loop runs. Liveness stays 200: a busy process is not a
 * dead one, and an orchestrator would restart it (losing its sockets) for being busy. `/readyz` is
 * not shed but says so itself (503 `overloaded`), so a load balancer stops sending. `/metrics` is
 * how the lag is seen.
 */
const NEVER_SHED: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * Seconds a shed client is told to wait: the delay is measured about once a second, so a lag that
 * has ended is seen within that, plus a margin so retries do not arrive as the backlog clears.
 */
export const OVERLOAD_RETRY_AFTER_S = 2;

/**
 * Whether `delayMs` (under-pressure's measure) means shedding. A sample in which the loop never
 * turned has no mean and reads as Infinity: that is a server starting up (compiling every route's
 * validators holds the loop for about a second), not a backlog, and it is not counted; a block that
 * long under load is measured by the next sample a second later, which has it.
 */
function overloaded(delayMs: number, maxMs: number): boolean {
  return maxMs > 0 && Number.isFinite(delayMs) && delayMs > maxMs;
}

/** Whether requests to the route `url` (as declared, e.g. `/sessions/:sessionId`) may be shed. */
export function isShed(url: string | undefined): boolean {
  return url === undefined || !NEVER_SHED.has(url);
}

/**
 * Load shedding (CONTRACT §16) with `@fastify/under-pressure`: when the event loop's mean delay over
 * the last sample (about 1 s) passes `maxEventLoopDelayMs`, every new HTTP request but those above is
 * answered at once with 503 `overloaded` and `Retry-After`, before authentication or any other work,
 * instead of queueing behind the backlog. A WebSocket upgrade is an HTTP request: refused the same way
 * (the device SDK reconnects with backoff). Open sockets are not touched: their frames and pings are not
 * requests. 0 turns shedding off; the delay is still measured (`liveline_event_loop_delay_seconds`).
 */
export const loadSheddingPlugin = fp(
  async (app: FastifyInstance, options: { maxEventLoopDelayMs: number; metrics: Metrics }) => {
    await app.register(underPressure, {
      maxEventLoopDelay: options.maxEventLoopDelayMs,
      // Runs in an onRequest hook: a rejection goes to the error handler (the problem document), and
      // a request to a route that is never shed goes on.
      pressureHandler: async (request, _reply, _type, value) => {
        if (!isShed(request.routeOptions.url) || !overloaded(value ?? 0, options.maxEventLoopDelayMs)) return;
        options.metrics.load.shed();
        throw problems.overloaded(value ?? 0, OVERLOAD_RETRY_AFTER_S);
      },
    });
    options.metrics.load.delayFrom(() => {
      const delay = app.memoryUsage().eventLoopDelay;
      return Number.isFinite(delay) ? delay : 0;
    });
    app.decorate('overloaded', () =>
      overloaded(app.memoryUsage().eventLoopDelay, options.maxEventLoopDelayMs),
    );
  },
  { name: 'liveline-load-shedding' },
);

/** The answer of `/readyz` while the process sheds load; null when it does not. */
export function overloadOf(app: FastifyInstance) {
  return app.overloaded()
    ? problems.overloaded(app.memoryUsage().eventLoopDelay, OVERLOAD_RETRY_AFTER_S)
    : null;
}
