import { type Kysely, type Selectable, sql } from 'kysely';
import type { BatcherOptions } from '../../batcher.ts';
import type { PageRequest } from '../../http/pagination.ts';
import {
  type CompiledStatement,
  type Database,
  type DialectName,
  flatColumns,
  readPage,
  StatementFamily,
} from '../../storage/index.ts';
import type { CommandAnswersTable, CommandsTable } from '../../storage/schema.ts';

export type CommandRow = Selectable<CommandsTable>;

/** Rows per insert statement (14 columns each: well inside every backend's bind-parameter limit). */
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
  'batch_id',
] as const satisfies readonly (keyof CommandRow)[];

const INSERT = StatementFamily.insert('commands', COLUMNS);

/** The statements that insert command rows, many per statement (fixed SQL, no query builder). */
export function insertStatements(dialect: DialectName, rows: CommandRow[]): CompiledStatement[] {
  const statements: CompiledStatement[] = [];
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    const chunk = rows.length <= INSERT_CHUNK ? rows : rows.slice(i, i + INSERT_CHUNK);
    statements.push(INSERT.of(chunk.length).bind(dialect, flatColumns(chunk, COLUMNS)));
  }
  return statements;
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

/**
 * Locks commands rows in command id order (`select … order by command_id for update`), where rows are
 * locked (PostgreSQL). Every transaction that updates several commands rows — a group's acks, the
 * delivery marks — takes them this way first: `in (…)` locks rows in the order the plan scans them,
 * and the marks and an ack group deadlocked under load (each holding a row the other wanted).
 */
const LOCK_IN_ORDER = new StatementFamily(
  (n) =>
    `select command_id from commands where command_id in (${Array(n).fill('?').join(', ')}) ` +
    'order by command_id for update',
);

/** The statements that lock these commands rows in id order (empty for fewer than two ids). */
export function lockStatements(dialect: DialectName, commandIds: readonly string[]): CompiledStatement[] {
  if (commandIds.length < 2) return [];
  const sorted = [...new Set(commandIds)].sort();
  const statements: CompiledStatement[] = [];
  for (let i = 0; i < sorted.length; i += INSERT_CHUNK) {
    const chunk = sorted.slice(i, i + INSERT_CHUNK);
    statements.push(LOCK_IN_ORDER.of(chunk.length).bind(dialect, chunk));
  }
  return statements;
}

/**
 * A flush of delivery marks as one transaction's statements (`byTime`: each time, the commands
 * written to their device then): each row becomes `delivered` with its time, unless settled
 * meanwhile (a quick device's answer stays; the delivery time is still recorded). With
 * `lockInOrder` (PostgreSQL) the rows are locked in id order first, as an ack group takes them, or
 * the two can deadlock.
 */
export function deliveryMarkStatements(
  db: Kysely<Database>,
  dialect: DialectName,
  byTime: ReadonlyMap<number, readonly string[]>,
  options: { lockInOrder: boolean },
): CompiledStatement[] {
  const statements = options.lockInOrder ? lockStatements(dialect, [...byTime.values()].flat()) : [];
  for (const [at, commandIds] of byTime) {
    for (let i = 0; i < commandIds.length; i += INSERT_CHUNK) {
      statements.push(
        db
          .updateTable('commands')
          .set({
            status: sql<string>`case when status = 'queued' then 'delivered' else status end`,
            delivered_at: sql<number>`coalesce(delivered_at, ${at})`,
          })
          .where('command_id', 'in', commandIds.slice(i, i + INSERT_CHUNK))
          .compile(),
      );
    }
  }
  return statements;
}

export interface Settlement {
  sessionId: string;
  commandId: string;
  status: 'acknowledged' | 'failed';
  error: string | null;
}

/**
 * "Still open", for a statement that finds its rows by id: written so that no index can serve it, and
 * the primary key finds the rows. PostgreSQL's statistics rightly say that few rows are open, so its
 * planner would rather read the open entries of `commands_open` or `commands_expiry` than a few
 * primary keys; but those indexes keep an entry for every version a row had until VACUUM comes (each
 * answered command's `queued` and `delivered` versions), and such plans of an ack group read 450 to
 * 12,000 index entries at 2,000 commands/s (`pg_stat_all_indexes`; auto_explain showed the plans),
 * against one primary-key entry a command. `query-plans.test.ts` holds it.
 */
const STILL_OPEN_SQL = `(status || '') in ('queued', 'delivered')`;
const STILL_OPEN = sql.raw<boolean>(STILL_OPEN_SQL);

/** Plain acknowledgements of `n` commands: one statement (the primary key finds the rows). */
/**
 * On PostgreSQL an ack waits up to 5 ms for a group of new commands to go with (`Batcher` `linger`):
 * under load acks then cost no transaction of their own (a round trip and a commit of PostgreSQL's
 * fewer), and a new command never queues behind a group of acks; a command shows `acknowledged` that
 * much later at most. Not on SQLite: a group of acks alone there is a cheap commit in the writer
 * thread (no fsync), and with acks lingering the durable relay's median rose ~12 % (three alternated
 * pairs at 2,500/s), the writer's time going to durable groups only.
 */
export function ackLinger<W extends object>(dialect: DialectName): BatcherOptions<W>['linger'] {
  return dialect === 'postgres' ? { ms: 5, lingers: (write: W) => 'ack' in write } : undefined;
}

const ACKNOWLEDGE = new StatementFamily(
  (n) =>
    `update commands set status = 'acknowledged', error = null, settled_at = ?, ` +
    // An answered command was delivered, whether or not its delivery mark was written yet.
    `delivered_at = coalesce(delivered_at, ?) ` +
    `where command_id in (${Array(n).fill('?').join(', ')}) ` +
    `and ${STILL_OPEN_SQL} and expires_at > ? ` +
    // Each command only for its own session.
    `and (session_id, command_id) in (values ${Array(n).fill('(?, ?)').join(', ')}) returning *`,
);

/**
 * The statements that settle open, unexpired commands, and how to read their results: for each
 * settlement, the settled row, or undefined when the command was not open (unknown, another
 * session's, settled or expired — or named twice: the first settles it). Plain acknowledgements (the
 * usual answer) are written by one statement.
 */
export function settleStatements(
  db: Kysely<Database>,
  dialect: DialectName,
  settlements: Settlement[],
  now: number,
  options: { lockInOrder?: boolean } = {},
): { statements: CompiledStatement[]; read(results: unknown[][]): (CommandRow | undefined)[] } {
  const locks = options.lockInOrder
    ? lockStatements(
        dialect,
        settlements.map((s) => s.commandId),
      )
    : [];
  const statements: CompiledStatement[] = [...locks];
  // Plain loops: `flatMap` costs several times as much in V8, and this runs for every group.
  const plain: number[] = [];
  const others: number[] = [];
  settlements.forEach((s, i) => {
    (s.status === 'acknowledged' && s.error === null ? plain : others).push(i);
  });
  const chunks: number[][] = [];
  for (let c = 0; c < plain.length; c += INSERT_CHUNK) {
    const chunk = plain.slice(c, c + INSERT_CHUNK);
    chunks.push(chunk);
    const n = chunk.length;
    const values = new Array<unknown>(3 + 3 * n);
    values[0] = now;
    values[1] = now;
    values[2 + n] = now;
    chunk.forEach((i, j) => {
      const { sessionId, commandId } = settlements[i];
      values[2 + j] = commandId;
      values[3 + n + 2 * j] = sessionId;
      values[4 + n + 2 * j] = commandId;
    });
    statements.push(ACKNOWLEDGE.of(n).bind(dialect, values));
  }
  for (const i of others) {
    const s = settlements[i];
    statements.push(
      db
        .updateTable('commands')
        .set({
          status: s.status,
          error: s.error,
          settled_at: now,
          delivered_at: sql<number>`coalesce(delivered_at, ${now})`,
        })
        .where('command_id', '=', s.commandId)
        .where('session_id', '=', s.sessionId)
        .where(STILL_OPEN)
        .where('expires_at', '>', now)
        .returningAll()
        .compile(),
    );
  }
  return {
    statements,
    read(all) {
      const results = all.slice(locks.length);
      const out: (CommandRow | undefined)[] = new Array(settlements.length).fill(undefined);
      chunks.forEach((chunk, n) => {
        const byId = new Map((results[n] as CommandRow[]).map((r) => [r.command_id, r]));
        for (const i of chunk) {
          out[i] = byId.get(settlements[i].commandId);
          byId.delete(settlements[i].commandId);
        }
      });
      others.forEach((i, n) => {
        out[i] = (results[chunks.length + n] as CommandRow[])[0];
      });
      return out;
    },
  };
}

/** Marks every open command past its expiry as expired; each row is claimed once. */
/** Whether any open command is past its expiry (read outside a transaction: SQLite's writer is not held). */
export async function anyExpired(db: Kysely<Database>, now: number): Promise<boolean> {
  const row = await db
    .selectFrom('commands')
    .select('command_id')
    .where('status', 'in', ['queued', 'delivered'])
    .where('expires_at', '<=', now)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

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
    const row = await expireCommand(db, command_id, now);
    if (row) expired.push(row);
  }
  return expired;
}

/** Marks one command expired if it is still open: the expired row, or undefined. */
export function expireCommand(db: Kysely<Database>, commandId: string, now: number) {
  return db
    .updateTable('commands')
    .set({ status: 'expired', settled_at: now })
    .where('command_id', '=', commandId)
    .where(STILL_OPEN)
    .returningAll()
    .executeTakeFirst();
}

/** One page of a session's commands, newest first (command ids are UUIDv7: time-ordered). */
export function listCommands(db: Kysely<Database>, sessionId: string, page: PageRequest) {
  const base = db.selectFrom('commands').where('session_id', '=', sessionId);
  return readPage(
    db,
    base,
    (b) => b.selectAll(),
    { column: 'command_id', direction: 'desc', id: null },
    page,
  );
}

// --- the queue quota, paged replay, cancel, first answers (CONTRACT §3, §14) -------------------------

/**
 * Open (queued or delivered), written as literals: the planners then see that the partial index of
 * open commands (`commands_open`, migration 009) applies, which a bound parameter would hide.
 */
const OPEN = sql<boolean>`status in ('queued', 'delivered')`;

/** The session's unsettled, unexpired commands, id and expiry: what the queue quota counts. */
export function openCommands(db: Kysely<Database>, sessionId: string, now: number) {
  return db
    .selectFrom('commands')
    .select(['command_id', 'expires_at'])
    .where('session_id', '=', sessionId)
    .where(OPEN)
    .where('expires_at', '>', now)
    .execute();
}

/** The unsettled, unexpired commands of several sessions (`openCommands` for many at once). */
export function openCommandsOf(db: Kysely<Database>, sessionIds: string[], now: number) {
  return db
    .selectFrom('commands')
    .select(['session_id', 'command_id', 'expires_at'])
    .where('session_id', 'in', sessionIds)
    .where(OPEN)
    .where('expires_at', '>', now)
    .execute();
}

/**
 * Commands still to reach the device (queued, or delivered but unanswered), one page: at most `limit`,
 * oldest first, after the command `after`.
 */
export function pendingPage(
  db: Kysely<Database>,
  sessionId: string,
  now: number,
  after: string | null,
  limit: number,
) {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where(OPEN)
    .where('expires_at', '>', now)
    .$if(after !== null, (qb) => qb.where('command_id', '>', after as string))
    .orderBy('command_id')
    .limit(limit)
    .execute();
}

/**
 * Cancels a command that is still queued or delivered and unexpired: the cancelled row, or undefined.
 * `writtenAt`: when this process wrote it to the device's socket, if its delivery mark is not written yet.
 */
export function cancelCommand(
  db: Kysely<Database>,
  sessionId: string,
  commandId: string,
  now: number,
  writtenAt: number | null,
) {
  return db
    .updateTable('commands')
    .set({
      status: 'cancelled',
      settled_at: now,
      delivered_at: sql<number | null>`coalesce(delivered_at, ${writtenAt})`,
    })
    .where('command_id', '=', commandId)
    .where('session_id', '=', sessionId)
    .where(STILL_OPEN)
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
}

export type CommandAnswerRow = Selectable<CommandAnswersTable>;

export function findAnswer(db: Kysely<Database>, commandId: string) {
  return db.selectFrom('command_answers').selectAll().where('command_id', '=', commandId).executeTakeFirst();
}

/** Keeps a command's first answer; when one is kept already, that one stays. Returns the kept answer. */
export async function keepAnswer(db: Kysely<Database>, answer: CommandAnswerRow): Promise<CommandAnswerRow> {
  const inserted = await db
    .insertInto('command_answers')
    .values(answer)
    .onConflict((oc) => oc.column('command_id').doNothing())
    .returningAll()
    .executeTakeFirst();
  return inserted ?? (await findAnswer(db, answer.command_id)) ?? answer;
}

/** Deletes a session's commands, their kept answers, and its refusals in cohort batches. */
export async function deleteSessionCommands(db: Kysely<Database>, sessionId: string) {
  await db.deleteFrom('command_batch_refusals').where('session_id', '=', sessionId).execute();
  await db
    .deleteFrom('command_answers')
    .where(
      'command_id',
      'in',
      db.selectFrom('commands').select('command_id').where('session_id', '=', sessionId),
    )
    .execute();
  await db.deleteFrom('commands').where('session_id', '=', sessionId).execute();
}

/**
 * Erasure (the players module): deletes up to `limit` commands of these sessions (with their kept
 * answers) and up to `limit` cohort-batch refusals naming them, in one transaction; how many rows went.
 */
export async function eraseSessionCommands(db: Kysely<Database>, sessionIds: string[], limit: number) {
  if (sessionIds.length === 0) return 0;
  return db.transaction().execute(async (trx) => {
    const ids = (
      await trx
        .selectFrom('commands')
        .select('command_id')
        .where('session_id', 'in', sessionIds)
        .limit(limit)
        .execute()
    ).map((r) => r.command_id);
    let deleted = 0;
    if (ids.length > 0) {
      const answers = await trx
        .deleteFrom('command_answers')
        .where('command_id', 'in', ids)
        .executeTakeFirst();
      const commands = await trx.deleteFrom('commands').where('command_id', 'in', ids).executeTakeFirst();
      deleted += Number(answers.numDeletedRows) + Number(commands.numDeletedRows);
    }
    // One statement: the first `limit` refusals of these sessions, by their key.
    const refusals = await trx
      .deleteFrom('command_batch_refusals')
      .where(({ eb, refTuple, selectFrom }) =>
        eb(
          refTuple('batch_id', 'session_id'),
          'in',
          selectFrom('command_batch_refusals')
            .select(['batch_id', 'session_id'])
            .where('session_id', 'in', sessionIds)
            .limit(limit)
            .$asTuple('batch_id', 'session_id'),
        ),
      )
      .executeTakeFirst();
    return deleted + Number(refusals.numDeletedRows);
  });
}
