import { type Kysely, type Selectable, sql } from 'kysely';
import { offsetOf, type PageRequest } from '../../http/pagination.ts';
import { type Database, type DialectName, StatementFamily } from '../../storage/index.ts';
import type { CommandsTable } from '../../storage/schema.ts';

export type CommandRow = Selectable<CommandsTable>;

/** Rows per insert statement (13 columns each: well inside every backend's bind-parameter limit). */
const INSERT_CHUNK = 500;

const COLUMNS = [
  'command_id',
  'session_id',
  'tenant_id',
  'name',
  'data',
  'status',
  'issued_at',
  'expires_at',
  'delivered_at',
  'settled_at',
  'error',
  'idempotency_key',
  'request_hash',
] as const satisfies readonly (keyof CommandRow)[];

const INSERT = new StatementFamily(
  (n) =>
    `insert into commands (${COLUMNS.join(', ')}) values ${Array.from(
      { length: n },
      () => `(${COLUMNS.map(() => '?').join(', ')})`,
    ).join(', ')}`,
);

/** Inserts command rows, many per statement (the hot path: a fixed statement, no query builder). */
export async function insertCommands(db: Kysely<Database>, dialect: DialectName, rows: CommandRow[]) {
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    const chunk = rows.slice(i, i + INSERT_CHUNK);
    await INSERT.of(chunk.length).run(
      db,
      dialect,
      chunk.flatMap((row) => COLUMNS.map((c) => row[c])),
    );
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

/** Plain acknowledgements of `n` commands: one statement (the primary key finds the rows). */
const ACKNOWLEDGE = new StatementFamily(
  (n) =>
    `update commands set status = 'acknowledged', error = null, settled_at = ?, ` +
    // An answered command was delivered, whether or not its delivery mark was written yet.
    `delivered_at = coalesce(delivered_at, ?) ` +
    `where command_id in (${Array(n).fill('?').join(', ')}) ` +
    `and status in ('queued', 'delivered') and expires_at > ? ` +
    // Each command only for its own session.
    `and (session_id, command_id) in (values ${Array(n).fill('(?, ?)').join(', ')}) returning *`,
);

/**
 * Settles open, unexpired commands; for each settlement, the settled row, or undefined when the
 * command was not open (unknown, another session's, settled or expired — or named twice: the first
 * settles it). Plain acknowledgements (the usual answer) are written by one statement.
 */
export async function settleCommands(
  db: Kysely<Database>,
  dialect: DialectName,
  settlements: Settlement[],
  now: number,
) {
  const out: (CommandRow | undefined)[] = new Array(settlements.length).fill(undefined);
  const plain = settlements.flatMap((s, i) => (s.status === 'acknowledged' && s.error === null ? [i] : []));
  for (let c = 0; c < plain.length; c += INSERT_CHUNK) {
    const chunk = plain.slice(c, c + INSERT_CHUNK);
    const rows = await ACKNOWLEDGE.of(chunk.length).run<CommandRow>(db, dialect, [
      now,
      now,
      ...chunk.map((i) => settlements[i].commandId),
      now,
      ...chunk.flatMap((i) => [settlements[i].sessionId, settlements[i].commandId]),
    ]);
    const byId = new Map(rows.map((r) => [r.command_id, r]));
    for (const i of chunk) {
      out[i] = byId.get(settlements[i].commandId);
      byId.delete(settlements[i].commandId);
    }
  }
  for (const [i, s] of settlements.entries()) {
    if (s.status === 'acknowledged' && s.error === null) continue;
    out[i] = await db
      .updateTable('commands')
      .set({
        status: s.status,
        error: s.error,
        settled_at: now,
        delivered_at: sql<number>`coalesce(delivered_at, ${now})`,
      })
      .where('command_id', '=', s.commandId)
      .where('session_id', '=', s.sessionId)
      .where('status', 'in', ['queued', 'delivered'])
      .where('expires_at', '>', now)
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
