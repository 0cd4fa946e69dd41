import type { Transaction } from 'kysely';
import type { Metrics } from '../../http/metrics.ts';
import type { Database, Storage } from '../../storage/index.ts';
import type { EventsTable } from '../../storage/schema.ts';
import type { BulkTable } from '../../storage/storage.ts';

/** One event as it is stored. `body` is the JSON clients get back. */
export type EventRow = EventsTable;

export interface IngestResult {
  accepted: number;
  duplicates: number;
}

/** What one group-commit transaction wrote, for work that must share its transaction. */
export interface StoredGroup {
  inserted: EventRow[];
  /** The tenant of every session in `inserted`. */
  tenants: Map<string, string>;
  /** Sessions a device contacted, with the latest contact time. */
  contacts: Map<string, number>;
}

/**
 * Work done inside the same transaction as the insert: the sessions module moves `lastSeenAt`,
 * the webhooks module writes its outbox rows.
 */
export type InTransaction = (trx: Transaction<Database>, group: StoredGroup) => Promise<void>;

interface Job {
  rows: EventRow[];
  tenantId: string;
  touch: { sessionId: string; at: number } | null;
  resolve(result: IngestResult): void;
  reject(err: unknown): void;
}

const EVENTS_TABLE: BulkTable<'events'> = {
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
 * written, new batches queue up; the next transaction takes all of them. Each batch's promise
 * resolves only after its transaction committed, so a 200 always means durable. Duplicate ids
 * (already stored, or repeated within the group) are skipped and counted.
 */
export class EventWriter {
  private queue: Job[] = [];
  private inFlight = 0;
  private readonly hooks: InTransaction[] = [];

  constructor(
    private readonly storage: Storage,
    private readonly metrics: Metrics,
  ) {}

  /** Registers work to run in every ingestion transaction (e.g. the webhook outbox). */
  addTransactionHook(hook: InTransaction) {
    this.hooks.push(hook);
  }

  write(tenantId: string, rows: EventRow[], touch: Job['touch'] = null): Promise<IngestResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ rows, tenantId, touch, resolve, reject });
      this.pump();
    });
  }

  /**
   * Starts a transaction with everything queued whenever a writer slot is free: one slot on
   * SQLite (a single writer), several on PostgreSQL, where commits wait on the server.
   */
  private pump() {
    while (this.inFlight < this.storage.writeConcurrency && this.queue.length > 0) {
      const jobs = this.takeGroup();
      this.inFlight++;
      void this.flush(jobs).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async flush(jobs: Job[]) {
    try {
      const results = await this.writeGroup(jobs);
      for (const [i, job] of jobs.entries()) job.resolve(results[i]);
    } catch (err) {
      // One bad batch must not fail its neighbours (nor a deadlock victim its group): retry each alone.
      if (jobs.length === 1) {
        jobs[0].reject(err);
        return;
      }
      for (const job of jobs) {
        try {
          job.resolve((await this.writeGroup([job]))[0]);
        } catch (jobErr) {
          job.reject(jobErr);
        }
      }
    }
  }

  private takeGroup(): Job[] {
    let rows = 0;
    let n = 0;
    while (n < this.queue.length && (n === 0 || rows + this.queue[n].rows.length <= MAX_ROWS_PER_FLUSH)) {
      rows += this.queue[n].rows.length;
      n++;
    }
    return this.queue.splice(0, n);
  }

  private async writeGroup(jobs: Job[]): Promise<IngestResult[]> {
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
    await this.storage.db.transaction().execute(async (trx) => {
      const inserted = await this.storage.bulk.insertIgnoringConflicts(trx, EVENTS_TABLE, values);
      const insertedRows: EventRow[] = [];
      for (let i = 0; i < entries.length; i++) {
        if (inserted[i]) {
          accepted[entries[i].job]++;
          insertedRows.push(entries[i].row);
        }
      }
      const tenants = new Map(
        jobs.flatMap((job) => job.rows.map((r) => [r.session_id, job.tenantId] as const)),
      );
      const group = { inserted: insertedRows, tenants, contacts: latestContacts(jobs) };
      for (const hook of this.hooks) await hook(trx, group);
    });
    this.metrics.ingestFlushSize.observe(insertedRows(accepted));
    return jobs.map((job, j) => ({ accepted: accepted[j], duplicates: job.rows.length - accepted[j] }));
  }
}

const insertedRows = (accepted: number[]) => accepted.reduce((a, b) => a + b, 0);

function compareKeys(a: EventRow, b: EventRow) {
  if (a.session_id !== b.session_id) return a.session_id < b.session_id ? -1 : 1;
  return a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0;
}

function latestContacts(jobs: Job[]) {
  const latest = new Map<string, number>();
  for (const job of jobs) {
    if (job.touch && (latest.get(job.touch.sessionId) ?? 0) < job.touch.at)
      latest.set(job.touch.sessionId, job.touch.at);
  }
  // Sorted, so parallel transactions update session rows in one order.
  return new Map([...latest].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
