import { uuidv7 } from 'uuidv7';
import type { Clock } from '../../clock.ts';
import type { Metrics } from '../../http/metrics.ts';
import type { Storage } from '../../storage/index.ts';
import { type EventRow, EventWriter, type IngestResult } from './ingest.ts';
import type { ValidEvent } from './validation.ts';

/** The session an event belongs to, as ingestion needs it. */
export interface EventTarget {
  sessionId: string;
  tenantId: string;
  /** The stream live at ingestion time: stamped on every event that has none of its own. */
  streamingSessionId: string | null;
}

export type EventSource = 'device' | 'tenant' | 'server';

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

function toRow(target: EventTarget, e: ValidEvent, receivedAt: number): EventRow {
  const body = eventBody(target, e);
  return {
    session_id: target.sessionId,
    event_id: e.id,
    event_type: e.eventType,
    timestamp: e.timestamp,
    streaming_session_id: typeof body.streamingSessionId === 'string' ? body.streamingSessionId : null,
    received_at: receivedAt,
    body: JSON.stringify(body),
  };
}

/** Ingestion (validated batches and server-emitted events) through one group-committing writer. */
export class EventsService {
  readonly writer: EventWriter;

  constructor(
    storage: Storage,
    private readonly clock: Clock,
    private readonly metrics: Metrics,
  ) {
    this.writer = new EventWriter(storage, metrics);
  }

  /** Stores a validated batch; resolves once it is durable. A device batch counts as device contact. */
  async ingest(target: EventTarget, events: ValidEvent[], source: EventSource): Promise<IngestResult> {
    const now = this.clock.now();
    const rows = events.map((e) => toRow(target, e, now));
    const result = await this.writer.write(
      target.tenantId,
      rows,
      source === 'device' ? { sessionId: target.sessionId, at: now } : null,
    );
    this.metrics.eventsIngested.inc({ source }, result.accepted);
    if (result.duplicates > 0) this.metrics.eventsDuplicate.inc(result.duplicates);
    return result;
  }

  /**
   * Stores an event the server emits itself (server id; server time unless the fact it reports
   * has its own time). Returns it as stored.
   */
  async emit(target: EventTarget, eventType: string, fields: Record<string, unknown>, at?: number) {
    const event: ValidEvent = { id: uuidv7(), eventType, timestamp: at ?? this.clock.now(), fields };
    await this.ingest(target, [event], 'server');
    return eventBody(target, event);
  }
}
