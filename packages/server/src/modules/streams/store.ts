import type { Kysely, Selectable } from 'kysely';
import type { Database } from '../../storage/index.ts';
import type { SessionStreamsTable } from '../../storage/schema.ts';
import type { RecordingState, StopReason, StreamSnapshot, StreamState } from './state-machine.ts';

type StreamRow = Selectable<SessionStreamsTable>;

function toSnapshot(row: StreamRow): StreamSnapshot {
  return {
    stream: row.stream_state as StreamState,
    streamingSessionId: row.streaming_session_id,
    resolution: row.resolution,
    aspectratio: row.aspectratio,
    streamStartedAt: row.stream_started_at,
    streamCommandId: row.stream_command_id,
    recording: row.recording_state as RecordingState,
    recordingId: row.recording_id,
    recordingStartedAt: row.recording_started_at,
    recordingCommandId: row.recording_command_id,
  };
}

function toColumns(s: StreamSnapshot) {
  return {
    stream_state: s.stream,
    streaming_session_id: s.streamingSessionId,
    resolution: s.resolution,
    aspectratio: s.aspectratio,
    stream_started_at: s.streamStartedAt,
    stream_command_id: s.streamCommandId,
    recording_state: s.recording,
    recording_id: s.recordingId,
    recording_started_at: s.recordingStartedAt,
    recording_command_id: s.recordingCommandId,
  };
}

/** The session's stored stream state; undefined when it never had one (both idle). */
export async function readSnapshot(db: Kysely<Database>, sessionId: string) {
  const row = await db
    .selectFrom('session_streams')
    .selectAll()
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  return row ? toSnapshot(row) : undefined;
}

/** Snapshots of many sessions in one query; sessions without a row are absent (idle). */
export async function readSnapshots(db: Kysely<Database>, sessionIds: string[]) {
  const out = new Map<string, StreamSnapshot>();
  if (sessionIds.length === 0) return out;
  const rows = await db
    .selectFrom('session_streams')
    .selectAll()
    .where('session_id', 'in', sessionIds)
    .execute();
  for (const row of rows) out.set(row.session_id, toSnapshot(row));
  return out;
}

/** Creates the session's idle row unless it exists; safe when several transactions race to do it. */
export async function insertIdleRow(db: Kysely<Database>, sessionId: string, now: number) {
  await db
    .insertInto('session_streams')
    .values({ session_id: sessionId, stream_state: 'idle', recording_state: 'idle', updated_at: now })
    .onConflict((oc) => oc.column('session_id').doNothing())
    .execute();
}

/**
 * Compare-and-set: writes `next` only if the row still holds `expected` (states, ids and the
 * commands waited on). Returns whether it did; a concurrent change makes it false.
 */
export async function compareAndSet(
  db: Kysely<Database>,
  sessionId: string,
  expected: StreamSnapshot,
  next: StreamSnapshot,
  now: number,
) {
  const guards = [
    ['streaming_session_id', expected.streamingSessionId],
    ['stream_command_id', expected.streamCommandId],
    ['recording_id', expected.recordingId],
    ['recording_command_id', expected.recordingCommandId],
  ] as const;
  let q = db
    .updateTable('session_streams')
    .set({ ...toColumns(next), updated_at: now })
    .where('session_id', '=', sessionId)
    .where('stream_state', '=', expected.stream)
    .where('recording_state', '=', expected.recording);
  for (const [column, value] of guards)
    q = value === null ? q.where(column, 'is', null) : q.where(column, '=', value);
  const result = await q.executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export interface ActiveStream {
  sessionId: string;
  tenantId: string;
  stream: StreamState;
  streamingSessionId: string;
  startedAt: number;
}

/**
 * Streams that have started and not stopped (`streaming`, `stopping`), with their tenant, in
 * `(startedAt, streamingSessionId)` order from just after `after`: a keyset page.
 */
export function liveStreams(
  db: Kysely<Database>,
  limit: number,
  after?: Pick<ActiveStream, 'startedAt' | 'streamingSessionId'>,
): Promise<ActiveStream[]> {
  let q = db
    .selectFrom('session_streams as s')
    .innerJoin('stream_intervals as i', 'i.streaming_session_id', 's.streaming_session_id')
    .select([
      's.session_id as sessionId',
      'i.tenant_id as tenantId',
      's.stream_state as stream',
      'i.streaming_session_id as streamingSessionId',
      'i.started_at as startedAt',
    ])
    .where('s.stream_state', 'in', ['streaming', 'stopping'])
    .where('i.stopped_at', 'is', null);
  if (after) {
    q = q.where((eb) =>
      eb.or([
        eb('i.started_at', '>', after.startedAt),
        eb.and([
          eb('i.started_at', '=', after.startedAt),
          eb('i.streaming_session_id', '>', after.streamingSessionId),
        ]),
      ]),
    );
  }
  return q.orderBy('i.started_at').orderBy('i.streaming_session_id').limit(limit).execute() as Promise<
    ActiveStream[]
  >;
}

export interface NewInterval {
  streamingSessionId: string;
  sessionId: string;
  tenantId: string;
  playerId: string;
  startedAt: number;
}

export async function openInterval(db: Kysely<Database>, i: NewInterval) {
  await db
    .insertInto('stream_intervals')
    .values({
      streaming_session_id: i.streamingSessionId,
      session_id: i.sessionId,
      tenant_id: i.tenantId,
      player_id: i.playerId,
      started_at: i.startedAt,
      stopped_at: null,
      stop_reason: null,
    })
    .execute();
}

export async function closeInterval(
  db: Kysely<Database>,
  streamingSessionId: string,
  stoppedAt: number,
  reason: StopReason,
) {
  await db
    .updateTable('stream_intervals')
    .set({ stopped_at: stoppedAt, stop_reason: reason })
    .where('streaming_session_id', '=', streamingSessionId)
    .where('stopped_at', 'is', null)
    .execute();
}

export interface StreamInterval {
  streamingSessionId: string;
  sessionId: string;
  startedAt: number;
  /** Null while the stream runs. */
  stoppedAt: number | null;
  stopReason: string | null;
}

/** A player's streams overlapping `[from, to)`, oldest first (served by the `(tenant, player, started_at)` index). */
export function playerIntervals(
  db: Kysely<Database>,
  tenantId: string,
  playerId: string,
  from?: number,
  to?: number,
): Promise<StreamInterval[]> {
  let q = db
    .selectFrom('stream_intervals')
    .select([
      'streaming_session_id as streamingSessionId',
      'session_id as sessionId',
      'started_at as startedAt',
      'stopped_at as stoppedAt',
      'stop_reason as stopReason',
    ])
    .where('tenant_id', '=', tenantId)
    .where('player_id', '=', playerId);
  if (to !== undefined) q = q.where('started_at', '<', to);
  if (from !== undefined)
    q = q.where((eb) => eb.or([eb('stopped_at', 'is', null), eb('stopped_at', '>', from)]));
  return q.orderBy('started_at').orderBy('streaming_session_id').execute();
}

/** Deletes a session's stream state (its stream intervals stay: challenge progress counts them). */
export async function deleteSessionStreams(db: Kysely<Database>, sessionId: string) {
  await db.deleteFrom('session_streams').where('session_id', '=', sessionId).execute();
}

/**
 * Erasure (the players module): deletes these sessions' stream state and up to `limit` of their
 * stream intervals, in one transaction; how many rows went.
 */
export async function eraseSessionStreams(
  db: Kysely<Database>,
  owner: { tenantId: string; playerId: string },
  sessionIds: string[],
  limit: number,
) {
  if (sessionIds.length === 0) return 0;
  return db.transaction().execute(async (trx) => {
    const states = await trx
      .deleteFrom('session_streams')
      .where('session_id', 'in', sessionIds)
      .executeTakeFirst();
    const ids = (
      await trx
        .selectFrom('stream_intervals')
        .select('streaming_session_id')
        // Through `stream_intervals_player`: intervals have no index on their session.
        .where('tenant_id', '=', owner.tenantId)
        .where('player_id', '=', owner.playerId)
        .where('session_id', 'in', sessionIds)
        .limit(limit)
        .execute()
    ).map((r) => r.streaming_session_id);
    if (ids.length > 0)
      await trx.deleteFrom('stream_intervals').where('streaming_session_id', 'in', ids).execute();
    return Number(states.numDeletedRows) + ids.length;
  });
}
