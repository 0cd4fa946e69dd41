import type { Kysely } from 'kysely';
import type { Database } from './schema.ts';
import type { Storage } from './storage.ts';

/**
 * Runs several reads against one snapshot of the store, so that rows committed together are seen
 * together: a delivery and its attempts, the per-status ranges of a delivery log (read one after the
 * other, a row that changes status between two of them would otherwise show twice or not at all).
 * PostgreSQL: a REPEATABLE READ transaction (one snapshot for all its statements; a read-only one
 * cannot fail to serialize). SQLite: a transaction on its one connection, which every write also goes
 * through, so nothing commits between its reads.
 */
export function inSnapshot<T>(storage: Storage, read: (db: Kysely<Database>) => Promise<T>): Promise<T> {
  const transaction = storage.db.transaction();
  return (
    storage.dialect === 'postgres' ? transaction.setIsolationLevel('repeatable read') : transaction
  ).execute(read);
}
