import type { Logger } from 'pino';
import type { Clock } from '../../clock.ts';
import type { WebhookConfig } from '../../config.ts';
import type { Job } from '../../jobs.ts';
import type { Storage } from '../../storage/index.ts';
import * as store from './store.ts';

/** How often finished deliveries past retention are looked for. */
export const PURGE_EVERY_MS = 10 * 60 * 1000;
/** Rows deleted per statement, so a large purge never holds the (SQLite) writer for long. */
const PURGE_BATCH = 5000;

/**
 * Retention: finished deliveries (and their attempts) older than `retentionDays` are deleted, in
 * small batches. Replay therefore reaches back that far.
 */
export function retentionJob(
  storage: Storage,
  clock: Clock,
  config: Pick<WebhookConfig, 'retentionDays'>,
  logger: Logger,
): Job {
  return {
    name: 'webhooks.retention',
    everyMs: PURGE_EVERY_MS,
    runAtStart: true,
    async run() {
      const before = store.uuidv7Floor(clock.now() - config.retentionDays * 86400_000);
      let purged = 0;
      for (let n = PURGE_BATCH; n === PURGE_BATCH; ) {
        n = await store.purgeFinished(storage.db, before, PURGE_BATCH);
        purged += n;
      }
      if (purged > 0) logger.info({ purged }, 'old webhook deliveries deleted');
      return purged;
    },
  };
}
