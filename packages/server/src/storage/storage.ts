import type { Kysely } from 'kysely';
import type { Database } from './schema.ts';

export type DialectName = 'sqlite' | 'postgres';

/**
 * The one query layer every module uses. What differs between the backends is read from
 * `dialect` (capability flags), never from `if (sqlite)` branches spread through the modules.
 */
export interface Storage {
  readonly dialect: DialectName;
  /** Largest number of bound parameters one statement may carry. */
  readonly maxBindParameters: number;
  readonly db: Kysely<Database>;
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
