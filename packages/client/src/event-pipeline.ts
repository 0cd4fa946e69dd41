import { DEFAULT_MAX_EVENTS_PER_BATCH } from '@liveline/protocol';
import { backoffDelay, MAX_TIMER_MS, type RetryOptions } from './backoff.ts';
import { type EventBufferStorage, keyMaker, type StoredEvent } from './buffer-storage.ts';
import type { ClientEvent, StampedEvent } from './events.ts';
import { type Clock, closedError, type HttpClient, LivelineError } from './http.ts';
import type { SocketBatchAnswer } from './realtime.ts';
import { type EventRejection, refusedEvents } from './refusals.ts';
import { type EventBatchResult, sessionPath } from './session.ts';

/** Counters since construction. `sent + dropped + rejected + buffered` = events tracked. */
export interface DeviceStats {
  /** Events in batches the server answered 200 (including `duplicates`). */
  sent: number;
  /** Events the server already had (a resend after a lost response). */
  duplicates: number;
  /** Events dropped because the buffer was full. */
  dropped: number;
  /** Events the server refused permanently (a 4xx): bad events of a batch, or whole batches. */
  rejected: number;
  /** Events waiting in the buffer, including a batch in flight. */
  buffered: number;
  /** Batch resends after retryable failures. */
  retries: number;
}

export interface DeviceErrorEvent {
  error: LivelineError;
  /**
   * The events the SDK dropped, in order: only the bad ones when the server named each of them (the
   * rest of the batch is resent), else the whole batch. Empty when nothing was dropped (401/403).
   */
  rejectedEvents: StampedEvent[];
  /** `rejectedEvents` again, each with the server's complaints about it (paths relative to the event). */
  rejections: EventRejection[];
}

/** The realtime channel as the pipeline uses it: batches go over it while it is welcomed to the session. */
export interface EventSocket {
  readonly welcome: { sessionId: string } | null;
  sendEvents(events: StampedEvent[], timeoutMs: number, signal: AbortSignal): Promise<SocketBatchAnswer>;
}

export interface EventPipelineOptions {
  http: HttpClient;
  socket: EventSocket;
  /** Source of the timestamps of events tracked without one. */
  clock: Clock;
  random: () => number;
  retry: RetryOptions;
  /** Events per request, 1–1000 (the server's batch limit). */
  batchSize: number;
  /** Longest time a tracked event waits before a flush starts. */
  flushIntervalMs: number;
  /** Buffer capacity; beyond it the oldest events not in flight are dropped. */
  maxBufferedEvents: number;
  /** Bounds the wait for an `events.ack`. */
  requestTimeoutMs: number;
  /** Send batches over the socket while it is welcomed. */
  eventsOverSocket: boolean;
  /**
   * JSON characters the buffer may hold (each event counted as `JSON.stringify(event).length`); beyond
   * it the oldest events not in flight are dropped. Infinity: no bound but `maxBufferedEvents`.
   */
  maxBufferedBytes: number;
  /** A copy of the buffer that outlives the process (`buffer-storage.ts`); null: memory only. */
  storage: EventBufferStorage | null;
  /** Aborted when the device closes: cancels the request in flight and any backoff sleep. */
  closing: AbortSignal;
  /** The session batches are sent to; null while there is none (events wait in the buffer). */
  sessionId(): string | null;
  /** Refused events (dropped) and auth failures (sending paused). */
  reportError(event: DeviceErrorEvent): void;
  /** Events dropped because the buffer was full, oldest first. */
  reportDropped(event: DroppedEvents): void;
}

/** What `on('dropped')` reports: events the buffer had no room for (they are gone). */
export interface DroppedEvents {
  /** The dropped events, oldest first. */
  events: StampedEvent[];
  /** Which bound was exceeded. */
  reason: 'maxBufferedEvents' | 'maxBufferedBytes';
}

interface Buffered {
  /**
   * Tracking order, so `flush()` knows when everything tracked before it has left the buffer (0 for
   * what a previous run left).
   */
  seq: number;
  event: StampedEvent;
  /** The session it goes to: current when tracked, else the next one started (null until then). */
  sessionId: string | null;
  /** Its key in the storage ('' without one). */
  key: string;
  /** `JSON.stringify(event).length` when `maxBufferedBytes` is finite, else 0. */
  bytes: number;
}

interface FlushWaiter {
  through: number;
  resolve(): void;
  reject(error: LivelineError): void;
}

type BatchOutcome =
  | { kind: 'sent' }
  | { kind: 'rejected'; error: LivelineError }
  | { kind: 'tooLarge' }
  | { kind: 'halted'; error: LivelineError }
  | { kind: 'closed' };

/**
 * The device's events on their way to the server.
 *
 * Events go into an in-memory buffer and leave it in order, one batch in flight at a time. A batch
 * that fails in a retryable way is resent unchanged (same ids, so the server deduplicates) until it
 * succeeds. When the server refuses a batch (4xx), the events it names are dropped and the rest of the
 * batch is resent; when it names none (or blames the batch as a whole), the whole batch is dropped.
 * Dropped events are reported through `reportError`. A 401/403 pauses sending, keeping the events,
 * until `resume()` (a new token).
 */
export class EventPipeline {
  private readonly options: EventPipelineOptions;
  private readonly batchSize: number;
  private buffer: Buffered[] = [];
  /**
   * The first `inFlight` buffered events are the batch being sent (and what is left of it after a
   * partial refusal or a 413); overflow never drops them.
   */
  private inFlight = 0;
  private lastSeq = 0;
  /** Partial batches are sent while the oldest buffered event has `seq <= drainThrough`. */
  private drainThrough = 0;
  private waiters: FlushWaiter[] = [];
  private pumping = false;
  private pumpDone: Promise<void> = Promise.resolve();
  /** Set by a 401/403: sending pauses, keeping the events, until `resume()`. */
  private haltedBy: LivelineError | null = null;
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  /** Ends the current backoff sleep early (the realtime channel came back). */
  private wakeSleep: (() => void) | null = null;
  private readonly counters = { sent: 0, duplicates: 0, dropped: 0, rejected: 0, retries: 0 };
  private bytes = 0;
  private readonly storage: EventBufferStorage | null;
  private readonly nextKey = keyMaker();
  /** Until the storage's leftovers are in the buffer, nothing is sent and nothing written. */
  private loading: Promise<void> | null = null;

  constructor(options: EventPipelineOptions) {
    const { batchSize, maxBufferedEvents } = options;
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > DEFAULT_MAX_EVENTS_PER_BATCH) {
      throw new RangeError(`batchSize must be an integer from 1 to ${DEFAULT_MAX_EVENTS_PER_BATCH}`);
    }
    if (!Number.isInteger(maxBufferedEvents) || maxBufferedEvents < batchSize) {
      throw new RangeError('maxBufferedEvents must be an integer no smaller than batchSize');
    }
    if (!(options.maxBufferedBytes > 0)) throw new RangeError('maxBufferedBytes must be positive');
    this.options = options;
    this.batchSize = batchSize;
    this.storage = options.storage;
    if (this.storage) this.loading = this.load(this.storage);
  }

  /**
   * Puts what the previous run left before whatever was tracked meanwhile (seq 0: older than any
   * flush), then writes what was tracked meanwhile and starts sending. A storage that cannot be read
   * is reported and the buffer stays in memory.
   */
  private async load(storage: EventBufferStorage): Promise<void> {
    let left: StoredEvent[] = [];
    try {
      left = await storage.load();
    } catch (error) {
      this.reportStorageError(error);
    }
    const loaded = left.map(({ key, sessionId, event }) => this.entry(0, event, sessionId, key));
    for (const entry of loaded) this.bytes += entry.bytes;
    const tracked = this.buffer;
    this.buffer = [...loaded, ...tracked];
    storage.add(tracked.map(({ key, sessionId, event }) => ({ key, sessionId, event })));
    this.loading = null;
    const sessionId = this.options.sessionId();
    if (sessionId) this.bind(sessionId);
    this.dropOverflow();
    this.start();
  }

  private reportStorageError(cause: unknown): void {
    const detail = cause instanceof Error ? cause.message : String(cause);
    this.options.reportError({
      error: new LivelineError({ status: 0, code: 'storage_failed', detail }),
      rejectedEvents: [],
      rejections: [],
    });
  }

  private entry(seq: number, event: StampedEvent, sessionId: string | null, key: string): Buffered {
    const bytes = Number.isFinite(this.options.maxBufferedBytes) ? JSON.stringify(event).length : 0;
    return { seq, event, sessionId, key, bytes };
  }

  /** Every event still without a session goes to `sessionId`. */
  private bind(sessionId: string): void {
    const last = this.buffer.at(-1);
    if (!last || last.sessionId !== null) return;
    for (const entry of this.buffer) if (entry.sessionId === null) entry.sessionId = sessionId;
    if (!this.loading) this.storage?.bindUnbound(sessionId);
  }

  /** Entries left the buffer: their bytes and their copies in the storage go. */
  private forget(entries: readonly Buffered[]): void {
    if (entries.length === 0) return;
    for (const entry of entries) this.bytes -= entry.bytes;
    if (this.storage && !this.loading) this.storage.remove(entries.map(({ key }) => key));
  }

  private get closed(): boolean {
    return this.options.closing.aborted;
  }

  /** Buffers an event, filling `id` and `timestamp` when absent; returns the event as it will be sent. */
  track(event: ClientEvent): StampedEvent {
    const stamped: StampedEvent = {
      ...event,
      id: event.id ?? crypto.randomUUID(),
      timestamp: event.timestamp ?? this.options.clock.now(),
    };
    const entry = this.entry(
      ++this.lastSeq,
      stamped,
      this.options.sessionId(),
      this.storage ? this.nextKey() : '',
    );
    this.buffer.push(entry);
    this.bytes += entry.bytes;
    if (this.storage && !this.loading) {
      this.storage.add([{ key: entry.key, sessionId: entry.sessionId, event: entry.event }]);
    }
    this.dropOverflow();
    if (this.buffer.length - this.inFlight >= this.batchSize) this.kick();
    this.armTimer();
    return { ...stamped };
  }

  /**
   * Sends every event tracked so far, partial batches included. Resolves once they have all left the
   * buffer (sent, or dropped as reported by `stats()`); rejects if the device is closed first, if there
   * is no session to send to, or on a 401/403.
   */
  flush(): Promise<void> {
    if (this.closed) return Promise.reject(closedError());
    if (this.loading) return this.loading.then(() => this.flush());
    if (this.buffer.length === 0) return Promise.resolve();
    if (this.buffer.at(-1)?.sessionId === null) {
      return Promise.reject(
        new LivelineError({ status: 0, code: 'no_session', detail: 'Start a session before flushing.' }),
      );
    }
    if (this.haltedBy) return Promise.reject(this.haltedBy);
    const through = this.lastSeq;
    this.drainThrough = through;
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ through, resolve, reject }));
    this.kick();
    return done;
  }

  /**
   * There is a session to send to now: events tracked without one go to it, full batches go, and the
   * flush timer runs for the rest.
   */
  start(): void {
    const sessionId = this.options.sessionId();
    if (sessionId) this.bind(sessionId);
    this.kick();
    this.armTimer();
  }

  /** After a new token: sending paused by a 401/403 starts again. */
  resume(): void {
    if (!this.haltedBy) return;
    this.haltedBy = null;
    this.start();
  }

  /** The realtime channel is back: whatever waited in the buffer goes now, over the socket. */
  drain(): void {
    this.drainThrough = this.lastSeq;
    this.wakeSleep?.();
    this.kick();
  }

  /** After the `closing` signal was aborted: stops the flush timer and rejects pending flushes. */
  stop(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    this.settleWaiters(closedError());
  }

  /**
   * Resolves once the send loop has stopped; after `stop()`, the batch in flight has given up and the
   * buffer is exactly what `pendingEvents()` shows.
   */
  idle(): Promise<void> {
    return this.pumpDone;
  }

  /** After `stop()` and `idle()`: the storage writes what is left and is released. */
  async release(): Promise<void> {
    if (!this.storage) return;
    await this.loading;
    try {
      await this.storage.close();
    } catch (error) {
      this.reportStorageError(error);
    }
  }

  /** The buffered events, oldest first. */
  pendingEvents(): StampedEvent[] {
    return this.buffer.map(({ event }) => ({ ...event }));
  }

  stats(): DeviceStats {
    return { ...this.counters, buffered: this.buffer.length };
  }

  /**
   * Drop-oldest: fresh data (health, the latest progress) matters more to a live view than the oldest.
   * The batch in flight is never dropped. What goes is counted and reported (`reportDropped`).
   */
  private dropOverflow(): void {
    const excess = this.buffer.length - this.options.maxBufferedEvents;
    if (excess > 0) this.drop(this.buffer.splice(this.inFlight, excess), 'maxBufferedEvents');
    const { maxBufferedBytes } = this.options;
    if (this.bytes > maxBufferedBytes && this.buffer.length > this.inFlight) {
      let count = 0;
      let freed = 0;
      while (this.inFlight + count < this.buffer.length && this.bytes - freed > maxBufferedBytes) {
        freed += this.buffer[this.inFlight + count].bytes;
        count++;
      }
      this.drop(this.buffer.splice(this.inFlight, count), 'maxBufferedBytes');
    }
  }

  private drop(entries: Buffered[], reason: DroppedEvents['reason']): void {
    if (entries.length === 0) return;
    this.counters.dropped += entries.length;
    this.forget(entries);
    this.settleWaiters();
    this.options.reportDropped({ events: entries.map(({ event }) => ({ ...event })), reason });
  }

  private armTimer(): void {
    if (this.flushTimer || this.haltedBy || this.closed || this.loading) return;
    if (this.buffer.length === this.inFlight || this.buffer[0]?.sessionId === null) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.drainThrough = this.lastSeq;
      this.kick();
    }, this.options.flushIntervalMs);
  }

  /** Starts the send loop unless it is running (it then picks up new work itself) or cannot run. */
  private kick(): void {
    if (this.pumping || this.haltedBy || this.closed || this.loading) return;
    if (this.buffer[0]?.sessionId == null) return;
    this.pumping = true;
    this.pumpDone = this.pump();
  }

  /** Sends batches in order, one at a time: full ones always, partial ones while a drain is asked for. */
  private async pump(): Promise<void> {
    let size = this.batchSize;
    /**
     * How many events at the front of the buffer are left of a batch the server refused in part or
     * found too large (413). They are sent next, at once and without newer events.
     */
    let owed = 0;
    try {
      while (!this.haltedBy && !this.closed && this.buffer.length > 0) {
        const sessionId = this.buffer[0].sessionId;
        if (!sessionId) break;
        // A batch is the oldest events that go to the same session.
        let run = 1;
        while (run < this.batchSize && this.buffer[run]?.sessionId === sessionId) run++;
        if (owed === 0 && this.buffer[0].seq > this.drainThrough && run < this.batchSize) break;
        const batch = this.buffer
          .slice(0, owed > 0 ? Math.min(size, owed) : Math.min(size, run))
          .map(({ event }) => event);
        this.inFlight = Math.max(batch.length, owed);
        const outcome = await this.sendBatch(sessionId, batch);
        // After close() the buffer is left exactly as pendingEvents() showed it.
        if (outcome.kind === 'closed') return;
        if (outcome.kind === 'halted') {
          this.haltedBy = outcome.error;
          this.inFlight = 0;
          this.options.reportError({ error: outcome.error, rejectedEvents: [], rejections: [] });
          this.settleWaiters(outcome.error);
          return;
        }
        owed = Math.max(owed, batch.length);
        if (outcome.kind === 'tooLarge') {
          size = Math.ceil(batch.length / 2);
          continue;
        }
        if (outcome.kind === 'sent') {
          this.forget(this.buffer.splice(0, batch.length));
          owed -= batch.length;
          this.inFlight = owed;
        } else {
          // Each pass drops at least one event, so resending the rest cannot loop forever.
          const refused = refusedEvents(outcome.error, batch.length);
          const rejections = [...refused].map(([index, errors]) => ({ event: batch[index], errors }));
          this.forget(this.buffer.filter((_, index) => index < batch.length && refused.has(index)));
          this.buffer = this.buffer.filter((_, index) => index >= batch.length || !refused.has(index));
          owed -= refused.size;
          this.inFlight = owed;
          this.counters.rejected += refused.size;
          // Reported once the buffer is consistent: a listener may call track(), flush() or close().
          this.options.reportError({
            error: outcome.error,
            rejectedEvents: rejections.map(({ event }) => event),
            rejections,
          });
        }
        if (owed === 0) size = this.batchSize;
        this.settleWaiters();
      }
    } finally {
      this.inFlight = 0;
      this.pumping = false;
    }
    this.armTimer();
  }

  /**
   * One batch, resent after retryable failures until it succeeds, is refused, or the device closes.
   * While the realtime channel is connected, each attempt goes over the socket first; when the socket
   * gives no answer (not connected, dropped, timed out, the batch too large for a frame) the same
   * attempt goes over HTTP. An `error` answer refusing the batch counts as the HTTP 400.
   */
  private async sendBatch(sessionId: string, events: StampedEvent[]): Promise<BatchOutcome> {
    const { http, socket, closing, requestTimeoutMs } = this.options;
    const path = `${sessionPath(sessionId)}/events`;
    for (let attempt = 0; ; attempt++) {
      if (this.options.eventsOverSocket && socket.welcome?.sessionId === sessionId) {
        const answer = await socket.sendEvents(events, requestTimeoutMs, closing);
        if (answer.kind === 'ack') {
          this.counters.sent += events.length;
          this.counters.duplicates += answer.duplicates;
          return { kind: 'sent' };
        }
        if (answer.kind === 'refused') return { kind: 'rejected', error: answer.error };
        if (closing.aborted) return { kind: 'closed' };
      }
      try {
        const result = await http.request<EventBatchResult>('POST', path, { events }, closing);
        this.counters.sent += events.length;
        this.counters.duplicates += result?.duplicates ?? 0;
        return { kind: 'sent' };
      } catch (error) {
        if (!(error instanceof LivelineError)) throw error;
        if (error.code === 'closed') return { kind: 'closed' };
        if (error.retryable) {
          this.counters.retries++;
          const delay = error.retryAfterMs ?? backoffDelay(attempt, this.options.retry, this.options.random);
          if (!(await this.sleep(delay))) return { kind: 'closed' };
          continue;
        }
        // An auth failure is about the token, not the batch: keep the events for a new token.
        if (error.status === 401 || error.status === 403) return { kind: 'halted', error };
        if (error.status === 413 && events.length > 1) return { kind: 'tooLarge' };
        return { kind: 'rejected', error };
      }
    }
  }

  /** Resolves `true` after `ms` (or sooner, on `drain()`), `false` once the device is closed. */
  private sleep(ms: number): Promise<boolean> {
    const signal = this.options.closing;
    if (signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const finish = (value: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        if (this.wakeSleep === wake) this.wakeSleep = null;
        resolve(value);
      };
      const onAbort = () => finish(false);
      const wake = () => finish(true);
      // setTimeout fires at once for delays past 2^31 − 1 ms; a huge Retry-After must not become 0.
      const timer = setTimeout(wake, Math.min(ms, MAX_TIMER_MS));
      signal.addEventListener('abort', onAbort, { once: true });
      this.wakeSleep = wake;
    });
  }

  /** Resolves the flushes whose events have all left the buffer; with `error`, rejects every flush. */
  private settleWaiters(error?: LivelineError): void {
    const oldest = this.buffer[0]?.seq ?? Number.POSITIVE_INFINITY;
    this.waiters = this.waiters.filter((waiter) => {
      if (error) waiter.reject(error);
      else if (waiter.through < oldest) waiter.resolve();
      else return true;
      return false;
    });
  }
}
