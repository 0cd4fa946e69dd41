import type { Kysely } from 'kysely';
import type { ProblemError } from '../http/problem.ts';
import type { Database, Storage } from '../storage/index.ts';

/** One per-tenant quota to keep while a transaction adds rows (docs/configuration.md, "Quotas"). */
export interface QuotaCheck {
  tenantId: string;
  /** The quota; 0 means none. */
  limit: number;
  /** How many rows the transaction is about to add. */
  adding: number;
  /** How many the tenant has now, counted with the transaction's connection. */
  count(trx: Kysely<Database>): Promise<number>;
  /** The refusal (a 409 with the quota's stable code). */
  refuse(): ProblemError;
}

/**
 * Refuses, inside the transaction that adds rows, whatever would take a tenant past a quota; call
 * it before the insert. Atomic: where the backend has row locks (PostgreSQL), the tenant's row is
 * locked first (`for no key update`: it serialises quota checks of one tenant, not the foreign-key
 * checks of other writes), so concurrent additions for one tenant are counted one after another —
 * each count is a new statement, which sees what the transaction before it committed. SQLite has one
 * writer, whose transactions never overlap. A concurrent burst therefore cannot pass the quota.
 */
export async function enforceQuota(storage: Storage, trx: Kysely<Database>, check: QuotaCheck) {
  if (check.limit <= 0) return;
  if (storage.skipLocked) {
    await trx
      .selectFrom('tenants')
      .select('tenant_id')
      .where('tenant_id', '=', check.tenantId)
      .forNoKeyUpdate()
      .execute();
  }
  if ((await check.count(trx)) + check.adding > check.limit) throw check.refuse();
}
