import { backoffDelay, type RetryOptions } from './backoff.ts';
import * as rewards from './challenges.ts';
import {
  type CameraHandler,
  CommandRouter,
  type CustomCommandHandler,
  type RealtimeCommand,
  type RecordStartHandler,
  type StopHandler,
  type StreamStartHandler,
  type TextHandler,
} from './commands.ts';
import { Emitter } from './emitter.ts';
import type { AspectRatio, Resolution } from './enums.ts';
import type { ClientEvent, ClientEventFields, StampedEvent } from './events.ts';
import { type Clock, HttpClient, LivelineError, systemClock } from './http.ts';
import {
  type DisconnectedInfo,
  RealtimeChannel,
  type ReconnectingInfo,
  type WelcomeInfo,
} from './realtime.ts';
import { type EventRejection, refusedEvents } from './refusals.ts';
import type { EventBatchResult, Session, SessionInfo, StartSessionOptions } from './session.ts';
import { nodeWebSocketConnector, type SocketConnector } from './socket.ts';
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
  /** Default 30 000. Also bounds the WebSocket handshake and the wait for an `events.ack`. */
  requestTimeoutMs?: number;
  /** Backoff of HTTP resends and of realtime reconnects. */
  retry?: Partial<RetryOptions>;
  /** How the realtime WebSocket is opened. Default: the `ws` package, token in the Authorization header. */
  connector?: SocketConnector;
  /** Send event batches over the realtime channel while it is connected. Default true. */
  eventsOverSocket?: boolean;
}

/** The fields of a `Health` event, as a health provider returns them. */
export type HealthFields = ClientEventFields['Health'];

/** What a stream started inside the app is (CONTRACT §2): the enumerations' wire values. */
export interface StreamOptions {
  resolution: Resolution;
  aspectratio: AspectRatio;
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

/** What `device.on()` can listen to. */
export interface DeviceEvents {
  /**
   * Refused events and auth failures of the HTTP path; on the realtime channel, permanent refusals
   * (4003, 4004, 4009, a 4xx on upgrade) and `error` messages that answer nothing the SDK asked
   * (e.g. an ack for an expired command). Realtime errors carry no events.
   */
  error: DeviceErrorEvent;
  /** The server welcomed a connection (the first one, or a reconnect). */
  connected: WelcomeInfo;
  /** A welcomed connection ended; `willReconnect` tells whether the SDK is trying again. */
  disconnected: DisconnectedInfo;
  /** A reconnect is scheduled after `delayMs`. */
  reconnecting: ReconnectingInfo;
  /** A newer connection to the same session took over (4001); this device stopped reconnecting. */
  replaced: { sessionId: string };
  /** A new command arrived (repeats are not reported); emitted before its handler runs. */
  command: RealtimeCommand;
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
 * A headset's connection to liveline: its session, its event pipeline and its realtime channel
 * (commands from the tenant, handled by the app's `on…` handlers and acknowledged automatically).
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
  private readonly realtime: RealtimeChannel;
  private readonly commands: CommandRouter;
  private readonly eventsOverSocket: boolean;
  private readonly requestTimeoutMs: number;
  /** Ends the current backoff sleep early (the realtime channel came back). */
  private wakeSleep: (() => void) | null = null;
  private healthTimer: ReturnType<typeof setInterval> | undefined;

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
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.eventsOverSocket = options.eventsOverSocket ?? true;
    this.commands = new CommandRouter(
      (ack) => this.realtime.send(ack),
      (command) => this.emitter.emit('command', command),
    );
    this.realtime = new RealtimeChannel({
      connector: options.connector ?? nodeWebSocketConnector({ handshakeTimeoutMs: this.requestTimeoutMs }),
      retry: this.retry,
      random: this.random,
      target: () => (this.current ? { url: this.current.realtimeUrl, token: this.http.token } : null),
      listener: {
        welcome: (info) => this.onWelcome(info),
        command: (command) => this.commands.receive(command),
        disconnected: (info) => this.emitter.emit('disconnected', info),
        reconnecting: (info) => this.emitter.emit('reconnecting', info),
        replaced: () => this.emitter.emit('replaced', { sessionId: this.current?.sessionId ?? '' }),
        failed: (error) => this.reportError(error),
        serverError: (error) => this.reportError(error),
      },
    });
  }

  /** The current session, or null before `startSession()` and after `endSession()`. */
  get session(): SessionInfo | null {
    return this.current;
  }

  on<K extends keyof DeviceEvents>(name: K, listener: (payload: DeviceEvents[K]) => void): () => void {
    return this.emitter.on(name, listener);
  }

  /**
   * Replaces the device token (say, after it expired). Resumes sending paused by a 401/403, and
   * reconnects a realtime channel the server refused with 401/403.
   */
  setToken(token: string): void {
    this.http.token = token;
    if (this.haltedBy) {
      this.haltedBy = null;
      this.kick();
      this.armTimer();
    }
    this.realtime.resume();
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

  /**
   * Adopts a session started earlier (say, by this app before it restarted: keep the `SessionInfo`
   * that `startSession()` returned). No request is made; the next `connect()` resumes its channel,
   * replacing any connection still open to it (which is closed with 4001).
   */
  resumeSession(info: SessionInfo): void {
    this.assertOpen();
    if (this.current || this.starting) {
      throw new LivelineError({
        status: 0,
        code: 'session_active',
        detail: 'End the current session first.',
      });
    }
    this.current = { ...info };
    this.kick();
    this.armTimer();
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

  /** Every challenge of the tenant's current campaigns, with this player's progress and status. */
  challenges(): Promise<rewards.Challenge[]> {
    this.assertOpen();
    return rewards.challenges(this.http);
  }

  /** Claims a completed challenge (again: the same claim); 409 `challenge_not_complete` before that. */
  claim(challengeId: string): Promise<rewards.Claim> {
    this.assertOpen();
    return rewards.claim(this.http, challengeId);
  }

  /** Flushes, closes the realtime channel, then ends the session; returns the ended session. */
  async endSession(): Promise<Session> {
    this.assertOpen();
    const info = this.current;
    if (!info) throw new LivelineError({ status: 0, code: 'no_session', detail: 'No session to end.' });
    await this.flush();
    await this.realtime.disconnect();
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
      this.stopHealthReporting();
      this.settleWaiters(closedError());
    }
    await Promise.all([this.pumpDone, this.realtime.disconnect()]);
  }

  // --- realtime channel ---------------------------------------------------------------------------

  /**
   * Opens the session's realtime channel (WebSocket at `session.realtimeUrl`) and resolves on the
   * server's `welcome`. A dropped connection is reopened with exponential backoff and full jitter (at
   * once, give or take the first backoff step, after 1012 "server restarting"), resuming the same
   * session. It stops for good, rejecting a pending `connect()`, on `disconnect()`/`close()`, on 4001
   * (`replaced`: another connection took the session over), on 4003/4004/4009 and on a 4xx answer to
   * the upgrade (reported through `on('error')`; after a 401/403, `setToken()` reconnects).
   */
  connect(): Promise<void> {
    if (this.closing.signal.aborted) return Promise.reject(closedError());
    if (!this.current) {
      return Promise.reject(
        new LivelineError({ status: 0, code: 'no_session', detail: 'Start a session before connecting.' }),
      );
    }
    return this.realtime.connect();
  }

  /** Closes the realtime channel (code 1000) and stops reconnecting; events keep going over HTTP. */
  disconnect(): Promise<void> {
    return this.realtime.disconnect();
  }

  /** True while the realtime channel is open and welcomed. */
  get connected(): boolean {
    return this.realtime.connected;
  }

  /** Handles `text` commands. Each `on…` method replaces the handler before it and returns its remover. */
  onText(handler: TextHandler): () => void {
    return this.commands.set('text', handler);
  }

  /** Handles custom commands (any name but the built-in ones) with their variables typed. */
  onCommand(handler: CustomCommandHandler): () => void {
    return this.commands.set('custom', handler);
  }

  /** Handles `camera` commands: the controls it carries, as numbers and enumeration values. */
  onCamera(handler: CameraHandler): () => void {
    return this.commands.set('camera', handler);
  }

  /** Handles `stream.start`: start streaming; the stream is `streaming` once the handler resolves. */
  onStreamStart(handler: StreamStartHandler): () => void {
    return this.commands.set('streamStart', handler);
  }

  onStreamStop(handler: StopHandler): () => void {
    return this.commands.set('streamStop', handler);
  }

  /** Handles `record.start` (only sent while streaming). */
  onRecordStart(handler: RecordStartHandler): () => void {
    return this.commands.set('recordStart', handler);
  }

  onRecordStop(handler: StopHandler): () => void {
    return this.commands.set('recordStop', handler);
  }

  // --- streams and recordings started inside the app --------------------------------------------

  /** The app started a stream: `StreamStarted` is recorded. 409 `already_streaming` unless idle. */
  startStream(options: StreamOptions): Promise<{ streamingSessionId: string }> {
    const { resolution, aspectratio } = options;
    return this.sessionRequest('stream/start', { resolution, aspectratio });
  }

  /** The app stopped its stream (and any recording). 409 `not_streaming`. */
  stopStream(): Promise<{ streamingSessionId: string }> {
    return this.sessionRequest('stream/stop');
  }

  /** The app started recording its stream. 409 `not_streaming` / `already_recording`. */
  startRecording(): Promise<{ recordingId: string }> {
    return this.sessionRequest('record/start');
  }

  /** 409 `not_recording`. */
  stopRecording(): Promise<{ recordingId: string }> {
    return this.sessionRequest('record/stop');
  }

  // --- health -------------------------------------------------------------------------------------

  /**
   * Tracks a `Health` event every `intervalMs` with what `provider` returns (it may be async; a tick
   * is skipped while the previous call is still running). Replaces earlier health reporting.
   */
  startHealthReporting(provider: () => HealthFields | Promise<HealthFields>, intervalMs: number): void {
    this.assertOpen();
    if (!(intervalMs > 0)) throw new RangeError('intervalMs must be a positive number of milliseconds');
    this.stopHealthReporting();
    let running = false;
    const timer = setInterval(
      async () => {
        if (running) return;
        running = true;
        try {
          const fields = await provider();
          if (this.healthTimer === timer && !this.closing.signal.aborted) {
            this.track({ ...fields, eventType: 'Health' });
          }
        } catch (error) {
          // An app bug, like a throwing listener: surfaced, but it does not stop reporting.
          queueMicrotask(() => {
            throw error;
          });
        } finally {
          running = false;
        }
      },
      Math.min(intervalMs, MAX_TIMER_MS),
    );
    this.healthTimer = timer;
  }

  stopHealthReporting(): void {
    clearInterval(this.healthTimer);
    this.healthTimer = undefined;
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

  /** A POST to one of the current session's device routes; not retried, like `startSession()`. */
  private async sessionRequest<T>(path: string, body: object = {}): Promise<T> {
    this.assertOpen();
    const info = this.current;
    if (!info) throw new LivelineError({ status: 0, code: 'no_session', detail: 'Start a session first.' });
    return this.http.request<T>('POST', `${sessionPath(info.sessionId)}/${path}`, body, this.closing.signal);
  }

  private onWelcome(info: WelcomeInfo): void {
    this.emitter.emit('connected', info);
    // Back online: whatever waited in the buffer goes now, over the socket.
    this.drainThrough = this.lastSeq;
    this.wakeSleep?.();
    this.kick();
  }

  private reportError(error: LivelineError): void {
    this.emitter.emit('error', { error, rejectedEvents: [], rejections: [] });
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

  /**
   * One batch, resent after retryable failures until it succeeds, is refused, or the device closes.
   * While the realtime channel is connected, each attempt goes over the socket first; when the socket
   * gives no answer (not connected, dropped, timed out, the batch too large for a frame) the same
   * attempt goes over HTTP. An `error` answer refusing the batch counts as the HTTP 400.
   */
  private async sendBatch(sessionId: string, events: StampedEvent[]): Promise<BatchOutcome> {
    const path = `${sessionPath(sessionId)}/events`;
    for (let attempt = 0; ; attempt++) {
      if (this.eventsOverSocket && this.realtime.welcome?.sessionId === sessionId) {
        const answer = await this.realtime.sendEvents(events, this.requestTimeoutMs, this.closing.signal);
        if (answer.kind === 'ack') {
          this.counters.sent += events.length;
          this.counters.duplicates += answer.duplicates;
          return { kind: 'sent' };
        }
        if (answer.kind === 'refused') return { kind: 'rejected', error: answer.error };
        if (this.closing.signal.aborted) return { kind: 'closed' };
      }
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

  /** Resolves `true` after `ms` (or sooner, when the realtime channel comes back), `false` once the device is closed. */
  private sleep(ms: number): Promise<boolean> {
    const signal = this.closing.signal;
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

function sessionPath(sessionId: string): string {
  return `${SESSIONS_PATH}/${encodeURIComponent(sessionId)}`;
}

function closedError(): LivelineError {
  return new LivelineError({ status: 0, code: 'closed', detail: 'The device was closed.' });
}
