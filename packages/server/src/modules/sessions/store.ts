import type { Kysely, Selectable } from 'kysely';
import type { PageRequest } from '../../http/pagination.ts';
import { uuidv7 } from '../../ids.ts';
import { CompiledOnce, type Database, param, readPage, StatementFamily } from '../../storage/index.ts';
import type { SessionsTable } from '../../storage/schema.ts';
import type { CompiledStatement, DialectName, Storage } from '../../storage/storage.ts';

export type SessionRow = Selectable<SessionsTable>;

export interface NewSession {
  tenantId: string;
  playerId: string;
  tenantCohortId: string | null;
  device: Record<string, string>;
  now: number;
}

export function sessionRow(input: NewSession): SessionRow {
  return {
    session_id: uuidv7(),
    tenant_id: input.tenantId,
    player_id: input.playerId,
    tenant_cohort_id: input.tenantCohortId,
    device: JSON.stringify(input.device),
    status: 'live',
    started_at: input.now,
    last_seen_at: input.now,
    ended_at: null,
    end_reason: null,
  };
}

export async function insertSession(db: Kysely<Database>, input: NewSession): Promise<SessionRow> {
  const row = sessionRow(input);
  await db.insertInto('sessions').values(row).execute();
  return row;
}

/** Inserts new sessions in one statement (the group commit of session starts). */
export async function insertSessions(db: Kysely<Database>, rows: SessionRow[]): Promise<SessionRow[]> {
  await db.insertInto('sessions').values(rows).execute();
  return rows;
}

const FIND_SESSION = new CompiledOnce<SessionRow>((db) =>
  db
    .selectFrom('sessions')
    .selectAll()
    .where('session_id', '=', param('sessionId'))
    .where('tenant_id', '=', param('tenantId')),
);

export async function findSession(
  db: Kysely<Database>,
  tenantId: string,
  sessionId: string,
): Promise<SessionRow | undefined> {
  return (await FIND_SESSION.run(db, { sessionId, tenantId }))[0];
}

export async function touchSession(db: Kysely<Database>, sessionId: string, at: number) {
  await db
    .updateTable('sessions')
    .set({ last_seen_at: at })
    .where('session_id', '=', sessionId)
    .where('last_seen_at', '<', at)
    .execute();
}

/** Contacts per statement of `touchEach` (2 parameters each: inside every backend's limit). */
const TOUCH_CHUNK = 500;

const TOUCH_EACH = new StatementFamily(
  (n) =>
    `with v (session_id, at) as (values ${Array(n).fill('(cast(? as text), cast(? as bigint))').join(', ')}) ` +
    'update sessions set last_seen_at = v.at from v ' +
    // The `in` finds each row by its key: without it SQLite reads the whole table for every statement.
    'where sessions.session_id in (select session_id from v) ' +
    'and sessions.session_id = v.session_id and sessions.last_seen_at < v.at',
);

const LOCK_SESSIONS = StatementFamily.lockInOrder('sessions', 'session_id', 'session_id collate "C"');

/**
 * The statements that record contact for many sessions, each at its own time (never moving
 * lastSeenAt back): a statement per 500 sessions, not one each (fixed SQL, no query builder).
 * `contacts` in session id order; on PostgreSQL the rows are locked in that order first (an update by
 * a join locks them in the plan's order, and concurrent ingestion groups and the contact flush would
 * deadlock).
 */
export function touchStatements(dialect: DialectName, contacts: [string, number][]): CompiledStatement[] {
  const statements: CompiledStatement[] = [];
  for (let i = 0; i < contacts.length; i += TOUCH_CHUNK) {
    const chunk = contacts.slice(i, i + TOUCH_CHUNK);
    if (dialect === 'postgres')
      statements.push(
        LOCK_SESSIONS.of(chunk.length).bind(
          dialect,
          chunk.map(([sessionId]) => sessionId),
        ),
      );
    statements.push(TOUCH_EACH.of(chunk.length).bind(dialect, chunk.flat()));
  }
  return statements;
}

/** `touchStatements` in the transaction `trx` (an ingestion group's touch). */
export async function touchEach(
  storage: Pick<Storage, 'dialect' | 'pipeline'>,
  trx: Kysely<Database>,
  contacts: [string, number][],
) {
  // Nothing reads their answers: on SQLite they cost the transaction no round trip (`Storage.pipeline`).
  for (const statement of touchStatements(storage.dialect, contacts)) await storage.pipeline(trx, statement);
}

/** Ends a live session. Returns the ended row, or undefined when it was not live (already ended). */
export function endSession(db: Kysely<Database>, sessionId: string, endedAt: number, reason: string) {
  return db
    .updateTable('sessions')
    .set({ status: 'ended', ended_at: endedAt, end_reason: reason })
    .where('session_id', '=', sessionId)
    .where('status', '=', 'live')
    .returningAll()
    .executeTakeFirst();
}

/** Live sessions silent since before `cutoff`, longest silent first: candidates for the idle sweep. */
export async function idleSessions(db: Kysely<Database>, cutoff: number, limit = 500) {
  const rows = await db
    .selectFrom('sessions')
    .select('session_id')
    .where('status', '=', 'live')
    .where('last_seen_at', '<', cutoff)
    .orderBy('last_seen_at')
    .limit(limit)
    .execute();
  return rows.map((r) => r.session_id);
}

/**
 * Ends a session for silence, at its last contact, if it is still live and silent since before
 * `cutoff`. The conditional UPDATE claims the row, so several processes sweeping at once never end a
 * session twice. Returns the ended row, or undefined when it was not this call's to end.
 */
export function endIdleSession(db: Kysely<Database>, sessionId: string, cutoff: number) {
  return db
    .updateTable('sessions')
    .set((eb) => ({ status: 'ended', ended_at: eb.ref('last_seen_at'), end_reason: 'idle' }))
    .where('session_id', '=', sessionId)
    .where('status', '=', 'live')
    .where('last_seen_at', '<', cutoff)
    .returningAll()
    .executeTakeFirst();
}

export interface SessionFilter {
  tenantId: string;
  tenantCohortId?: string;
  /** One player's sessions (`sessions_tenant_player_started`, migration 016). */
  playerId?: string;
  /** Only live sessions seen at or after this time. */
  activeSince?: number;
}

/** One page of sessions: active lists by lastSeenAt desc, cohort lists by startedAt desc; ties by id. */
export function listSessions(db: Kysely<Database>, filter: SessionFilter, page: PageRequest) {
  let q = db.selectFrom('sessions').where('tenant_id', '=', filter.tenantId);
  if (filter.tenantCohortId !== undefined) q = q.where('tenant_cohort_id', '=', filter.tenantCohortId);
  if (filter.playerId !== undefined) q = q.where('player_id', '=', filter.playerId);
  if (filter.activeSince !== undefined) {
    q = q.where('status', '=', 'live').where('last_seen_at', '>=', filter.activeSince);
  }
  const column = filter.activeSince !== undefined ? 'last_seen_at' : 'started_at';
  return readPage(db, q, (b) => b.selectAll(), { column, direction: 'desc', id: 'session_id' }, page);
}

/** Where a walk of a tenant's sessions in start order resumes: after this session. */
export interface StartCursor {
  startedAt: number;
  sessionId: string;
}

/** Which start times a walk covers: from `since` (inclusive), before `before` (exclusive). */
export interface StartRange {
  since?: number;
  before?: number;
}

/**
 * A tenant's sessions in `(started_at, session_id)` order after `after`, started within `range`: one
 * range of `sessions_tenant_started` (migration 010), whatever the tenant holds. Retention and the
 * tenant export walk a tenant with it.
 */
export function startOrderQuery(
  db: Kysely<Database>,
  tenantId: string,
  range: StartRange,
  after: StartCursor | null,
  limit: number,
) {
  let query = db.selectFrom('sessions').selectAll().where('tenant_id', '=', tenantId);
  if (range.since !== undefined) query = query.where('started_at', '>=', range.since);
  if (range.before !== undefined) query = query.where('started_at', '<', range.before);
  if (after) {
    query = query.where((eb) =>
      eb(eb.refTuple('started_at', 'session_id'), '>', eb.tuple(after.startedAt, after.sessionId)),
    );
  }
  return query.orderBy('started_at').orderBy('session_id').limit(limit);
}

/**
 * The live sessions of a tenant's cohort, in session id order, at most `limit` (a cohort-wide
 * command's recipients): one range of `sessions_tenant_cohort_status_seen` (migration 008).
 */
export function liveInCohort(db: Kysely<Database>, tenantId: string, tenantCohortId: string, limit: number) {
  return db
    .selectFrom('sessions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('tenant_cohort_id', '=', tenantCohortId)
    .where('status', '=', 'live')
    .orderBy('session_id')
    .limit(limit)
    .execute();
}

/**
 * Which of these sessions are still live (ended and deleted ones are not): the live-session
 * cache's background check, one statement for up to a few hundred sessions.
 */
export async function stillLive(db: Kysely<Database>, sessionIds: readonly string[]): Promise<Set<string>> {
  if (sessionIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('sessions')
    .select('session_id')
    .where('session_id', 'in', sessionIds)
    .where('status', '=', 'live')
    .execute();
  return new Set(rows.map((r) => r.session_id));
}

/** Deletes a session's row; false when it was already gone. */
export async function deleteSession(db: Kysely<Database>, sessionId: string): Promise<boolean> {
  const gone = await db.deleteFrom('sessions').where('session_id', '=', sessionId).executeTakeFirst();
  return Number(gone.numDeletedRows) > 0;
}

/**
 * Erasure: deletes up to `limit` of a player's sessions started at or before `upTo`, in the caller's
 * transaction (`sessions_tenant_player_started`); their ids.
 */
export async function deletePlayerSessions(
  db: Kysely<Database>,
  tenantId: string,
  playerId: string,
  upTo: number,
  limit: number,
): Promise<string[]> {
  const ids = (
    await db
      .selectFrom('sessions')
      .select('session_id')
      .where('tenant_id', '=', tenantId)
      .where('player_id', '=', playerId)
      .where('started_at', '<=', upTo)
      .limit(limit)
      .execute()
  ).map((r) => r.session_id);
  if (ids.length > 0) await db.deleteFrom('sessions').where('session_id', 'in', ids).execute();
  return ids;
}
