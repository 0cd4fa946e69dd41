import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The webhook metrics, on the server's registry. */
export function createWebhookMetrics(
  registry: Registry,
  outboxStats: () => Promise<{ depth: number; oldestCreatedAt: number | null }>,
  now: () => number,
) {
  let stats: Promise<{ depth: number; oldestCreatedAt: number | null }> | null = null;
  // Both gauges come from one query per scrape.
  const read = () => {
    stats ??= outboxStats().finally(() => {
      setImmediate(() => {
        stats = null;
      });
    });
    return stats;
  };
  return {
    deliveries: new Counter({
      name: 'liveline_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome: delivered (2xx), retrying (failed, retry scheduled), failed (failed, no retry left).',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    attemptDuration: new Histogram({
      name: 'liveline_webhook_attempt_duration_seconds',
      help: 'Time from sending a webhook to its answer (or to the error), by result.',
      labelNames: ['result'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    endpointsDisabled: new Counter({
      name: 'liveline_webhook_endpoints_disabled_total',
      help: 'Webhook endpoints disabled, by reason: failing (by the server, after nothing but failures) or manual (by the tenant or the operator).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    endpointsRecovered: new Counter({
      name: 'liveline_webhook_endpoints_recovered_total',
      help: 'Webhook endpoints that answered 2xx again after an outage (a failed retry, or disabled for failing).',
      registers: [registry],
    }),
    outboxDepth: new Gauge({
      name: 'liveline_webhook_outbox_depth',
      help: 'Webhook deliveries waiting to be delivered (pending, including those waiting for a retry).',
      registers: [registry],
      async collect() {
        try {
          this.set((await read()).depth);
        } catch {
          // Storage unreachable: the gauge keeps its last value; /readyz reports the outage.
        }
      },
    }),
    outboxOldestAge: new Gauge({
      name: 'liveline_webhook_outbox_oldest_pending_age_seconds',
      help: 'Age of the oldest pending webhook delivery (0 when none is pending).',
      registers: [registry],
      async collect() {
        try {
          const { oldestCreatedAt } = await read();
          this.set(oldestCreatedAt === null ? 0 : Math.max(0, (now() - oldestCreatedAt) / 1000));
        } catch {
          // As above.
        }
      },
    }),
  };
}

export type WebhookMetrics = ReturnType<typeof createWebhookMetrics>;
