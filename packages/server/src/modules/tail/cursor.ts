/**
 * A position in the order events became visible (migration 012): `seq` is the event's rowid on SQLite
 * and its writing transaction on PostgreSQL, where many events share one; `sessionId`/`eventId` order
 * those. A position without them stands after every event of `seq` (a reader starting "now").
 */
export interface TailCursor {
  seq: number;
  sessionId: string | null;
  eventId: string | null;
}

export const START: TailCursor = { seq: 0, sessionId: null, eventId: null };

/** The SSE `id:` of an event: opaque to clients, base64url (no newline can reach the stream). */
export function encodeTailCursor(c: TailCursor): string {
  const parts = c.sessionId === null ? [c.seq] : [c.seq, c.sessionId, c.eventId];
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

/** A `Last-Event-ID` sent back to us, or null when it is not one of ours. */
export function decodeTailCursor(raw: string): TailCursor | null {
  if (raw.length === 0 || raw.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(raw)) return null;
  try {
    const v: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || !Number.isSafeInteger(v[0]) || v[0] < 0) return null;
    if (v.length === 1) return { seq: v[0], sessionId: null, eventId: null };
    if (v.length === 3 && typeof v[1] === 'string' && typeof v[2] === 'string') {
      return { seq: v[0], sessionId: v[1], eventId: v[2] };
    }
  } catch {
    // not JSON
  }
  return null;
}

export function sameCursor(a: TailCursor, b: TailCursor): boolean {
  return a.seq === b.seq && a.sessionId === b.sessionId && a.eventId === b.eventId;
}

/**
 * Orders two positions as the store does: by `seq`, then (PostgreSQL's ties) session and event id
 * byte by byte; a position without ids stands after every event of its `seq`.
 */
export function compareCursors(a: TailCursor, b: TailCursor): number {
  if (a.seq !== b.seq) return a.seq < b.seq ? -1 : 1;
  if (a.sessionId === null || b.sessionId === null) {
    return (a.sessionId === null ? 1 : 0) - (b.sessionId === null ? 1 : 0);
  }
  return (
    Buffer.compare(Buffer.from(a.sessionId), Buffer.from(b.sessionId)) ||
    Buffer.compare(Buffer.from(a.eventId ?? ''), Buffer.from(b.eventId ?? ''))
  );
}
