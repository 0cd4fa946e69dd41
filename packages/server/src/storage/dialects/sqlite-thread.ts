import { Worker } from 'node:worker_threads';
import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type QueryCompiler,
  type QueryResult,
  SelectQueryNode,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from 'kysely';
import type { CompiledStatement } from '../storage.ts';
import BetterSqlite3 from './better-sqlite3.js';
import type { WorkerError, WorkerOptions, WorkerReply, WorkerRequest } from './sqlite-protocol.ts';

/** A better-sqlite3 error that crossed from the worker: same name, message and `code`. */
export class SqliteThreadError extends Error {
  readonly code: string | undefined;
  constructor(error: WorkerError) {
    super(error.message);
    this.name = error.name;
    this.code = error.code;
  }
}

const CLOSED = 'the SQLite store is closed';

type Ok = Extract<WorkerReply, { ok: true }>;
type Request = WorkerRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

interface Pending {
  resolve: (reply: Ok) => void;
  reject: (err: Error) => void;
}

/**
 * The worker thread that owns the read-write connection (`sqlite-worker.js`), and the requests in
 * flight to it. The worker answers in order; each reply settles its request by id. The thread is
 * referenced (keeps the process alive) only while a request is in flight, so a forgotten store does
 * not hold the process open, and a pending query is never cut short by the process exiting.
 */
export class SqliteThread {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: Error | null = null;
  private closing: Promise<void> | null = null;
  private readonly exited: Promise<void>;
  private running = true;

  private constructor(private readonly worker: Worker) {
    worker.unref();
    worker.on('message', (reply: WorkerReply) => this.settle(reply));
    worker.on('error', (err) => this.fail(err));
    this.exited = new Promise((resolve) => {
      worker.once('exit', (code) => {
        this.running = false;
        // After close() the thread's end may be seen before close()'s own reply is.
        this.fail(new Error(this.closing ? CLOSED : `the SQLite worker thread exited (code ${code})`));
        resolve();
      });
    });
  }

  /** Starts the thread and opens the database in it; rejects (thread ended) when that fails. */
  static async start(options: WorkerOptions): Promise<SqliteThread> {
    // No inherited `--import tsx` (or other loader flags): the worker is plain JavaScript, and a
    // loader would cost every start hundreds of milliseconds.
    const worker = new Worker(new URL('./sqlite-worker.js', import.meta.url), {
      workerData: options,
      execArgv: [],
    });
    const thread = new SqliteThread(worker);
    try {
      await thread.request({ op: 'open' });
    } catch (err) {
      await thread.terminate();
      throw err;
    }
    return thread;
  }

  /** Whether the thread is still running (false once it has ended). */
  get alive(): boolean {
    return this.running;
  }

  request(message: Request, transfer: ArrayBuffer[] = []): Promise<Ok> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise<Ok>((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      try {
        this.worker.postMessage({ ...message, id }, transfer);
      } catch (err) {
        // A parameter that cannot cross threads (a function, a symbol): this request alone fails.
        this.pending.delete(id);
        if (this.pending.size === 0) this.worker.unref();
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Runs one compiled query in the worker; `begin`: open a transaction first. */
  async execute<R>(query: CompiledQuery, begin = false): Promise<QueryResult<R>> {
    const bulk = bulkRequests.get(query);
    if (bulk) {
      const reply = await this.request({
        op: 'bulk',
        sql: bulk.sql,
        values: bulk.values,
        width: bulk.width,
        begin,
      });
      return { rows: [{ inserted: reply.inserted ?? new Uint8Array(0) } as R] };
    }
    const reply = await this.request({ op: 'query', sql: query.sql, params: query.parameters, begin });
    if (reply.rows) return { rows: reply.rows as R[] };
    return {
      rows: [],
      numAffectedRows: BigInt(reply.changes ?? 0),
      insertId: reply.lastInsertRowid === undefined ? undefined : BigInt(reply.lastInsertRowid),
    };
  }

  /**
   * Commits the worker's transaction. The request is posted before this returns (the caller may
   * hand the connection on at once: whatever it sends next runs after the COMMIT); the promise
   * settles when the COMMIT is done, fsync included.
   */
  commit(): Promise<Ok> {
    return this.request({ op: 'commit' });
  }

  /**
   * Closes the database in the worker (after every request sent before) and waits for the thread
   * to end. Idempotent; later requests are rejected.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (!this.failure) {
        try {
          await this.request({ op: 'close' });
        } catch {
          // The thread failed or was already closing: it is ended below either way.
        }
      }
      this.fail(new Error(CLOSED));
      const timer = setTimeout(() => void this.worker.terminate(), 10_000);
      await this.exited;
      clearTimeout(timer);
    })();
    return this.closing;
  }

  private async terminate() {
    this.fail(new Error(CLOSED));
    await this.worker.terminate();
    await this.exited;
  }

  private settle(reply: WorkerReply) {
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker.unref();
    if (reply.ok) pending.resolve(reply);
    else pending.reject(new SqliteThreadError(reply.error));
  }

  /** Every request in flight, and every later one, fails with `err`. */
  private fail(err: Error) {
    this.failure ??= err;
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
    this.worker.unref();
  }
}

/**
 * Bulk inserts travel through Kysely as a compiled query (so they run on the connection of the
 * transaction that issued them, in order) that the connection recognises here and sends as one
 * `bulk` message: the whole batch of rows, one cached prepared statement run per row in the worker.
 */
const bulkRequests = new WeakMap<CompiledQuery, { sql: string; values: unknown[]; width: number }>();

export function registerBulk(query: CompiledQuery, sql: string, rows: readonly (readonly unknown[])[]) {
  const width = rows.length === 0 ? 0 : rows[0].length;
  const values = new Array<unknown>(rows.length * width);
  let k = 0;
  for (const row of rows) {
    if (row.length !== width) throw new Error('bulk insert: rows of different widths');
    for (let j = 0; j < width; j++) values[k++] = row[j];
  }
  bulkRequests.set(query, { sql, values, width });
}

/**
 * A read-only connection on the main thread, for selects outside transactions (WAL lets it read
 * while the worker writes): reads then never queue behind a write transaction. A point read costs
 * the event loop far less than the round trip to the worker; see the storage README's measurements.
 */
export class MainThreadReader {
  private readonly db: BetterSqlite3.Database;
  private readonly statements = new Map<string, BetterSqlite3.Statement>();

  constructor(file: string) {
    this.db = new BetterSqlite3(file, { readonly: true, fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
  }

  execute<R>(query: CompiledQuery): QueryResult<R> {
    let stmt = this.statements.get(query.sql);
    if (!stmt) {
      stmt = this.db.prepare(query.sql);
      if (this.statements.size >= 200) this.statements.clear();
      this.statements.set(query.sql, stmt);
    }
    return { rows: stmt.all(query.parameters) as R[] };
  }

  close() {
    this.statements.clear();
    if (this.db.open) this.db.close();
  }
}

/** First come, first served: whoever holds it has the worker's connection to itself. */
class Mutex {
  private locked = false;
  private readonly waiters: (() => void)[] = [];

  lock(): Promise<void> {
    if (!this.locked) {
      this.locked = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  unlock() {
    const next = this.waiters.shift();
    if (next) next();
    else this.locked = false;
  }
}

/**
 * One use of the worker's single connection, from `acquireConnection` to `releaseConnection`.
 * It takes the connection mutex before its first query goes to the worker (at once, unless a
 * main-thread reader serves selects) and keeps it until released: a transaction's queries, from
 * BEGIN to COMMIT, run on the worker's connection in order with nothing else in between.
 */
class ThreadConnection implements DatabaseConnection {
  held = false;
  /**
   * A transaction was begun and nothing sent yet: BEGIN travels with the first statement (one
   * round trip to the worker fewer per transaction); a transaction that sent nothing ends in place.
   */
  private beginPending = false;
  /** COMMIT was posted: the connection has been handed on. */
  private committing = false;
  /** Between `begin` and COMMIT or ROLLBACK: `post` may add statements. */
  private inTransaction = false;

  constructor(private readonly driver: SqliteThreadDriver) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (!this.held) {
      const reader = this.driver.reader;
      if (reader && SelectQueryNode.is(query.query)) return reader.execute<R>(query);
      await this.lock();
    }
    const begin = this.beginPending;
    this.beginPending = false;
    return this.driver.thread.execute<R>(query, begin);
  }

  async begin() {
    if (!this.held) await this.lock();
    this.beginPending = true;
    this.committing = false;
    this.inTransaction = true;
  }

  /**
   * Posts a statement of this transaction without waiting for its answer (`Storage.pipeline`): it
   * runs in the worker after those sent before it and before those sent after, COMMIT included; if it
   * fails, the worker refuses the transaction's later statements and fails its COMMIT with that error
   * (after a rollback), so the transaction writes nothing. Its own answer is not awaited by anyone.
   */
  post(query: CompiledStatement) {
    if (!this.held || !this.inTransaction) throw new Error('a pipelined statement needs a transaction');
    const begin = this.beginPending;
    this.beginPending = false;
    this.driver.thread
      .request({ op: 'query', sql: query.sql, params: query.parameters, begin, pipelined: true })
      .catch(() => {}); // reported by the transaction's COMMIT
  }

  /**
   * COMMIT, pipelined: the connection goes to the next waiting user as soon as COMMIT is posted, so
   * the next transaction's first statement is already queued in the worker while this COMMIT's
   * fsync runs. This transaction's promise still settles only when its COMMIT is done. A failed
   * COMMIT is rolled back in the worker itself, before anything queued behind it runs.
   */
  async commit() {
    this.inTransaction = false;
    if (this.beginPending) {
      this.beginPending = false;
      return;
    }
    if (!this.held) await this.lock();
    const done = this.driver.thread.commit();
    this.committing = true;
    this.release();
    await done;
  }

  async rollback() {
    this.inTransaction = false;
    // Never begun in the worker, or already rolled back there after a failed COMMIT (and the
    // connection may belong to another transaction by now).
    if (this.beginPending || this.committing) {
      this.beginPending = false;
      return;
    }
    await this.executeQuery(CompiledQuery.raw('rollback'));
  }

  release() {
    if (!this.held) return;
    this.held = false;
    if (this.driver.holder === this) this.driver.holder = null;
    this.driver.mutex.unlock();
  }

  async lock() {
    await this.driver.mutex.lock();
    this.held = true;
    this.driver.holder = this;
  }

  // biome-ignore lint/correctness/useYield: streaming is not supported (nothing in the server streams a query)
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('the SQLite worker driver does not stream; page with limit/offset or keyset instead');
  }
}

export interface SqliteThreadConfig {
  thread: SqliteThread;
  /** When set, selects outside transactions are read on the main thread. */
  reader: MainThreadReader | null;
}

class SqliteThreadDriver implements Driver {
  readonly mutex = new Mutex();
  /** The connection holding the worker's connection (the mutex), if any. */
  holder: ThreadConnection | null = null;
  readonly thread: SqliteThread;
  readonly reader: MainThreadReader | null;

  constructor(config: SqliteThreadConfig) {
    this.thread = config.thread;
    this.reader = config.reader;
  }

  async init() {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const connection = new ThreadConnection(this);
    if (!this.reader) await connection.lock();
    return connection;
  }

  async beginTransaction(connection: DatabaseConnection) {
    await threadConnection(connection).begin();
  }

  async commitTransaction(connection: DatabaseConnection) {
    await threadConnection(connection).commit();
  }

  async rollbackTransaction(connection: DatabaseConnection) {
    await threadConnection(connection).rollback();
  }

  async savepoint(connection: DatabaseConnection, name: string) {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${quoteId(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string) {
    await connection.executeQuery(CompiledQuery.raw(`rollback to ${quoteId(name)}`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string) {
    await connection.executeQuery(CompiledQuery.raw(`release ${quoteId(name)}`));
  }

  async releaseConnection(connection: DatabaseConnection) {
    threadConnection(connection).release();
  }

  /** Waits for the connection (a transaction in progress finishes), then closes reader and worker. */
  async destroy() {
    await this.mutex.lock();
    try {
      this.reader?.close();
      await this.thread.close();
    } finally {
      this.mutex.unlock();
    }
  }
}

const quoteId = (name: string) => `"${name.replaceAll('"', '""')}"`;

function threadConnection(connection: DatabaseConnection): ThreadConnection {
  if (!(connection instanceof ThreadConnection)) throw new Error('not a connection of this driver');
  return connection;
}

/** Kysely's SQLite dialect, with statements executed in the worker thread. */
export class SqliteThreadDialect implements Dialect {
  private readonly driver: SqliteThreadDriver;

  constructor(config: SqliteThreadConfig) {
    this.driver = new SqliteThreadDriver(config);
  }

  createDriver(): Driver {
    return this.driver;
  }

  /**
   * A whole transaction as one message to the worker (`Storage.atomically`). It takes the
   * connection like any transaction and hands it on as soon as the message is posted: whatever is
   * sent next runs after this COMMIT in the worker.
   */
  async atomically(
    statements: readonly CompiledStatement[],
    options: { durable?: boolean } = {},
  ): Promise<Record<string, unknown>[][]> {
    if (statements.length === 0) return [];
    await this.driver.mutex.lock();
    let reply: Promise<{ results?: Record<string, unknown>[][] }>;
    try {
      reply = this.driver.thread.request({
        op: 'atomically',
        statements: statements.map((s) => ({ sql: s.sql, params: s.parameters })),
        ...(options.durable === false ? { lazy: true } : {}),
      });
    } finally {
      this.driver.mutex.unlock();
    }
    return (await reply).results ?? [];
  }

  /**
   * `Storage.pipeline`: posts `statement` on the connection of the transaction that holds the
   * worker's connection — the caller's, which is inside it — without waiting (`ThreadConnection.post`).
   */
  pipeline(statement: CompiledStatement) {
    const holder = this.driver.holder;
    if (!holder) throw new Error('a pipelined statement needs a transaction');
    holder.post(statement);
  }

  createQueryCompiler(): QueryCompiler {
    return new SqliteQueryCompiler();
  }

  createAdapter(): DialectAdapter {
    return new SqliteAdapter();
  }

  createIntrospector(db: Parameters<Dialect['createIntrospector']>[0]): DatabaseIntrospector {
    return new SqliteIntrospector(db);
  }
}
