// Types of better-sqlite3.js: both builds it may load have better-sqlite3's API.
import BetterSqlite3 from 'better-sqlite3';

export default BetterSqlite3;
