import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database, VisibleOrder } from '../../storage/index.ts';
import type { TailCursor } from './cursor.ts';

/** An event as the tail sends it, with what routing it to readers needs. */
export interface TailRow {
  cursor: TailCursor;
  sessionId: string;
  eventType: string;
  tenantId: string;
  tenantCohortId: string | null;
  /** The stored event JSON (as `GET /sessions/{id}` returns it). */
  body: string;
}

/** Which events a reader takes. */
export interface TailScope {
  tenantId: string;
  sessionId?: string;
  tenantCohortId?: string;
  eventTypes?: readonly string[];
}

/** `(seq, session, event) > c` (or `<=` with `upTo`), written so the seq range bounds the scan. */
function compare(d: VisibleOrder, c: TailCursor, op: '>' | '<='): RawBuilder<boolean> {
  if (!d.ties || c.sessionId === null) return sql<boolean>`${d.seq} ${sql.raw(op)} ${c.seq}`;
  const key = sql`(e.session_id collate "C", e.event_id collate "C")`;
  const at = sql`(${c.sessionId}, ${c.eventId})`;
  return op === '>'
    ? sql<boolean>`${d.seq} >= ${c.seq} and (${d.seq} > ${c.seq} or ${key} > ${at})`
    : sql<boolean>`${d.seq} <= ${c.seq} and (${d.seq} < ${c.seq} or ${key} <= ${at})`;
}

/** The tail's reads of the events table, in the store's visible order (`Storage.visibleOrder`). */
export class TailStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly d: VisibleOrder,
  ) {}

  /** The position of "now": a reader starting here gets every event that becomes final from now on. */
  async head(): Promise<TailCursor> {
    return { seq: await this.d.head(this.db), sessionId: null, eventId: null };
  }

  /**
   * Final events after `after` in the visible order, at most `limit`; only up to `upTo`, only of
   * `scope`, only received since `since` when given.
   */
  async read(
    after: TailCursor,
    limit: number,
    options: { upTo?: TailCursor; scope?: TailScope; since?: number } = {},
  ): Promise<TailRow[]> {
    const d = this.d;
    const { upTo, scope, since } = options;
    const conditions: RawBuilder<unknown>[] = [compare(d, after, '>')];
    if (d.final) conditions.push(d.final);
    if (upTo) conditions.push(compare(d, upTo, '<='));
    if (since !== undefined) conditions.push(sql`e.received_at >= ${since}`);
    if (scope) {
      conditions.push(sql`s.tenant_id = ${scope.tenantId}`);
      if (scope.sessionId !== undefined) conditions.push(sql`e.session_id = ${scope.sessionId}`);
      if (scope.tenantCohortId !== undefined)
        conditions.push(sql`s.tenant_cohort_id = ${scope.tenantCohortId}`);
      if (scope.eventTypes?.length) {
        conditions.push(sql`e.event_type in (${sql.join(scope.eventTypes.map((t) => sql`${t}`))})`);
      }
    }
    const order = d.ties ? sql`${d.seq}, e.session_id collate "C", e.event_id collate "C"` : d.seq;
    const { rows } = await sql<{
      seq: number | string;
      session_id: string;
      event_id: string;
      event_type: string;
      body: string;
      tenant_id: string;
      tenant_cohort_id: string | null;
    }>`select ${d.seq} as seq, e.session_id, e.event_id, e.event_type, e.body, s.tenant_id, s.tenant_cohort_id
       from events e join sessions s on s.session_id = e.session_id
       where ${sql.join(conditions, sql` and `)}
       order by ${order} limit ${limit}`.execute(this.db);
    return rows.map((r) => ({
      cursor: d.ties
        ? { seq: Number(r.seq), sessionId: r.session_id, eventId: r.event_id }
        : { seq: Number(r.seq), sessionId: null, eventId: null },
      sessionId: r.session_id,
      eventType: r.event_type,
      tenantId: r.tenant_id,
      tenantCohortId: r.tenant_cohort_id,
      body: r.body,
    }));
  }
}
