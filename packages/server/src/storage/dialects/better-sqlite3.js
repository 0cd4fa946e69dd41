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
