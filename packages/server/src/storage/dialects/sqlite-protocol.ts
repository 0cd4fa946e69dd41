// Messages between the SQLite driver (main thread, `sqlite-thread.ts`) and the worker thread
// (`sqlite-worker.js`). Requests are answered in the order sent, each reply carrying its request's id.

export interface WorkerOptions {
  /** Database file. */
  file: string;
  synchronous: 'FULL' | 'NORMAL';
  /** Prepared statements the worker keeps, by SQL text. */
  statementCacheSize: number;
}

export type WorkerRequest =
  | { id: number; op: 'open' }
  /**
   * `begin`: run BEGIN first (a transaction's BEGIN travels with its first statement). `pipelined`:
   * the sender does not wait for the answer (`Storage.pipeline`); when it fails inside a transaction,
   * that transaction's COMMIT fails with its error and rolls back.
   */
  | {
      id: number;
      op: 'query';
      sql: string;
      params: readonly unknown[];
      begin: boolean;
      pipelined?: boolean;
    }
  /**
   * One insert statement run once per row, the whole batch in one message: the rows' values back to
   * back, `width` per row (one flat array clones faster than an array per row).
   */
  | { id: number; op: 'bulk'; sql: string; values: readonly unknown[]; width: number; begin: boolean }
  /**
   * A whole transaction in one message: BEGIN, each statement, COMMIT. When any of them fails the
   * worker rolls back and answers the error; else it answers every statement's rows.
   */
  | {
      id: number;
      op: 'atomically';
      statements: readonly { sql: string; params: readonly unknown[] }[];
      /** Commit without waiting for the disk (`synchronous = NORMAL` for this one; `Storage.atomically`). */
      lazy?: boolean;
    }
  /** COMMIT; when it fails, the worker rolls the transaction back before answering. */
  | { id: number; op: 'commit' }
  | { id: number; op: 'close' };

export interface WorkerError {
  name: string;
  message: string;
  /** better-sqlite3's error code, e.g. `SQLITE_CONSTRAINT_UNIQUE`. */
  code: string | undefined;
}

export type WorkerReply =
  | {
      id: number;
      ok: true;
      /** Set for statements that return rows. */
      rows?: Record<string, unknown>[];
      changes?: number | bigint;
      lastInsertRowid?: number | bigint;
      /** For `bulk`: 1 where the row was inserted, 0 where it conflicted. */
      inserted?: Uint8Array;
      /** For `atomically`: each statement's rows (empty for one that returns none). */
      results?: Record<string, unknown>[][];
    }
  | { id: number; ok: false; error: WorkerError };
