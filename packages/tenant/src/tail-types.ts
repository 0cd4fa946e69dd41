/**
 * The live tail's messages (CONTRACT §11), written by hand: the stream is `text/event-stream`, which the
 * OpenAPI document describes only as a string.
 */

/** A stored event as `GET /sessions/{SessionId}` returns it: its type's fields beside these. */
export interface TailEvent {
  id: string;
  eventType: string;
  sessionId: string;
  /** Milliseconds since the epoch, as the device stamped it. */
  timestamp: number;
  [field: string]: unknown;
}

export const PRESENCE_KINDS = [
  'session.started',
  'session.ended',
  'device.connected',
  'device.disconnected',
] as const;
export type PresenceKind = (typeof PRESENCE_KINDS)[number];

/** A presence change: live only, it carries no id and is not replayed on resume. */
export interface PresenceData {
  sessionId: string;
  playerId: string;
  tenantCohortId: string | null;
  /** Milliseconds since the epoch. */
  at: number;
}

/** A stored event: `id` is the stream's opaque cursor (what `lastEventId` takes). */
export interface TailEventMessage {
  kind: 'event';
  id: string;
  eventType: string;
  event: TailEvent;
}

export interface TailPresenceMessage {
  kind: PresenceKind;
  data: PresenceData;
}

export type TailMessage = TailEventMessage | TailPresenceMessage;

/** What to follow: one session, one cohort, or (empty) the whole tenant. */
export type TailTarget = { sessionId: string } | { tenantCohortId: string } | Record<string, never>;

export interface TailOptions {
  /** Only these event types and presence kinds (`Health`, `Error`, `session.started`, …). Default: all. */
  eventTypes?: readonly string[];
  /** Resume after this id (a `TailEventMessage.id` received earlier): no gap, no repeat, up to 24 h back. */
  lastEventId?: string;
  /** Aborting ends the iterator (it returns; no error). */
  signal?: AbortSignal;
  /** Backoff between reconnects: the first wait (default the server's `retry:`, 1 s) doubles up to this (default 30 s). */
  maxRetryMs?: number;
  /** A connection silent this long (no event, no keep-alive comment) is taken as dead (default 45 s). */
  idleTimeoutMs?: number;
  /** Called each time the stream is open (a 200 answer), before its first message. */
  onOpen?(info: { lastEventId: string | undefined }): void;
  /** Called before each reconnect, with the error that ended the last connection and the wait. */
  onReconnect?(info: {
    attempt: number;
    delayMs: number;
    lastEventId: string | undefined;
    error: unknown;
  }): void;
}

/** A refusal of the stream (a 4xx other than a 401 a fresh token did not cure): the iterator throws it. */
export class TailError extends Error {
  constructor(
    readonly status: number,
    /** The problem document (`{code, detail, …}`), or whatever the body was. */
    readonly problem: { code?: string; detail?: string; [key: string]: unknown },
  ) {
    super(
      `tail refused (${status}${problem.code ? ` ${problem.code}` : ''}): ${problem.detail ?? 'no detail'}`,
    );
    this.name = 'TailError';
  }

  get code(): string | undefined {
    return this.problem.code;
  }
}
