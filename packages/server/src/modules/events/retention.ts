import { setImmediate as yieldToIo } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import type { Clock } from '../../clock.ts';
import type { Job } from '../../jobs.ts';
import type { Database, Storage } from '../../storage/index.ts';

/** How often the sweep runs. */
export const EVENT_SWEEP_EVERY_MS = 10 * 60 * 1000;
/** Events deleted per statement: a sweep never holds SQLite's one writer (or PostgreSQL row locks) for long. */
export const EVENT_SWEEP_BATCH = 1000;
/** Sessions read per candidate page. */
const SESSION_PAGE = 200;
/** Tenants read per page. */
const TENANT_PAGE = 500;
/** A sweep that deleted at least this many rows is followed by SQLite's checkpoint (and incremental vacuum). */
export const COMPACT_AFTER_ROWS = 10_000;
/** Pages one incremental vacuum frees at most (4 KiB pages: 40 MiB), so it stays a short write. */
const INCREMENTAL_VACUUM_PAGES = 10_000;

const DAY_MS = 86_400_000;

/** A tenant's retention: days, or null for the server's default. */
export interface RetentionSetting {
  tenantId: string;
  eventRetentionDays: number | null;
}

/** Where the sweep reads each tenant's retention, page by page in tenant id order (the auth service). */
export interface RetentionDirectory {
  tenantRetentions(afterTenantId: string | null, limit: number): Promise<RetentionSetting[]>;
}

/** A session as the sweep sees it. */
export interface SweptSession {
  session_id: string;
  started_at: number;
  ended_at: number | null;
}

/**
 * What the sweep needs of the sessions module (passed in by the composition: the events module does
 * not read or delete another module's rows): a tenant's sessions in start order, and a session's
 * deletion with everything every module keeps of it, which `keeps` can refuse in its transaction.
 */
export interface RetentionSessions {
  startOrderPage(
    tenantId: string,
    range: { before: number },
    after: { startedAt: number; sessionId: string } | null,
    limit: number,
  ): Promise<SweptSession[]>;
  remove(sessionId: string, keeps: (trx: Kysely<Database>) => Promise<boolean>): Promise<boolean>;
}

/**
 * Work before a batch of a session's events is deleted (the screenshots module deletes their
 * images): registered by the wiring; a hook that throws stops the batch, which the next sweep retries.
 */
export type RetentionHook = (sessionId: string, eventIds: string[]) => Promise<void>;

export interface SweepResult {
  /** Events deleted. */
  events: number;
  /** Sessions deleted (ended before their tenant's cutoff, no events left), with their commands and stream state. */
  sessions: number;
  /** DELETE statements on `events`, each at most `batchSize` rows. */
  batches: number;
  /** Whether the SQLite checkpoint ran after the sweep. */
  compacted: boolean;
}

export interface EventRetentionOptions {
  /** The server's default (LIVELINE_EVENT_RETENTION_DAYS); 0: forever. */
  defaultDays: number;
  batchSize?: number;
}

/** The days a tenant's events are kept: its own setting, else the default; 0 is forever. */
export function effectiveDays(setting: number | null, defaultDays: number): number {
  return setting ?? defaultDays;
}

/**
 * Event retention (issue 12): events the server **received** more than the tenant's retention ago are
 * deleted, page by page. Received time, not the event's own `timestamp`: a device's clock can be
 * anything up to 24 h ahead and any age behind, and an event must not vanish the moment it arrives
 * because its device said it happened last year.
 *
 * Per tenant with a retention (cutoff = now − days): its sessions started before the cutoff (no later
 * session can hold an event received before it) are read in `(started_at, session_id)` order through
 * `sessions_tenant_started` (migration 010), from the sessions module (`RetentionSessions`); each one's events received before the cutoff are deleted
 * through the primary key, `batchSize` at a time in `event_id` order (a keyset, so a long session's
 * surviving events are read once per sweep, not once per batch), yielding to I/O between batches.
 * A session that ended before the cutoff and has no event left is deleted through the sessions
 * module's `remove` (its commands, their kept answers and its stream state go in the same
 * transaction, by those modules' hooks); its `stream_intervals` stay (challenge progress counts them).
 */
export class EventRetention {
  private readonly deleted: Counter<'kind'>;
  private readonly batchSize: number;
  private readonly deleting: RetentionHook[] = [];

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly tenants: RetentionDirectory,
    private readonly sessions: RetentionSessions,
    private readonly options: EventRetentionOptions,
    registry: Registry,
  ) {
    this.batchSize = options.batchSize ?? EVENT_SWEEP_BATCH;
    this.deleted = new Counter({
      name: 'liveline_retention_deleted_total',
      help: 'Rows deleted by the event retention sweep: events, and ended sessions with no events left.',
      labelNames: ['kind'],
      registers: [registry],
    });
  }

  /** Adds work before each batch of events is deleted. */
  onDeleting(hook: RetentionHook) {
    this.deleting.push(hook);
  }

  /** One sweep over every tenant. */
  async sweep(): Promise<SweepResult> {
    const result: SweepResult = { events: 0, sessions: 0, batches: 0, compacted: false };
    const now = this.clock.now();
    let after: string | null = null;
    for (;;) {
      const page = await this.tenants.tenantRetentions(after, TENANT_PAGE);
      for (const tenant of page) {
        const days = effectiveDays(tenant.eventRetentionDays, this.options.defaultDays);
        if (days > 0) await this.sweepTenant(tenant.tenantId, now - days * DAY_MS, result);
      }
      if (page.length < TENANT_PAGE) break;
      after = page[page.length - 1].tenantId;
    }
    if (result.events + result.sessions >= COMPACT_AFTER_ROWS) result.compacted = await this.compact();
    return result;
  }

  /** One tenant: its sessions started before `cutoff`, page by page. */
  async sweepTenant(tenantId: string, cutoff: number, result: SweepResult): Promise<void> {
    let after: { startedAt: number; sessionId: string } | null = null;
    for (;;) {
      const sessions = await this.sessions.startOrderPage(tenantId, { before: cutoff }, after, SESSION_PAGE);
      for (const s of sessions) {
        const gone = await this.sweepSession(s.session_id, cutoff, result);
        if (gone && s.ended_at !== null && Number(s.ended_at) < cutoff) {
          // Deleted with its commands and stream state, unless an event arrived meanwhile.
          if (await this.sessions.remove(s.session_id, (trx) => hasEvents(trx, s.session_id))) {
            result.sessions++;
            this.deleted.inc({ kind: 'session' });
          }
        }
      }
      if (sessions.length < SESSION_PAGE) return;
      const last = sessions[sessions.length - 1];
      after = { startedAt: Number(last.started_at), sessionId: last.session_id };
    }
  }

  /** Deletes one session's events received before `cutoff`, in batches; true when none of its events is left. */
  private async sweepSession(sessionId: string, cutoff: number, result: SweepResult): Promise<boolean> {
    const db = this.storage.db;
    let afterId = '';
    for (;;) {
      const ids = await expiredEventIds(db, sessionId, cutoff, afterId, this.batchSize);
      if (ids.length > 0) {
        for (const hook of this.deleting) await hook(sessionId, ids);
        await db
          .deleteFrom('events')
          .where('session_id', '=', sessionId)
          .where('event_id', 'in', ids)
          .execute();
        result.events += ids.length;
        result.batches++;
        this.deleted.inc({ kind: 'event' }, ids.length);
        // Ingestion's group commits get the writer between batches.
        await yieldToIo();
      }
      if (ids.length < this.batchSize) break;
      afterId = ids[ids.length - 1];
    }
    return !(await hasEvents(db, sessionId));
  }

  /**
   * After a large sweep on SQLite: `wal_checkpoint(TRUNCATE)` copies the deletions into the database
   * file and truncates the WAL (which a sweep of many batches grows), and on a store created with
   * `auto_vacuum = INCREMENTAL` an `incremental_vacuum` returns up to 10,000 free pages to the file
   * system. Without it (the default) freed pages are reused by later inserts: the file stops growing
   * but does not shrink (docs/operations.md, Retention). PostgreSQL: nothing — autovacuum reclaims
   * the dead rows the batches leave.
   */
  private async compact(): Promise<boolean> {
    if (this.storage.dialect !== 'sqlite') return false;
    const db = this.storage.db;
    const mode = await sql<{ auto_vacuum: number }>`pragma auto_vacuum`.execute(db);
    if (Number(mode.rows[0]?.auto_vacuum) === 2)
      await sql.raw(`pragma incremental_vacuum(${INCREMENTAL_VACUUM_PAGES})`).execute(db);
    await sql`pragma wal_checkpoint(TRUNCATE)`.execute(db);
    return true;
  }
}

/** The query of `expiredEventIds`: a range of the primary key `(session_id, event_id)`. */
export function expiredEventIdsQuery(
  db: Kysely<Database>,
  sessionId: string,
  cutoff: number,
  afterId: string,
  limit: number,
) {
  return db
    .selectFrom('events')
    .select('event_id')
    .where('session_id', '=', sessionId)
    .where('event_id', '>', afterId)
    .where('received_at', '<', cutoff)
    .orderBy('event_id')
    .limit(limit);
}

/** Up to `limit` ids of a session's events received before `cutoff`, in id order after `afterId`. */
export async function expiredEventIds(
  db: Kysely<Database>,
  sessionId: string,
  cutoff: number,
  afterId: string,
  limit: number,
): Promise<string[]> {
  const rows = await expiredEventIdsQuery(db, sessionId, cutoff, afterId, limit).execute();
  return rows.map((r) => r.event_id);
}

/** Whether a session has an event left. */
async function hasEvents(db: Kysely<Database>, sessionId: string): Promise<boolean> {
  const event = await db
    .selectFrom('events')
    .select('event_id')
    .where('session_id', '=', sessionId)
    .limit(1)
    .executeTakeFirst();
  return event !== undefined;
}

/** The sweep as a job (`jobs.ts`): every 10 minutes, and once at start. */
export function eventRetentionJob(retention: EventRetention, logger: Logger): Job {
  return {
    name: 'events.retention',
    everyMs: EVENT_SWEEP_EVERY_MS,
    runAtStart: true,
    async run() {
      const result = await retention.sweep();
      if (result.events + result.sessions > 0) logger.info(result, 'events past retention deleted');
      return result;
    },
  };
}
