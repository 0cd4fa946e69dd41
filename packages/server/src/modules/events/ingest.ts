import type { Kysely } from 'kysely';
import { Batcher } from '../../batcher.ts';
import type { Metrics } from '../../http/metrics.ts';
import type { Database, Storage } from '../../storage/index.ts';
import type { EventsTable } from '../../storage/schema.ts';
import type { BulkTable } from '../../storage/storage.ts';

/**
 * One event as it is stored. `body` is the JSON clients get back; `fields` (in memory only, never a
 * column) are its validated own fields, for `onStored` hooks that read them without parsing `body`.
 */
export type EventRow = EventsTable & { fields?: Readonly<Record<string, unknown>> };

export interface IngestResult {
  accepted: number;
  duplicates: number;
}

/** The session of a stored event, as work in the ingestion transaction needs it. */
export interface StoredSession {
  tenantId: string;
  tenantCohortId: string | null;
}

/** What one group-commit transaction wrote, for work that must share its transaction. */
export interface StoredGroup {
  inserted: EventRow[];
  /** Tenant and cohort of every session in `inserted`. */
  sessions: Map<string, StoredSession>;
  /** Sessions a device contacted, with the latest contact time, in session id order. */
  contacts: Map<string, number>;
}

type InTransaction = (trx: Kysely<Database>, group: StoredGroup) => Promise<void>;

/** Work to run once the transaction that stored a batch has committed (e.g. announcing a session's end). */
export type AfterCommit = () => Promise<void>;

/**
 * What a device's `SessionEnd` does, in the transaction that stores it (the session ends with it, or
 * neither is written); may return work for after the commit.
 */
export type SessionEndHandler = (
  trx: Kysely<Database>,
  session: StoredSession & { sessionId: string },
  reason: string,
) => Promise<AfterCommit | undefined>;

export interface WriteJob {
  rows: EventRow[];
  session: StoredSession & { sessionId: string };
  touch: { sessionId: string; at: number } | null;
  /** A device batch holding a `SessionEnd`: the reason the session ends with. */
  endsSession?: string | null;
}

/** A job's outcome: counts, and what must run after its transaction committed. */
export interface WriteResult extends IngestResult {
  afterCommit: AfterCommit[];
}

/** The events table as the bulk inserter writes it (columns in order, the key that conflicts). */
export const EVENTS_TABLE: BulkTable<'events'> = {
  table: 'events',
  columns: [
    { name: 'session_id', type: 'text' },
    { name: 'event_id', type: 'text' },
    { name: 'event_type', type: 'text' },
    { name: 'timestamp', type: 'bigint' },
    { name: 'streaming_session_id', type: 'text' },
    { name: 'received_at', type: 'bigint' },
    { name: 'body', type: 'text' },
  ],
  conflict: ['session_id', 'event_id'],
};
/** Upper bound of rows one group-commit transaction takes, so a burst cannot build a giant transaction. */
const MAX_ROWS_PER_FLUSH = 20_000;

/**
 * Group commit: concurrent ingestion requests share one transaction. While a transaction is being
 * written, new batches queue up; the next transaction takes all of them (one writer on SQLite,
 * several on PostgreSQL, where commits wait on the server). Each batch's promise resolves only after
 * its transaction committed, so a 200 always means durable. Duplicate ids (already stored, or
 * repeated within the group) are skipped and counted. A failed group is retried batch by batch.
 */
export class EventWriter {
  private readonly hooks: InTransaction[] = [];
  private readonly sessionEndHandlers: SessionEndHandler[] = [];
  private readonly queue: Batcher<WriteJob, WriteResult>;

  constructor(
    private readonly storage: Storage,
    private readonly metrics: Metrics,
  ) {
    this.queue = new Batcher((jobs) => this.writeGroup(jobs), {
      name: 'events group commit',
      weight: (job) => job.rows.length,
      maxWeight: MAX_ROWS_PER_FLUSH,
      concurrency: storage.writeConcurrency,
      retryAlone: true,
    });
  }

  /** Registers work to run in every ingestion transaction (e.g. the webhook outbox). */
  addHook(hook: InTransaction) {
    this.hooks.push(hook);
  }

  /** Registers what a device's `SessionEnd` does inside its ingestion transaction. */
  addSessionEndHandler(handler: SessionEndHandler) {
    this.sessionEndHandlers.push(handler);
  }

  /** How busy the group commit has been lately, 0 to 1 (`Batcher.utilization`). */
  utilization(): number {
    return this.queue.utilization();
  }

  /** Group-committed: resolves once the job's transaction committed (its `afterCommit` not yet run). */
  write(job: WriteJob): Promise<WriteResult> {
    return this.queue.submit(job);
  }

  private async writeGroup(jobs: WriteJob[]): Promise<WriteResult[]> {
    const results = await this.storage.db.transaction().execute((trx) => this.writeIn(trx, jobs));
    this.metrics.ingestFlushSize.observe(results.reduce((n, r) => n + r.accepted, 0));
    return results;
  }

  /**
   * The one way events are written: rows (duplicates skipped), then every hook (lastSeenAt, the
   * webhook outbox), then what a device's `SessionEnd` does, all in the caller's transaction `trx`.
   * Group commit calls it with a group's transaction; a server-emitted event with the transaction of
   * the state change it reports, so the event, its outbox rows and the change commit together.
   */
  async writeIn(trx: Kysely<Database>, jobs: WriteJob[]): Promise<WriteResult[]> {
    // First occurrence of (session, id) in the group wins; later ones are duplicates.
    const entries: { row: EventRow; job: number }[] = [];
    const seen = new Set<string>();
    for (const [j, job] of jobs.entries()) {
      for (const row of job.rows) {
        const key = `${row.session_id}\u0000${row.event_id}`;
        if (seen.has(key)) continue;
        seen.add(key);
        entries.push({ row, job: j });
      }
    }
    // Parallel transactions take row locks in one global order (by key), so they cannot deadlock.
    entries.sort((a, b) => compareKeys(a.row, b.row));
    const values = entries.map(({ row: r }) => [
      r.session_id,
      r.event_id,
      r.event_type,
      r.timestamp,
      r.streaming_session_id,
      r.received_at,
      r.body,
    ]);
    const accepted = new Array<number>(jobs.length).fill(0);
    const afterCommit = jobs.map((): AfterCommit[] => []);
    const inserted =
      values.length === 0 ? [] : await this.storage.bulk.insertIgnoringConflicts(trx, EVENTS_TABLE, values);
    const insertedRows: EventRow[] = [];
    for (let i = 0; i < entries.length; i++) {
      if (inserted[i]) {
        accepted[entries[i].job]++;
        insertedRows.push(entries[i].row);
      }
    }
    const sessions = new Map(
      jobs.map(({ session }) => [
        session.sessionId,
        { tenantId: session.tenantId, tenantCohortId: session.tenantCohortId },
      ]),
    );
    const group = { inserted: insertedRows, sessions, contacts: latestContacts(jobs) };
    for (const hook of this.hooks) await hook(trx, group);
    // Sessions end in id order (row locks in one order, as for contact); each once per group.
    const ending = jobs
      .map((job, j) => ({ job, j }))
      .filter(({ job }) => typeof job.endsSession === 'string')
      .sort((a, b) => compareIds(a.job.session.sessionId, b.job.session.sessionId));
    const ended = new Set<string>();
    for (const { job, j } of ending) {
      if (ended.has(job.session.sessionId)) continue;
      ended.add(job.session.sessionId);
      for (const handler of this.sessionEndHandlers) {
        const after = await handler(trx, job.session, job.endsSession as string);
        if (after) afterCommit[j].push(after);
      }
    }
    return jobs.map((job, j) => ({
      accepted: accepted[j],
      duplicates: job.rows.length - accepted[j],
      afterCommit: afterCommit[j],
    }));
  }
}

const compareIds = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function compareKeys(a: EventRow, b: EventRow) {
  if (a.session_id !== b.session_id) return a.session_id < b.session_id ? -1 : 1;
  return a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0;
}

function latestContacts(jobs: WriteJob[]) {
  const latest = new Map<string, number>();
  for (const job of jobs) {
    if (job.touch && (latest.get(job.touch.sessionId) ?? 0) < job.touch.at)
      latest.set(job.touch.sessionId, job.touch.at);
  }
  // Sorted, so parallel transactions update session rows in one order.
  return new Map([...latest].sort(([a], [b]) => compareIds(a, b)));
}
