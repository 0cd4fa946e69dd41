// Types of better-sqlite3.js: both builds it may load have better-sqlite3's API.
import BetterSqlite3 from 'better-sqlite3';

export default BetterSqlite3;

/** The store's read-write connection, with its pragmas (better-sqlite3.js). */
export function openWriter(file: string, synchronous: 'FULL' | 'NORMAL'): BetterSqlite3.Database;
