// The SQLite worker thread: owns the one better-sqlite3 read-write connection, so that statement
// execution and every commit's fsync happen here, never on the event loop serving HTTP and sockets.
// Plain JavaScript on purpose: a worker thread starts a fresh module loader, and Node 20 cannot load
// TypeScript there without a loader registered again in the thread (the `liveline` bin registers tsx
// programmatically, vitest transforms in its own loader). Keep this file small; the message shapes
// are declared in `sqlite-protocol.ts` and the driver (`sqlite-thread.ts`) is the only sender.
import { parentPort, workerData } from 'node:worker_threads';
import { openWriter } from './better-sqlite3.js';

if (!parentPort) throw new Error('sqlite-worker.js must run in a worker thread');
const port = parentPort;

/** @type {{ file: string, synchronous: 'FULL' | 'NORMAL', statementCacheSize: number }} */
const options = workerData;
/** @type {import('better-sqlite3').Database | null} */
let db = null;
/** @type {Map<string, import('better-sqlite3').Statement>} */
const statements = new Map();
/**
 * The error of a pipelined statement (one whose sender did not wait for its answer) that failed in
 * the open transaction: that transaction's COMMIT fails with it, after a rollback.
 * @type {unknown}
 */
let poisoned = null;

/** The cached prepared statement for `sql`; the oldest entry goes when the cache is full. */
function prepare(sql) {
  let stmt = statements.get(sql);
  if (stmt) return stmt;
  if (!db) throw new Error('the database is closed');
  stmt = db.prepare(sql);
  if (statements.size >= options.statementCacheSize) {
    statements.delete(statements.keys().next().value);
  }
  statements.set(sql, stmt);
  return stmt;
}

function open() {
  db = openWriter(options.file, options.synchronous);
}

/** One Kysely query: rows for a statement that returns them, else changes and the last row id. */
function query(sql, params) {
  // The transaction may have ended by itself (an error that rolls it back): nothing to undo then.
  if (sql === 'rollback' && !db?.inTransaction) return { changes: 0 };
  const stmt = prepare(sql);
  if (stmt.reader) return { rows: stmt.all(params) };
  const { changes, lastInsertRowid } = stmt.run(params);
  return { changes, lastInsertRowid };
}

/**
 * One cached insert statement run once per row (`values`: the rows back to back, `width` each); a byte
 * per row says whether it inserted.
 */
function bulk(sql, values, width) {
  const stmt = prepare(sql);
  const count = values.length / width;
  const inserted = new Uint8Array(count);
  const row = new Array(width);
  for (let i = 0, k = 0; i < count; i++) {
    for (let j = 0; j < width; j++) row[j] = values[k++];
    inserted[i] = stmt.run(row).changes === 1 ? 1 : 0;
  }
  return inserted;
}

/**
 * COMMIT. The driver hands the connection to the next transaction as soon as it has sent COMMIT (its
 * statements queue behind it here), so a COMMIT that fails must not leave its transaction open for
 * them: it is rolled back before the error is reported.
 */
function commit() {
  const failed = poisoned;
  poisoned = null;
  try {
    if (failed) throw failed;
    prepare('commit').run();
  } catch (err) {
    if (db?.inTransaction) db.prepare('rollback').run();
    throw err;
  }
}

/**
 * BEGIN, the statements, COMMIT, as one transaction: every statement's rows, or nothing written.
 * `lazy`: the COMMIT does not wait for the disk (`synchronous = NORMAL` for this transaction only):
 * in WAL mode its frames are synced with the next commit that does (every other one, at FULL), or by
 * a checkpoint; a crash of the process loses nothing, a power loss may lose it.
 */
function atomically(list, lazy) {
  poisoned = null;
  const relaxed = lazy === true && options.synchronous !== 'NORMAL';
  if (relaxed) db?.pragma('synchronous = NORMAL');
  try {
    prepare('begin').run();
    try {
      const results = list.map(({ sql, params }) => {
        const stmt = prepare(sql);
        if (stmt.reader) return stmt.all(params);
        stmt.run(params);
        return [];
      });
      prepare('commit').run();
      return results;
    } catch (err) {
      if (db?.inTransaction) db.prepare('rollback').run();
      throw err;
    }
  } finally {
    if (relaxed) db?.pragma(`synchronous = ${options.synchronous}`);
  }
}

function close() {
  statements.clear();
  if (db?.open) db.close();
  db = null;
}

/** Errors cross the thread as plain fields: the `code` (e.g. SQLITE_CONSTRAINT_UNIQUE) is kept. */
function serializeError(err) {
  if (err instanceof Error) {
    const code = /** @type {{ code?: unknown }} */ (err).code;
    return { name: err.name, message: err.message, code: typeof code === 'string' ? code : undefined };
  }
  return { name: 'Error', message: String(err), code: undefined };
}

port.on('message', (msg) => {
  const inTransaction = msg.begin === true || db?.inTransaction === true;
  try {
    if (msg.begin) {
      poisoned = null;
      prepare('begin').run();
    }
    // After a pipelined statement failed, the transaction's other statements are refused with its
    // error (it may have been rolled back already: they must not run on their own), up to its end.
    if (poisoned !== null && (msg.op === 'bulk' || (msg.op === 'query' && msg.sql !== 'rollback')))
      throw poisoned;
    switch (msg.op) {
      case 'open':
        open();
        port.postMessage({ id: msg.id, ok: true });
        return;
      case 'query': {
        const result = query(msg.sql, msg.params);
        // A ROLLBACK ended the transaction: nothing is left to fail.
        if (msg.sql === 'rollback') poisoned = null;
        port.postMessage({ id: msg.id, ok: true, ...result });
        return;
      }
      case 'atomically':
        port.postMessage({ id: msg.id, ok: true, results: atomically(msg.statements, msg.lazy) });
        return;
      case 'commit':
        commit();
        port.postMessage({ id: msg.id, ok: true });
        return;
      case 'bulk': {
        const inserted = bulk(msg.sql, msg.values, msg.width);
        port.postMessage({ id: msg.id, ok: true, inserted }, [inserted.buffer]);
        return;
      }
      case 'close':
        close();
        port.postMessage({ id: msg.id, ok: true });
        // Nothing else keeps the thread alive: it ends once this reply is sent.
        port.close();
        return;
      default:
        throw new Error(`unknown operation ${String(msg.op)}`);
    }
  } catch (err) {
    if (msg.pipelined && inTransaction) poisoned ??= err;
    port.postMessage({ id: msg.id, ok: false, error: serializeError(err) });
  }
});
