import { type Kysely, type Selectable, sql } from 'kysely';
import type { Database } from '../../storage/index.ts';
import type { CommandBatchesTable, CommandBatchRefusalsTable } from '../../storage/schema.ts';
import type { CommandRow } from './store.ts';

/**
 * The queries of cohort-wide commands (CONTRACT §12): the batch row, its refusals, and its commands
 * read through `commands_batch` (migration 013). The commands themselves are written by the command
 * log like any other (`store.insertStatements`, with their `batch_id`).
 */
export type BatchRow = Selectable<CommandBatchesTable>;
export type RefusalRow = Selectable<CommandBatchRefusalsTable>;

/** Refusal rows per insert statement (4 columns each). */
const REFUSAL_CHUNK = 500;

/**
 * Writes the batch row; false when the tenant already has a batch with its Idempotency-Key (a
 * concurrent request with the same key won).
 */
export async function insertBatch(db: Kysely<Database>, row: BatchRow): Promise<boolean> {
  const inserted = await db
    .insertInto('command_batches')
    .values(row)
    .onConflict((oc) => oc.columns(['tenant_id', 'idempotency_key']).doNothing())
    .returning('batch_id')
    .executeTakeFirst();
  return inserted !== undefined;
}

export function findBatch(db: Kysely<Database>, tenantId: string, batchId: string) {
  return db
    .selectFrom('command_batches')
    .selectAll()
    .where('batch_id', '=', batchId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
}

export function findBatchByKey(db: Kysely<Database>, tenantId: string, key: string) {
  return db
    .selectFrom('command_batches')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('idempotency_key', '=', key)
    .executeTakeFirst();
}

export async function insertRefusals(db: Kysely<Database>, rows: RefusalRow[]) {
  for (let i = 0; i < rows.length; i += REFUSAL_CHUNK) {
    await db
      .insertInto('command_batch_refusals')
      .values(rows.slice(i, i + REFUSAL_CHUNK))
      .onConflict((oc) => oc.columns(['batch_id', 'session_id']).doNothing())
      .execute();
  }
}

/** Keeps the batch's first answer, unless one is kept already; returns the kept one. */
export async function keepAnswer(db: Kysely<Database>, batchId: string, answer: string): Promise<string> {
  await db
    .updateTable('command_batches')
    .set({ answer })
    .where('batch_id', '=', batchId)
    .where('answer', 'is', null)
    .execute();
  const kept = await db
    .selectFrom('command_batches')
    .select('answer')
    .where('batch_id', '=', batchId)
    .executeTakeFirst();
  return kept?.answer ?? answer;
}

/**
 * How many of the batch's commands are in each status now, an open command past its expiry counted
 * `expired` (as the command's own view shows it).
 */
export async function statusCounts(db: Kysely<Database>, batchId: string, now: number) {
  const shown = sql<string>`case when status in ('queued', 'delivered') and expires_at <= ${now} then 'expired' else status end`;
  const rows = await db
    .selectFrom('commands')
    .select([shown.as('shown'), (eb) => eb.fn.countAll<string | number>().as('n')])
    .where('batch_id', '=', batchId)
    // By position: PostgreSQL does not match the select's expression, bound again, to a repeat of it.
    .groupBy(sql`1`)
    .execute();
  return new Map(rows.map((r) => [r.shown, Number(r.n)]));
}

/** The batch's commands still `queued` in the store and unexpired (at most `limit`). */
export function queuedCommands(db: Kysely<Database>, batchId: string, now: number, limit: number) {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('batch_id', '=', batchId)
    .where('status', '=', 'queued')
    .where('expires_at', '>', now)
    .limit(limit)
    .execute() as Promise<CommandRow[]>;
}

/** The batch's commands in session order, after the session `after`, at most `limit`. */
export function commandsPage(db: Kysely<Database>, batchId: string, after: string | null, limit: number) {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('batch_id', '=', batchId)
    .$if(after !== null, (qb) => qb.where('session_id', '>', after as string))
    .orderBy('session_id')
    .limit(limit)
    .execute() as Promise<CommandRow[]>;
}

/** The batch's refusals in session order, after the session `after`, at most `limit`. */
export function refusalsPage(db: Kysely<Database>, batchId: string, after: string | null, limit: number) {
  return db
    .selectFrom('command_batch_refusals')
    .selectAll()
    .where('batch_id', '=', batchId)
    .$if(after !== null, (qb) => qb.where('session_id', '>', after as string))
    .orderBy('session_id')
    .limit(limit)
    .execute();
}

export async function refusalCount(db: Kysely<Database>, batchId: string) {
  const row = await db
    .selectFrom('command_batch_refusals')
    .select((eb) => eb.fn.countAll<string | number>().as('n'))
    .where('batch_id', '=', batchId)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}
