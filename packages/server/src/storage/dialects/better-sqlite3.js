// The better-sqlite3 build this Node.js can run. Plain JavaScript: the SQLite worker thread imports
// it too (see sqlite-worker.js).
//
// Node 22 and 24 (Node-API 10): better-sqlite3 13, a Node-API addon shipped prebuilt, so one install
// serves every Node version. better-sqlite3 12 cannot serve Node 24: its statements wrap Node's
// `ObjectWrap`, whose destructor there asserts a current environment, and a statement collected by
// the garbage collector aborts the process (`Assertion failed: (env) != nullptr`).
// Node 20 (Node-API 9): better-sqlite3 13 needs Node-API 10 and crashes on load, so 12, compiled for
// this Node at install (an optional dependency: an install on Node 22+ that cannot compile it still
// succeeds).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const napi = Number(process.versions.napi);

function load() {
  if (napi >= 10) return require('better-sqlite3-napi');
  try {
    return require('better-sqlite3');
  } catch (err) {
    throw new Error(
      `liveline needs better-sqlite3 12 on Node.js ${process.versions.node} (Node-API ${napi}); ` +
        'it is missing or was built for another Node.js: run `npm rebuild better-sqlite3` with this ' +
        `Node, or use Node.js 22 or 24. Cause: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
}

/** @type {typeof import('better-sqlite3')} */
const BetterSqlite3 = load();
export default BetterSqlite3;

/**
 * The store's read-write connection (the writer thread's, or the one connection of `thread: 'main'`),
 * with its pragmas. `synchronous`: FULL, a committed transaction survives power loss, not only a
 * process crash; NORMAL, only a crash. Temporary tables stay in memory: the writer's statements are
 * small, and at the default each `IN (…)` list or `values` CTE of an update made a file in /var/tmp.
 * @param {string} file
 * @param {'FULL' | 'NORMAL'} synchronous
 */
export function openWriter(file, synchronous) {
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  db.pragma('temp_store = MEMORY');
  return db;
}
