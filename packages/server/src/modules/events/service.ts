import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Metrics } from '../../http/metrics.ts';
import { problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import type { Database, Storage } from '../../storage/index.ts';
import {
  type EventRow,
  EventWriter,
  type IngestResult,
  type SessionEndHandler,
  type StoredGroup,
} from './ingest.ts';
import * as store from './store.ts';
import { type ValidEvent, validateEventBatch } from './validation.ts';

/** The session an event belongs to, as ingestion needs it. */
export interface EventSession {
  sessionId: string;
  tenantId: string;
  tenantCohortId: string | null;
}

/** A session plus the stream live at ingestion time, stamped on every event that has none of its own. */
export interface EventTarget extends EventSession {
  streamingSessionId: string | null;
}

export type EventSource = 'device' | 'tenant' | 'server';

/** Work done inside the transaction that stores a group of events (lastSeenAt, the webhook outbox). */
export type StoredHook = (trx: Kysely<Database>, group: StoredGroup) => Promise<void>;

/**
 * Where ingestion learns the stream live in a session: read through `db` when given (the caller's
 * transaction, for a server-emitted event), else through the store.
 */
export type StreamResolver = (sessionId: string, db?: Kysely<Database>) => Promise<string | null>;

/** The event as stored and returned: common fields first, then the type's own fields. */
export function eventBody(target: EventTarget, e: ValidEvent): Record<string, unknown> {
  const body: Record<string, unknown> = {
    id: e.id,
    sessionId: target.sessionId,
    eventType: e.eventType,
    timestamp: e.timestamp,
    ...e.fields,
  };
  if (target.streamingSessionId !== null && body.streamingSessionId === undefined) {
    body.streamingSessionId = target.streamingSessionId;
  }
  return body;
}

/** The row an event is stored as (its body as the client wrote it when `e.text` is known). */
export function toRow(target: EventTarget, e: ValidEvent, receivedAt: number): EventRow {
  const own = e.fields.streamingSessionId;
  // The stream live at ingestion is stamped on an event that names none of its own.
  const stamped = own === undefined ? target.streamingSessionId : null;
  const stream = own === undefined ? stamped : own;
  return {
    session_id: target.sessionId,
    event_id: e.id,
    event_type: e.eventType,
    timestamp: e.timestamp,
    streaming_session_id: typeof stream === 'string' ? stream : null,
    received_at: receivedAt,
    body: e.text === undefined ? JSON.stringify(eventBody(target, e)) : bodyFromText(target, e.text, stamped),
    fields: e.fields,
  };
}

/**
 * The stored body of an event taken as the client wrote it (`ValidEvent.text`): the session id first,
 * then the event's own text, then the stamped stream if there is one. The same members as
 * `eventBody`, in the client's order.
 */
function bodyFromText(target: EventTarget, text: string, stamped: string | null): string {
  const head = `{"sessionId":${JSON.stringify(target.sessionId)},`;
  if (stamped === null) return head + text.slice(1);
  return `${head}${text.slice(1, -1)},"streamingSessionId":${JSON.stringify(stamped)}}`;
}

export interface EventsOptions {
  maxEventsPerBatch: number;
}

/**
 * Events: validation, group-committed ingestion and queries. What other modules add to ingestion is
 * registered by the wiring (`wire.ts`), not reached for: the stream to stamp (`streamOf`), work in
 * the ingestion transaction (`onStored`), and what a device's `SessionEnd` does (`onSessionEndEvent`).
 */
export class EventsService {
  private readonly writer: EventWriter;
  private streamOf: StreamResolver = async () => null;
  private readonly ingested: (() => void)[] = [];

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly metrics: Metrics,
    private readonly options: EventsOptions,
  ) {
    this.writer = new EventWriter(storage, metrics);
  }

  /** Where ingestion learns the stream live in a session. */
  resolveStreamWith(streamOf: StreamResolver) {
    this.streamOf = streamOf;
  }

  /** Adds work to every ingestion transaction. */
  onStored(hook: StoredHook) {
    this.writer.addHook(hook);
  }

  /**
   * How busy ingestion's group commit has been lately, 0 to 1: near 1 while requests queue for the
   * store back to back (a flood), low under a load it keeps up with. Background writers give way.
   */
  ingestionLoad(): number {
    return this.writer.utilization();
  }

  /** Called once a batch ingested by this process has committed (the live tail reads it then). */
  onIngested(listener: () => void) {
    this.ingested.push(listener);
  }

  /**
   * A device's `SessionEnd` event is the session's end: `handler` runs in the transaction that stores
   * the event (both are written or neither); what it returns runs after the commit, before the answer.
   */
  onSessionEndEvent(handler: SessionEndHandler) {
    this.writer.addSessionEndHandler(handler);
  }

  /**
   * Validates and stores one batch for a session — the same rules over HTTP and over the device's
   * socket. Throws a problem (nothing stored) for a bad batch. `text`: the body's JSON as received,
   * when known (events are then stored as written, not serialized again).
   */
  async ingestBatch(
    session: EventSession,
    body: unknown,
    source: Exclude<EventSource, 'server'>,
    text?: string,
  ) {
    const checked = validateEventBatch(
      body,
      { sessionId: session.sessionId, now: this.clock.now(), maxEvents: this.options.maxEventsPerBatch },
      text,
    );
    if (!checked.ok) {
      const first = checked.errors[0];
      const more = checked.errors.length > 1 ? ` (and ${checked.errors.length - 1} more)` : '';
      const detail = `The event batch was rejected, nothing was stored: ${first?.path ?? 'events'} ${first?.message ?? 'is invalid'}${more}.`;
      throw problems.eventBatchRejected(checked.code, detail, checked.errors);
    }
    // A device's SessionEnd ends the session in the transaction that stores it.
    const end = source === 'device' ? checked.events.find((e) => e.eventType === 'SessionEnd') : undefined;
    const endsSession = end ? (typeof end.fields.reason === 'string' ? end.fields.reason : 'device') : null;
    return this.ingest(await this.target(session), checked.events, source, endsSession);
  }

  /**
   * Stores validated events; resolves once they are durable (and, for a batch that ends its session,
   * once the end is announced). A device batch counts as device contact.
   */
  async ingest(
    target: EventTarget,
    events: ValidEvent[],
    source: EventSource,
    endsSession: string | null = null,
  ): Promise<IngestResult> {
    const now = this.clock.now();
    const { afterCommit, ...result } = await this.writer.write({
      session: target,
      rows: events.map((e) => toRow(target, e, now)),
      touch: source === 'device' ? { sessionId: target.sessionId, at: now } : null,
      endsSession,
    });
    this.count(source, result);
    if (result.accepted > 0) for (const listener of this.ingested) listener();
    for (const after of afterCommit) await after();
    return result;
  }

  /**
   * Stores an event the server emits itself inside `trx`, the transaction that writes the state
   * change it reports: the event, its outbox rows (every `onStored` hook runs) and the change commit
   * together or not at all. Server id (UUIDv7), server time unless the fact has its own (`at`),
   * stamped with the stream live in `trx` unless its fields name one. Returns it as stored.
   */
  async emitIn(
    trx: Kysely<Database>,
    session: EventSession,
    eventType: string,
    fields: Record<string, unknown>,
    at?: number,
  ) {
    const now = this.clock.now();
    const event: ValidEvent = { id: uuidv7(), eventType, timestamp: at ?? now, fields };
    const target =
      typeof fields.streamingSessionId === 'string'
        ? { ...session, streamingSessionId: null }
        : await this.target(session, trx);
    const [result] = await this.writer.writeIn(trx, [
      { session: target, rows: [toRow(target, event, now)], touch: null },
    ]);
    // Counted before the caller's commit: a transaction that rolls back afterwards over-counts by one.
    this.count('server', result);
    return eventBody(target, event);
  }

  /** `emitIn` in a transaction of its own, for an event that reports no state change of the caller's. */
  emit(session: EventSession, eventType: string, fields: Record<string, unknown>, at?: number) {
    return this.storage.db.transaction().execute((trx) => this.emitIn(trx, session, eventType, fields, at));
  }

  private count(source: EventSource, result: IngestResult) {
    this.metrics.eventsIngested.inc({ source }, result.accepted);
    if (result.duplicates > 0) this.metrics.eventsDuplicate.inc(result.duplicates);
  }

  private async target(session: EventSession, db?: Kysely<Database>): Promise<EventTarget> {
    return { ...session, streamingSessionId: await this.streamOf(session.sessionId, db) };
  }

  /** A session's stored event bodies (JSON text), ordered by timestamp then id, page by page. */
  /** A session's events as stored JSON text, a page (up to 2,000) at a time, in order. */
  sessionEventPages(sessionId: string) {
    return store.sessionEventPages(this.storage.db, sessionId);
  }

  /** Erasure (the players module): deletes up to `limit` events of these sessions; how many went. */
  eraseSessions(sessionIds: string[], limit: number): Promise<number> {
    return store.eraseSessionEvents(this.storage.db, sessionIds, limit);
  }

  /** A session's events as stored JSON text, one at a time, in order. */
  async *sessionEventBodies(sessionId: string) {
    for await (const page of this.sessionEventPages(sessionId)) yield* page;
  }

  /** One page of a session's events, filtered; `after` is a cursor from the previous page. */
  async page(
    sessionId: string,
    q: Omit<store.EventQuery, 'after' | 'limit'> & { after?: string; limit: number },
  ) {
    const after = q.after === undefined ? undefined : store.decodeCursor(q.after);
    if (after === null) {
      throw problems.validation('`after` is not a cursor this server issued.', [
        { path: 'query.after', message: 'is not a valid cursor' },
      ]);
    }
    const rows = await store.queryEvents(this.storage.db, sessionId, { ...q, after, limit: q.limit + 1 });
    const hasMore = rows.length > q.limit;
    const page = hasMore ? rows.slice(0, q.limit) : rows;
    const last = page[page.length - 1];
    const nextCursor =
      hasMore && last ? store.encodeCursor({ timestamp: last.timestamp, id: last.event_id }) : null;
    return { bodies: page.map((r) => r.body), nextCursor, hasMore };
  }
}
