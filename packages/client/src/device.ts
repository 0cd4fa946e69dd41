import { backoffDelay, type RetryOptions } from './backoff.ts';
import { Emitter } from './emitter.ts';
import type { ClientEvent, StampedEvent } from './events.ts';
import { type Clock, HttpClient, LivelineError, systemClock } from './http.ts';
import { type EventRejection, refusedEvents } from './refusals.ts';
import type { EventBatchResult, Session, SessionInfo, StartSessionOptions } from './session.ts';
import { SDK_VERSION } from './version.ts';

export interface LivelineDeviceOptions {
  /** The service's base URL, e.g. `https://liveline.example.com`. */
  baseUrl: string;
  /** A device token minted by the tenant backend. */
  token: string;
  fetch?: typeof fetch;
  /** Source of event timestamps and of "now" for `Retry-After` dates. */
  clock?: Clock;
  /** Source of backoff jitter, in [0, 1). */
  random?: () => number;
  /** Events per request, 1–1000 (the server's batch limit). Default 100. */
  batchSize?: number;
  /** Longest time a tracked event waits before a flush starts. Default 1000. */
  flushIntervalMs?: number;
  /** Buffer capacity; beyond it the oldest events not in flight are dropped. Default 10 000. */
  maxBufferedEvents?: number;
  /** Default 30 000. */
  requestTimeoutMs?: number;
  retry?: Partial<RetryOptions>;
}

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

/** What `device.on()` can listen to. The realtime channel will add its events (commands, text) here. */
export interface DeviceEvents {
  error: DeviceErrorEvent;
}

interface Buffered {
  /** Tracking order, so `flush()` knows when everything tracked before it has left the buffer. */
  seq: number;
  event: StampedEvent;
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

const EVENT_BATCH_LIMIT = 1000;
const SESSIONS_PATH = '/client/v1/sessions';
const MAX_TIMER_MS = 2_147_483_647;

/**
 * A headset's connection to liveline: its session and its event pipeline.
 *
 * Events go into an in-memory buffer and leave it in order, one batch in flight at a time. A batch
 * that fails in a retryable way is resent unchanged (same ids, so the server deduplicates) until it
 * succeeds. When the server refuses a batch (4xx), the events it names are dropped and the rest of the
 * batch is resent; when it names none (or blames the batch as a whole), the whole batch is dropped.
 * Dropped events are reported through `on('error')`.
 */
export class LivelineDevice {
  private readonly http: HttpClient;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly batchSize: number;
  private readonly flushIntervalMs: number;
  private readonly maxBufferedEvents: number;
  private readonly retry: RetryOptions;
  private readonly emitter = new Emitter<DeviceEvents>();
  /** Aborted by `close()`: cancels the request in flight and any backoff sleep. */
  private readonly closing = new AbortController();

  private current: SessionInfo | null = null;
  private starting = false;
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
  /** Set by a 401/403: sending pauses, keeping the events, until `setToken()`. */
  private haltedBy: LivelineError | null = null;
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly counters = { sent: 0, duplicates: 0, dropped: 0, rejected: 0, retries: 0 };

  constructor(options: LivelineDeviceOptions) {
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.http = new HttpClient({
      baseUrl: options.baseUrl,
      token: options.token,
      fetch: options.fetch,
      clock: this.clock,
      requestTimeoutMs: options.requestTimeoutMs,
    });
    this.batchSize = options.batchSize ?? 100;
    this.flushIntervalMs = options.flushIntervalMs ?? 1000;
    this.maxBufferedEvents = options.maxBufferedEvents ?? 10_000;
    this.retry = {
      initialDelayMs: options.retry?.initialDelayMs ?? 500,
      maxDelayMs: options.retry?.maxDelayMs ?? 30_000,
    };
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1 || this.batchSize > EVENT_BATCH_LIMIT) {
      throw new RangeError(`batchSize must be an integer from 1 to ${EVENT_BATCH_LIMIT}`);
    }
    if (!Number.isInteger(this.maxBufferedEvents) || this.maxBufferedEvents < this.batchSize) {
      throw new RangeError('maxBufferedEvents must be an integer no smaller than batchSize');
    }
  }

  /** The current session, or null before `startSession()` and after `endSession()`. */
  get session(): SessionInfo | null {
    return this.current;
  }

  on<K extends keyof DeviceEvents>(name: K, listener: (payload: DeviceEvents[K]) => void): () => void {
    return this.emitter.on(name, listener);
  }

  /** Replaces the device token (say, after it expired) and resumes sending paused by a 401/403. */
  setToken(token: string): void {
    this.http.token = token;
    if (this.haltedBy) {
      this.haltedBy = null;
      this.kick();
      this.armTimer();
    }
  }

  /** Starts a session. Events tracked before it are sent to it. */
  async startSession(options: StartSessionOptions = {}): Promise<SessionInfo> {
    this.assertOpen();
    if (this.current || this.starting) {
      throw new LivelineError({
        status: 0,
        code: 'session_active',
        detail: 'End the current session first.',
      });
    }
    const body = {
      ...(options.tenantCohortId === undefined ? {} : { tenantCohortId: options.tenantCohortId }),
      device: { sdkVersion: SDK_VERSION, ...options.device },
    };
    this.starting = true;
    let info: SessionInfo;
    try {
      info = await this.http.request<SessionInfo>('POST', SESSIONS_PATH, body, this.closing.signal);
    } finally {
      this.starting = false;
    }
    this.current = info;
    this.kick();
    this.armTimer();
    return info;
  }

  /** Buffers an event, filling `id` and `timestamp` when absent; returns the event as it will be sent. */
  track(event: ClientEvent): StampedEvent {
    this.assertOpen();
    const stamped: StampedEvent = {
      ...event,
      id: event.id ?? crypto.randomUUID(),
      timestamp: event.timestamp ?? this.clock.now(),
    };
    this.buffer.push({ seq: ++this.lastSeq, event: stamped });
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
    if (this.closing.signal.aborted) return Promise.reject(closedError());
    if (this.buffer.length === 0) return Promise.resolve();
    if (!this.current) {
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

  /** Flushes, then ends the session; returns the ended session. */
  async endSession(): Promise<Session> {
    this.assertOpen();
    const info = this.current;
    if (!info) throw new LivelineError({ status: 0, code: 'no_session', detail: 'No session to end.' });
    await this.flush();
    const path = `${sessionPath(info.sessionId)}/end`;
    const session = await this.http.request<Session>('POST', path, undefined, this.closing.signal);
    if (this.current === info) this.current = null;
    return session;
  }

  /**
   * Stops timers and cancels the request in flight. Buffered events stay in `pendingEvents()`, so an
   * app can persist them and `track()` them again later (with their ids, so nothing is stored twice).
   */
  async close(): Promise<void> {
    if (!this.closing.signal.aborted) {
      this.closing.abort();
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
      this.settleWaiters(closedError());
    }
    await this.pumpDone;
  }

  /** The buffered events, oldest first. */
  pendingEvents(): StampedEvent[] {
    return this.buffer.map(({ event }) => ({ ...event }));
  }

  stats(): DeviceStats {
    return { ...this.counters, buffered: this.buffer.length };
  }

  private assertOpen(): void {
    if (this.closing.signal.aborted) throw closedError();
  }

  /** Drop-oldest: fresh data (health, the latest progress) matters more to a live view than the oldest. */
  private dropOverflow(): void {
    const excess = this.buffer.length - this.maxBufferedEvents;
    if (excess <= 0) return;
    this.counters.dropped += this.buffer.splice(this.inFlight, excess).length;
    this.settleWaiters();
  }

  private armTimer(): void {
    if (this.flushTimer || !this.current || this.haltedBy || this.closing.signal.aborted) return;
    if (this.buffer.length === this.inFlight) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.drainThrough = this.lastSeq;
      this.kick();
    }, this.flushIntervalMs);
  }

  /** Starts the send loop unless it is running (it then picks up new work itself) or cannot run. */
  private kick(): void {
    if (this.pumping || !this.current || this.haltedBy || this.closing.signal.aborted) return;
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
      while (this.current && !this.haltedBy && !this.closing.signal.aborted && this.buffer.length > 0) {
        if (owed === 0 && this.buffer[0].seq > this.drainThrough && this.buffer.length < this.batchSize) {
          break;
        }
        const batch = this.buffer.slice(0, owed > 0 ? Math.min(size, owed) : size).map(({ event }) => event);
        this.inFlight = Math.max(batch.length, owed);
        const outcome = await this.sendBatch(this.current.sessionId, batch);
        // After close() the buffer is left exactly as pendingEvents() showed it.
        if (outcome.kind === 'closed') return;
        if (outcome.kind === 'halted') {
          this.haltedBy = outcome.error;
          this.inFlight = 0;
          this.emitter.emit('error', { error: outcome.error, rejectedEvents: [], rejections: [] });
          this.settleWaiters(outcome.error);
          return;
        }
        owed = Math.max(owed, batch.length);
        if (outcome.kind === 'tooLarge') {
          size = Math.ceil(batch.length / 2);
          continue;
        }
        if (outcome.kind === 'sent') {
          this.buffer.splice(0, batch.length);
          owed -= batch.length;
          this.inFlight = owed;
        } else {
          // Each pass drops at least one event, so resending the rest cannot loop forever.
          const refused = refusedEvents(outcome.error, batch.length);
          const rejections = [...refused].map(([index, errors]) => ({ event: batch[index], errors }));
          this.buffer = this.buffer.filter((_, index) => index >= batch.length || !refused.has(index));
          owed -= refused.size;
          this.inFlight = owed;
          this.counters.rejected += refused.size;
          // Emitted once the buffer is consistent: a listener may call track(), flush() or close().
          this.emitter.emit('error', {
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

  /** One batch, resent after retryable failures until it succeeds, is refused, or the device closes. */
  private async sendBatch(sessionId: string, events: StampedEvent[]): Promise<BatchOutcome> {
    const path = `${sessionPath(sessionId)}/events`;
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await this.http.request<EventBatchResult>(
          'POST',
          path,
          { events },
          this.closing.signal,
        );
        this.counters.sent += events.length;
        this.counters.duplicates += result?.duplicates ?? 0;
        return { kind: 'sent' };
      } catch (error) {
        if (!(error instanceof LivelineError)) throw error;
        if (error.code === 'closed') return { kind: 'closed' };
        if (error.retryable) {
          this.counters.retries++;
          const delay = error.retryAfterMs ?? backoffDelay(attempt, this.retry, this.random);
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

  /** Resolves `true` after `ms`, or `false` as soon as the device is closed. */
  private sleep(ms: number): Promise<boolean> {
    const signal = this.closing.signal;
    if (signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const onAbort = () => {
        clearTimeout(timer);
        resolve(false);
      };
      // setTimeout fires at once for delays past 2^31 − 1 ms; a huge Retry-After must not become 0.
      const timer = setTimeout(
        () => {
          signal.removeEventListener('abort', onAbort);
          resolve(true);
        },
        Math.min(ms, MAX_TIMER_MS),
      );
      signal.addEventListener('abort', onAbort, { once: true });
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

function sessionPath(sessionId: string): string {
  return `${SESSIONS_PATH}/${encodeURIComponent(sessionId)}`;
}

function closedError(): LivelineError {
  return new LivelineError({ status: 0, code: 'closed', detail: 'The device was closed.' });
}
