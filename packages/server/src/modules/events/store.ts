import type { Kysely } from 'kysely';
import type { Database } from '../../storage/index.ts';

export interface EventCursor {
  timestamp: number;
  id: string;
}

export function encodeCursor(c: EventCursor): string {
  return Buffer.from(JSON.stringify([c.timestamp, c.id])).toString('base64url');
}

export function decodeCursor(raw: string): EventCursor | null {
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === 'string') {
      return { timestamp: v[0], id: v[1] };
    }
  } catch {
    // fall through
  }
  return null;
}

export interface EventQuery {
  eventType?: string;
  from?: number;
  to?: number;
  after?: EventCursor;
  limit: number;
}

/** One page of a session's events, ordered by timestamp then id (keyset pagination). */
export async function queryEvents(db: Kysely<Database>, sessionId: string, q: EventQuery) {
  let query = db
    .selectFrom('events')
    .select(['timestamp', 'event_id', 'body'])
    .where('session_id', '=', sessionId);
  if (q.eventType !== undefined) query = query.where('event_type', '=', q.eventType);
  if (q.from !== undefined) query = query.where('timestamp', '>=', q.from);
  if (q.to !== undefined) query = query.where('timestamp', '<', q.to);
  const after = q.after;
  if (after) {
    // `timestamp >= t` alone bounds the index range at the cursor (the page costs its size, not the
    // events before it); the rest skips the events of that millisecond already seen.
    query = query
      .where('timestamp', '>=', after.timestamp)
      .where((eb) =>
        eb.or([
          eb('timestamp', '>', after.timestamp),
          eb.and([eb('timestamp', '=', after.timestamp), eb('event_id', '>', after.id)]),
        ]),
      );
  }
  return query.orderBy('timestamp').orderBy('event_id').limit(q.limit).execute();
}

/**
 * Every event of a session as stored JSON text, page by page (each page one read of the index from
 * the cursor on), so that a session with millions of events is streamed to the client without being
 * held in memory, and written a page at a time rather than an event at a time.
 */
export async function* sessionEventPages(db: Kysely<Database>, sessionId: string, pageSize = 2000) {
  let after: EventCursor | undefined;
  for (;;) {
    const rows = await queryEvents(db, sessionId, { after, limit: pageSize });
    if (rows.length > 0) yield rows.map((r) => r.body);
    if (rows.length < pageSize) return;
    const last = rows[rows.length - 1];
    after = { timestamp: last.timestamp, id: last.event_id };
  }
}

/**
 * Erasure (the players module): deletes up to `limit` events of these sessions, in one transaction
 * (the keys read, then deleted through the primary key); how many went.
 */
export async function eraseSessionEvents(db: Kysely<Database>, sessionIds: string[], limit: number) {
  if (sessionIds.length === 0) return 0;
  return db.transaction().execute(async (trx) => {
    const keys = await trx
      .selectFrom('events')
      .select(['session_id', 'event_id'])
      .where('session_id', 'in', sessionIds)
      .limit(limit)
      .execute();
    const bySession = new Map<string, string[]>();
    for (const k of keys) {
      const ids = bySession.get(k.session_id) ?? [];
      ids.push(k.event_id);
      bySession.set(k.session_id, ids);
    }
    for (const [sessionId, eventIds] of bySession)
      await trx
        .deleteFrom('events')
        .where('session_id', '=', sessionId)
        .where('event_id', 'in', eventIds)
        .execute();
    return keys.length;
  });
}
