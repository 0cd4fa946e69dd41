import fs from 'node:fs';
import path from 'node:path';

/** The SQLite files in the data directory: the database and its write-ahead log and shared memory. */
export const DATABASE_FILE = 'liveline.db';
const DATABASE_FILES = [DATABASE_FILE, `${DATABASE_FILE}-wal`, `${DATABASE_FILE}-shm`];
/** Files of the data directory that hold secrets (the database holds the token signing keys). */
const SECRET_FILES = [...DATABASE_FILES, 'admin-token'];

/**
 * Makes the data directory private before the database is opened: the directory 0700 when created,
 * the database file created 0600 (SQLite gives its -wal and -shm files the database file's mode).
 * An existing directory or file keeps the mode it has; `dataDirWarnings` reports one that is wider.
 */
export function prepareDataDir(dir: string): string {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, DATABASE_FILE);
  fs.closeSync(fs.openSync(file, 'a', 0o600));
  return file;
}

/** What in the data directory others than its owner can read or write, as sentences for the log. */
export function dataDirWarnings(dir: string): string[] {
  const warnings: string[] = [];
  const wider = (p: string, allowed: number) => {
    try {
      const mode = fs.statSync(p).mode & 0o777;
      return mode & ~allowed ? mode : null;
    } catch {
      return null;
    }
  };
  const dirMode = wider(dir, 0o700);
  if (dirMode !== null)
    warnings.push(
      `the data directory ${dir} has mode ${dirMode.toString(8)}: others can reach the database and ` +
        `the admin token (chmod 700 it)`,
    );
  for (const name of SECRET_FILES) {
    const mode = wider(path.join(dir, name), 0o600);
    if (mode !== null)
      warnings.push(`${path.join(dir, name)} has mode ${mode.toString(8)}: it holds secrets (chmod 600 it)`);
  }
  return warnings;
}
