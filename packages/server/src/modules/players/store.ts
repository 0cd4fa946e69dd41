import type { Kysely, Selectable } from 'kysely';
import type { PageRequest } from '../../http/pagination.ts';
import { type Database, readPage } from '../../storage/index.ts';
import type { AuditLogTable, PlayerErasuresTable } from '../../storage/schema.ts';

type Db = Kysely<Database>;
export type ErasureRow = Selectable<PlayerErasuresTable>;
export type AuditRow = Selectable<AuditLogTable>;

/** Session ids one statement inserts or reads. */
const IDS_PER_STATEMENT = 500;

export function pendingErasure(db: Db, tenantId: string, playerId: string) {
  return db
    .selectFrom('player_erasures')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('player_id', '=', playerId)
    .where('state', '=', 'pending')
    .executeTakeFirst();
}

export async function insertErasure(db: Db, row: ErasureRow) {
  await db.insertInto('player_erasures').values(row).execute();
}

export async function addErasureSessions(db: Db, erasureId: string, sessionIds: string[]) {
  for (let i = 0; i < sessionIds.length; i += IDS_PER_STATEMENT) {
    await db
      .insertInto('player_erasure_sessions')
      .values(
        sessionIds
          .slice(i, i + IDS_PER_STATEMENT)
          .map((session_id) => ({ erasure_id: erasureId, session_id })),
      )
      .onConflict((oc) => oc.doNothing())
      .execute();
  }
}

/** The erasure's session ids in id order after `after` (its primary key), at most `limit`. */
export async function erasureSessionIds(db: Db, erasureId: string, after: string, limit: number) {
  const rows = await db
    .selectFrom('player_erasure_sessions')
    .select('session_id')
    .where('erasure_id', '=', erasureId)
    .where('session_id', '>', after)
    .orderBy('session_id')
    .limit(limit)
    .execute();
  return rows.map((r) => r.session_id);
}

/** Pending erasures no process holds (lease past), oldest first. */
export function dueErasures(db: Db, now: number, limit: number) {
  return db
    .selectFrom('player_erasures')
    .selectAll()
    .where('state', '=', 'pending')
    .where('lease_until', '<', now)
    .orderBy('lease_until')
    .limit(limit)
    .execute();
}

/**
 * Takes an erasure for `until`: a compare-and-set on the lease read, so of several processes that saw
 * it due exactly one gets it. False when another took it first.
 */
export async function lease(db: Db, row: ErasureRow, until: number): Promise<boolean> {
  const result = await db
    .updateTable('player_erasures')
    .set({ lease_until: until })
    .where('erasure_id', '=', row.erasure_id)
    .where('state', '=', 'pending')
    .where('lease_until', '=', row.lease_until)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Records the counts so far and lets the lease go (the next run takes it again). */
export async function release(db: Db, erasureId: string, counts: Record<string, number>) {
  await db
    .updateTable('player_erasures')
    .set({ counts: JSON.stringify(counts), lease_until: 0 })
    .where('erasure_id', '=', erasureId)
    .execute();
}

/** The erasure is done: its state, counts and time, its audit row's counts, its work list gone. */
export async function complete(db: Db, erasureId: string, counts: Record<string, number>, now: number) {
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('player_erasures')
      .set({ state: 'done', counts: JSON.stringify(counts), completed_at: now, lease_until: 0 })
      .where('erasure_id', '=', erasureId)
      .execute();
    await trx
      .updateTable('audit_log')
      .set({ counts: JSON.stringify(counts) })
      .where('erasure_id', '=', erasureId)
      .execute();
    await trx.deleteFrom('player_erasure_sessions').where('erasure_id', '=', erasureId).execute();
  });
}

export async function insertAudit(db: Db, row: AuditRow) {
  await db.insertInto('audit_log').values(row).execute();
}

export async function setAuditCounts(db: Db, auditId: string, counts: Record<string, number>) {
  await db
    .updateTable('audit_log')
    .set({ counts: JSON.stringify(counts) })
    .where('audit_id', '=', auditId)
    .execute();
}

export interface AuditFilter {
  tenantId?: string;
  playerId?: string;
  action?: string;
}

/** One page of the audit log, newest first (`audit_log_at`, `_tenant_at` or `_player_at`). */
export function listAudit(db: Db, filter: AuditFilter, page: PageRequest) {
  let q = db.selectFrom('audit_log');
  if (filter.tenantId !== undefined) q = q.where('tenant_id', '=', filter.tenantId);
  if (filter.playerId !== undefined) q = q.where('player_id', '=', filter.playerId);
  if (filter.action !== undefined) q = q.where('action', '=', filter.action);
  return readPage(db, q, (b) => b.selectAll(), { column: 'at', direction: 'desc', id: 'audit_id' }, page);
}
