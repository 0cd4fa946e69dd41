import { type Kysely, type Selectable, sql } from 'kysely';
import { offsetOf, type PageRequest } from '../../http/pagination.ts';
import type { Database } from '../../storage/index.ts';
import type { CommandsTable } from '../../storage/schema.ts';

export type CommandRow = Selectable<CommandsTable>;

/** Rows per insert statement (13 columns each: well inside every backend's bind-parameter limit). */
const INSERT_CHUNK = 500;

/** Inserts command rows, many per statement. */
export async function insertCommands(db: Kysely<Database>, rows: CommandRow[]) {
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    await db
      .insertInto('commands')
      .values(rows.slice(i, i + INSERT_CHUNK))
      .execute();
  }
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
  // A quick device may have answered already: its answer stays, the delivery time is still recorded.
  for (let i = 0; i < commandIds.length; i += INSERT_CHUNK) {
    await db
      .updateTable('commands')
      .set({
        status: sql<string>`case when status = 'queued' then 'delivered' else status end`,
        delivered_at: sql<number>`coalesce(delivered_at, ${at})`,
      })
      .where('command_id', 'in', commandIds.slice(i, i + INSERT_CHUNK))
      .execute();
  }
}

export interface Settlement {
  sessionId: string;
  commandId: string;
  status: 'acknowledged' | 'failed';
  error: string | null;
}

/**
 * Settles open, unexpired commands; for each settlement, the settled row, or undefined when the
 * command was not open (unknown, another session's, settled or expired — or named twice: the first
 * settles it). Plain acknowledgements (the usual answer) are written by one statement.
 */
export async function settleCommands(db: Kysely<Database>, settlements: Settlement[], now: number) {
  const out: (CommandRow | undefined)[] = new Array(settlements.length).fill(undefined);
  const open = (q: ReturnType<typeof settleQuery>) =>
    q.where('status', 'in', ['queued', 'delivered']).where('expires_at', '>', now);
  const settleQuery = (status: string, error: string | null) =>
    db.updateTable('commands').set({
      status,
      error,
      settled_at: now,
      // An answered command was delivered, whether or not its delivery mark was written yet.
      delivered_at: sql<number>`coalesce(delivered_at, ${now})`,
    });
  const plain = settlements.flatMap((s, i) => (s.status === 'acknowledged' && s.error === null ? [i] : []));
  if (plain.length > 0) {
    const pairs = sql.join(plain.map((i) => sql`(${settlements[i].sessionId}, ${settlements[i].commandId})`));
    const rows = await open(settleQuery('acknowledged', null))
      .where(sql<boolean>`(session_id, command_id) in (values ${pairs})`)
      .returningAll()
      .execute();
    const byId = new Map(rows.map((r) => [r.command_id, r]));
    for (const i of plain) {
      out[i] = byId.get(settlements[i].commandId);
      byId.delete(settlements[i].commandId);
    }
  }
  for (const [i, s] of settlements.entries()) {
    if (s.status === 'acknowledged' && s.error === null) continue;
    out[i] = await open(settleQuery(s.status, s.error))
      .where('command_id', '=', s.commandId)
      .where('session_id', '=', s.sessionId)
      .returningAll()
      .executeTakeFirst();
  }
  return out;
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
