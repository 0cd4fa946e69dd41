import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** One registry per server instance (tests run several in one process). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'liveline_' });
  const tailReaders = new Gauge({
    name: 'liveline_tail_readers',
    help: 'Live tail (SSE) readers connected to this process.',
    registers: [registry],
  });
  const tailCutOff = new Counter({
    name: 'liveline_tail_cut_off_total',
    help: 'Live tail readers disconnected for leaving too much unread.',
    registers: [registry],
  });
  let tailBufferedNow = () => 0;
  new Gauge({
    name: 'liveline_tail_buffered_bytes',
    help: 'Bytes written to live tail readers and not yet taken by their sockets.',
    registers: [registry],
    collect() {
      this.set(tailBufferedNow());
    },
  });
  const overloaded = new Counter({
    name: 'liveline_overloaded_total',
    help: 'HTTP requests refused with 503 overloaded (load shedding: the event loop lagged).',
    registers: [registry],
  });
  let eventLoopDelayNow = () => 0;
  new Gauge({
    name: 'liveline_event_loop_delay_seconds',
    help:
      'Mean event-loop delay over the last sample (about 1 s): what load shedding compares with ' +
      'LIVELINE_MAX_EVENT_LOOP_DELAY_MS.',
    registers: [registry],
    collect() {
      this.set(eventLoopDelayNow() / 1000);
    },
  });
  return {
    load: {
      shed: () => overloaded.inc(),
      /** The delay load shedding measures, in milliseconds (read when scraped). */
      delayFrom: (read: () => number) => {
        eventLoopDelayNow = read;
      },
    },
    tail: {
      readers: (n: number) => tailReaders.set(n),
      cutOff: () => tailCutOff.inc(),
      bufferedFrom: (read: () => number) => {
        tailBufferedNow = read;
      },
    },
    registry,
    httpDuration: new Histogram({
      name: 'liveline_http_request_duration_seconds',
      help: 'HTTP request duration by route and status.',
      labelNames: ['method', 'route', 'status'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    eventsIngested: new Counter({
      name: 'liveline_events_ingested_total',
      help: 'Events stored, by source.',
      labelNames: ['source'] as const,
      registers: [registry],
    }),
    eventsDuplicate: new Counter({
      name: 'liveline_events_duplicate_total',
      help: 'Events not stored again because their id was already stored for the session.',
      registers: [registry],
    }),
    ingestFlushSize: new Histogram({
      name: 'liveline_ingest_group_commit_events',
      help: 'Events written per group-commit transaction.',
      buckets: [1, 10, 100, 1000, 5000, 10000, 50000],
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

export const metricsPlugin = fp(
  async (app: FastifyInstance, { metrics }: { metrics: Metrics }) => {
    // Callback-style hooks cost no promise per request.
    app.addHook('onResponse', (request, reply, done) => {
      metrics.httpDuration.observe(
        {
          method: request.method,
          route: request.routeOptions.url ?? 'unmatched',
          status: String(reply.statusCode),
        },
        reply.elapsedTime / 1000,
      );
      done();
    });
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      reply.type(metrics.registry.contentType);
      return metrics.registry.metrics();
    });
  },
  { name: 'liveline-metrics' },
);
