import { type Kysely, type Selectable, sql } from 'kysely';
import { offsetOf, type PageRequest } from '../../http/pagination.ts';
import type { Database } from '../../storage/index.ts';
import type { CommandsTable } from '../../storage/schema.ts';

export type CommandRow = Selectable<CommandsTable>;

export async function insertCommand(db: Kysely<Database>, row: CommandRow) {
  await db.insertInto('commands').values(row).execute();
}

export function findCommand(db: Kysely<Database>, sessionId: string, commandId: string) {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('command_id', '=', commandId)
    .executeTakeFirst();
}

export function findByIdempotencyKey(db: Kysely<Database>, tenantId: string, sessionId: string, key: string) {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('session_id', '=', sessionId)
    .where('idempotency_key', '=', key)
    .executeTakeFirst();
}

/** Commands still to reach the device (queued, or delivered but unanswered), oldest first. */
export function pendingCommands(db: Kysely<Database>, sessionId: string, now: number) {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('status', 'in', ['queued', 'delivered'])
    .where('expires_at', '>', now)
    .orderBy('command_id')
    .execute();
}

export async function markDelivered(db: Kysely<Database>, commandIds: string[], at: number) {
  if (commandIds.length === 0) return;
  // A quick device may have answered already: its answer stays, the delivery time is still recorded.
  await db
    .updateTable('commands')
    .set({
      status: sql<string>`case when status = 'queued' then 'delivered' else status end`,
      delivered_at: sql<number>`coalesce(delivered_at, ${at})`,
    })
    .where('command_id', 'in', commandIds)
    .execute();
}

/** Settles an open, unexpired command; undefined when it was not open (unknown, settled or expired). */
export function settleCommand(
  db: Kysely<Database>,
  sessionId: string,
  commandId: string,
  status: 'acknowledged' | 'failed',
  error: string | null,
  now: number,
) {
  return db
    .updateTable('commands')
    .set({ status, error, settled_at: now })
    .where('command_id', '=', commandId)
    .where('session_id', '=', sessionId)
    .where('status', 'in', ['queued', 'delivered'])
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
}

/** Marks every open command past its expiry as expired; each row is claimed once. */
export async function expireCommands(db: Kysely<Database>, now: number, limit = 500) {
  const due = await db
    .selectFrom('commands')
    .select('command_id')
    .where('status', 'in', ['queued', 'delivered'])
    .where('expires_at', '<=', now)
    .limit(limit)
    .execute();
  const expired: CommandRow[] = [];
  for (const { command_id } of due) {
    const row = await db
      .updateTable('commands')
      .set({ status: 'expired', settled_at: now })
      .where('command_id', '=', command_id)
      .where('status', 'in', ['queued', 'delivered'])
      .returningAll()
      .executeTakeFirst();
    if (row) expired.push(row);
  }
  return expired;
}

export async function listCommands(db: Kysely<Database>, sessionId: string, page: PageRequest) {
  const base = db.selectFrom('commands').where('session_id', '=', sessionId);
  const [rows, count] = await Promise.all([
    base.selectAll().orderBy('command_id', 'desc').limit(page.pageSize).offset(offsetOf(page)).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, totalCount: Number(count.n) };
}
