import type { AspectRatio, Resolution } from '@liveline/protocol';
import { MAX_TIMER_MS, type RetryOptions } from './backoff.ts';
import type { EventBufferStorage } from './buffer-storage.ts';
import * as rewards from './challenges.ts';
import {
  type CameraHandler,
  type CommandCancellation,
  CommandRouter,
  type CustomCommandHandler,
  type RealtimeCommand,
  type RecordStartHandler,
  type StopHandler,
  type StreamStartHandler,
  type TextHandler,
} from './commands.ts';
import { Emitter } from './emitter.ts';
import {
  type DeviceErrorEvent,
  type DeviceStats,
  type DroppedEvents,
  EventPipeline,
} from './event-pipeline.ts';
import type { ClientEvent, ClientEventFields, StampedEvent } from './events.ts';
import { type HealthHook, HealthSampler } from './health.ts';
import { type Clock, closedError, HttpClient, LivelineError, systemClock } from './http.ts';
import { assertSocketOrigin } from './origin.ts';
import {
  type DisconnectedInfo,
  RealtimeChannel,
  type ReconnectingInfo,
  type WelcomeInfo,
} from './realtime.ts';
import {
  type ScreenshotProvider,
  type ScreenshotRequest,
  type StoredScreenshot,
  type TakeScreenshotOptions,
  uploadScreenshot,
} from './screenshots.ts';
import {
  SESSIONS_PATH,
  type Session,
  type SessionInfo,
  type StartSessionOptions,
  sessionPath,
} from './session.ts';
import { nodeWebSocketConnector, type SocketConnector } from './socket.ts';
import { SDK_VERSION } from './version.ts';

export type { DeviceErrorEvent, DeviceStats, DroppedEvents } from './event-pipeline.ts';

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
  /**
   * Buffer capacity in characters of JSON (`JSON.stringify(event).length` summed); beyond it the
   * oldest events not in flight are dropped. Default: no bound but `maxBufferedEvents`.
   */
  maxBufferedBytes?: number;
  /**
   * Keeps the buffer across app restarts (`fileEventStorage()` from `@liveline/client/file-storage`
   * in Node, `indexedDbEventStorage()` in a browser): what a previous run left is sent on start, to
   * the session it was tracked in. Default: memory only.
   */
  storage?: EventBufferStorage;
  /** Default 30 000. Also bounds the WebSocket handshake and the wait for an `events.ack`. */
  requestTimeoutMs?: number;
  /** Backoff of HTTP resends and of realtime reconnects. */
  retry?: Partial<RetryOptions>;
  /** How the realtime WebSocket is opened. Default: the `ws` package, token in the Authorization header. */
  connector?: SocketConnector;
  /** Send event batches over the realtime channel while it is connected. Default true. */
  eventsOverSocket?: boolean;
  /**
   * Built-in Health: a `Health` event every this many ms while a session is current, from what the
   * platform exposes (README, "Built-in Health"). Default 30 000; 0 turns it off.
   * `startHealthReporting()` replaces it.
   */
  healthIntervalMs?: number;
  /** Adds to or overrides the built-in Health fields (say, `fps` from the engine); returns the fields to send. */
  health?: HealthHook;
  /**
   * Takes a screenshot of the app's view, for `takeScreenshot()`, the tenant's `screenshot` command
   * and `screenshotIntervalMs` (`screenshotFromCanvas(canvas)`, `screenshotFromBuffer(bytes, type)`).
   */
  screenshotProvider?: ScreenshotProvider;
  /** Uploads a screenshot every this many ms while a session is current. Default 0: off. */
  screenshotIntervalMs?: number;
}

/** The fields of a `Health` event, as a health provider returns them. */
export type HealthFields = ClientEventFields['Health'];

/** What a stream started inside the app is (CONTRACT §2): the enumerations' wire values. */
export interface StreamOptions {
  resolution: Resolution;
  aspectratio: AspectRatio;
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
  /**
   * The tenant cancelled a command (`command.cancel`): one still waiting never reaches its handler,
   * a running one's `signal` is aborted, and neither is answered. Undo what `stage: "answered"` did.
   */
  commandCancelled: CommandCancellation;
  /** The buffer was full: these events, the oldest not in flight, were dropped (`stats().dropped`). */
  dropped: DroppedEvents;
}

/**
 * A headset's connection to liveline: its session, its event pipeline (`event-pipeline.ts`: buffered,
 * batched, resent until stored, over the socket when it is open) and its realtime channel (commands
 * from the tenant, handled by the app's `on…` handlers and acknowledged automatically). Refused events
 * are reported through `on('error')`.
 */
export class LivelineDevice {
  private readonly http: HttpClient;
  private readonly emitter = new Emitter<DeviceEvents>();
  /** Aborted by `close()`: cancels the request in flight and any backoff sleep. */
  private readonly closing = new AbortController();
  private readonly events: EventPipeline;
  private readonly realtime: RealtimeChannel;
  private readonly commands: CommandRouter;
  private healthTimer: ReturnType<typeof setInterval> | undefined;
  /** Built-in Health and interval screenshots: started with a session, stopped with it. */
  private readonly sampler = new HealthSampler(() => performance.now());
  private readonly routines: Pick<
    LivelineDeviceOptions,
    'healthIntervalMs' | 'health' | 'screenshotProvider' | 'screenshotIntervalMs'
  >;
  private healthMode: 'builtIn' | 'app' | 'off' = 'builtIn';
  private builtInHealthTimer: ReturnType<typeof setInterval> | undefined;
  private screenshotTimer: ReturnType<typeof setInterval> | undefined;
  private current: SessionInfo | null = null;
  private starting = false;
  /** The socket is opened only at this URL's origin (`origin.ts`). */
  private readonly baseUrl: string;
  private readonly requestTimeoutMs: number;

  constructor(options: LivelineDeviceOptions) {
    const clock = options.clock ?? systemClock;
    const { healthIntervalMs, health, screenshotProvider, screenshotIntervalMs } = options;
    this.routines = { healthIntervalMs, health, screenshotProvider, screenshotIntervalMs };
    this.baseUrl = options.baseUrl;
    const random = options.random ?? Math.random;
    const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.requestTimeoutMs = requestTimeoutMs;
    const retry: RetryOptions = {
      initialDelayMs: options.retry?.initialDelayMs ?? 500,
      maxDelayMs: options.retry?.maxDelayMs ?? 30_000,
    };
    this.http = new HttpClient({
      baseUrl: options.baseUrl,
      token: options.token,
      fetch: options.fetch,
      clock,
      requestTimeoutMs: options.requestTimeoutMs,
    });
    this.commands = new CommandRouter(
      (ack) => this.realtime.send(ack),
      (command) => this.emitter.emit('command', command),
    );
    // The tenant's `screenshot` command: taken through the provider, uploaded, then acknowledged.
    this.commands.set('screenshot', async (request) => {
      await this.takeScreenshot(request);
    });
    this.realtime = new RealtimeChannel({
      connector: options.connector ?? nodeWebSocketConnector({ handshakeTimeoutMs: requestTimeoutMs }),
      retry,
      random,
      target: () => (this.current ? { url: this.current.realtimeUrl, token: this.http.token } : null),
      listener: {
        welcome: (info) => this.onWelcome(info),
        command: (command) => this.commands.receive(command),
        commandCancelled: (commandId) =>
          this.emitter.emit('commandCancelled', this.commands.cancel(commandId)),
        disconnected: (info) => this.emitter.emit('disconnected', info),
        reconnecting: (info) => this.emitter.emit('reconnecting', info),
        replaced: () => this.emitter.emit('replaced', { sessionId: this.current?.sessionId ?? '' }),
        failed: (error) => this.reportError(error),
        serverError: (error) => this.reportError(error),
      },
    });
    this.events = new EventPipeline({
      http: this.http,
      socket: this.realtime,
      clock,
      random,
      retry,
      batchSize: options.batchSize ?? 100,
      flushIntervalMs: options.flushIntervalMs ?? 1000,
      maxBufferedEvents: options.maxBufferedEvents ?? 10_000,
      maxBufferedBytes: options.maxBufferedBytes ?? Number.POSITIVE_INFINITY,
      storage: options.storage ?? null,
      requestTimeoutMs,
      eventsOverSocket: options.eventsOverSocket ?? true,
      closing: this.closing.signal,
      sessionId: () => this.current?.sessionId ?? null,
      reportError: (event) => this.emitter.emit('error', event),
      reportDropped: (event) => this.emitter.emit('dropped', event),
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
    this.events.resume();
    this.realtime.resume();
  }

  /** Starts a session. Events tracked before it are sent to it. */
  async startSession(options: StartSessionOptions = {}): Promise<SessionInfo> {
    this.assertNoSession();
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
    this.events.start();
    this.startRoutines();
    return info;
  }

  /**
   * Adopts a session started earlier (say, by this app before it restarted: keep the `SessionInfo`
   * that `startSession()` returned). No request is made; the next `connect()` resumes its channel,
   * replacing any connection still open to it (which is closed with 4001).
   */
  resumeSession(info: SessionInfo): void {
    this.assertNoSession();
    this.current = { ...info };
    this.events.start();
    this.startRoutines();
  }

  /** Buffers an event, filling `id` and `timestamp` when absent; returns the event as it will be sent. */
  track(event: ClientEvent): StampedEvent {
    this.assertOpen();
    return this.events.track(event);
  }

  /**
   * Sends every event tracked so far, partial batches included. Resolves once they have all left the
   * buffer (sent, or dropped as reported by `stats()`); rejects if the device is closed first, if there
   * is no session to send to, or on a 401/403.
   */
  flush(): Promise<void> {
    return this.events.flush();
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
    this.stopRoutines();
    await this.ticksSettled();
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
      this.events.stop();
      this.stopHealthReporting();
      this.stopRoutines();
    }
    await Promise.all([this.events.idle().then(() => this.events.release()), this.realtime.disconnect()]);
  }

  // --- realtime channel ---------------------------------------------------------------------------

  /**
   * Opens the session's realtime channel (WebSocket at `session.realtimeUrl`) and resolves on the
   * server's `welcome`. A dropped connection is reopened with exponential backoff and full jitter (at
   * once, give or take the first backoff step, after 1012 "server restarting"), resuming the same
   * session. It stops for good, rejecting a pending `connect()`, on `disconnect()`/`close()`, on 4001
   * (`replaced`: another connection took the session over), on 4003/4004/4009 and on a 4xx answer to
   * the upgrade (reported through `on('error')`; after a 401/403, `setToken()` reconnects). A
   * `realtimeUrl` at another origin than `baseUrl` (`ws`/`wss` standing for `http`/`https`) is never
   * opened: `connect()` rejects with `realtime_origin_mismatch`.
   */
  connect(): Promise<void> {
    if (this.closing.signal.aborted) return Promise.reject(closedError());
    if (!this.current) {
      return Promise.reject(
        new LivelineError({ status: 0, code: 'no_session', detail: 'Start a session before connecting.' }),
      );
    }
    try {
      assertSocketOrigin(this.baseUrl, this.current.realtimeUrl);
    } catch (error) {
      return Promise.reject(error);
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
    this.healthMode = 'app';
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

  /** Stops health reporting, the app's and the built-in one (for good: a new session does not restart it). */
  stopHealthReporting(): void {
    clearInterval(this.healthTimer);
    this.healthTimer = undefined;
    clearInterval(this.builtInHealthTimer);
    this.builtInHealthTimer = undefined;
    this.healthMode = 'off';
  }

  /** The app rendered a frame: the built-in Health's `fps` counts these. */
  frame(): void {
    this.sampler.frame();
  }

  /**
   * Takes a screenshot through the `screenshotProvider` and uploads it to the current session
   * (`POST …/screenshots`); resolves with the stored `Screenshot` event (its `imageId`, and the
   * `width` and `height` the server read from the image). Not retried. Rejects with
   * `no_screenshot_provider` without a provider, `no_session` without a session.
   */
  async takeScreenshot(options: TakeScreenshotOptions = {}): Promise<StoredScreenshot> {
    this.assertOpen();
    const provider = this.routines.screenshotProvider;
    if (!provider) {
      const detail = 'No screenshotProvider was given to new LivelineDevice().';
      throw new LivelineError({ status: 0, code: 'no_screenshot_provider', detail });
    }
    const info = this.current;
    if (!info) throw new LivelineError({ status: 0, code: 'no_session', detail: 'Start a session first.' });
    const request: ScreenshotRequest = options.format ? { format: options.format } : {};
    const shot = await provider(request);
    return uploadScreenshot(this.http, info.sessionId, shot, options, this.closing.signal);
  }

  /** Built-in Health (unless the app reports its own or stopped it) and interval screenshots. */
  private startRoutines(): void {
    this.stopRoutines();
    const healthMs = this.routines.healthIntervalMs ?? 30_000;
    if (this.healthMode === 'builtIn' && healthMs > 0) {
      this.builtInHealthTimer = this.everyTick(healthMs, async () => {
        const sampled = await this.sampler.sample();
        const fields = this.routines.health ? await this.routines.health(sampled) : sampled;
        if (this.current && !this.closing.signal.aborted && Object.keys(fields).length > 0) {
          this.track({ ...fields, eventType: 'Health' });
        }
      });
    }
    const shotsMs = this.routines.screenshotIntervalMs ?? 0;
    if (shotsMs > 0 && this.routines.screenshotProvider) {
      this.screenshotTimer = this.everyTick(shotsMs, async () => {
        try {
          await this.takeScreenshot();
        } catch (error) {
          if (!this.closing.signal.aborted) this.reportError(asLivelineError(error));
        }
      });
    }
  }

  /** The routines' ticks under way (a Health sample, an interval screenshot being taken or uploaded). */
  private readonly ticking = new Set<Promise<void>>();

  /**
   * A tick under way belongs to the session that is ending: its screenshot is uploaded and its Health
   * tracked first. Waits at most `requestTimeoutMs` (a screenshot provider that never answers must
   * not hold `endSession()` for ever).
   */
  private async ticksSettled(): Promise<void> {
    if (this.ticking.size === 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.requestTimeoutMs);
    });
    await Promise.race([Promise.all([...this.ticking]), late]);
    clearTimeout(timer);
  }

  private stopRoutines(): void {
    clearInterval(this.builtInHealthTimer);
    this.builtInHealthTimer = undefined;
    clearInterval(this.screenshotTimer);
    this.screenshotTimer = undefined;
  }

  /**
   * Runs `work` every `ms` (a tick is skipped while the last one runs). The timer does not keep a
   * Node process alive; an error of the app's hook surfaces like a throwing listener's.
   */
  private everyTick(ms: number, work: () => Promise<void>): ReturnType<typeof setInterval> {
    let running = false;
    const timer = setInterval(
      () => {
        if (running) return;
        running = true;
        const tick: Promise<void> = work()
          .catch((error) => {
            queueMicrotask(() => {
              throw error;
            });
          })
          .finally(() => {
            running = false;
            this.ticking.delete(tick);
          });
        this.ticking.add(tick);
      },
      Math.min(ms, MAX_TIMER_MS),
    );
    (timer as { unref?: () => void }).unref?.();
    return timer;
  }

  /** The buffered events, oldest first. */
  pendingEvents(): StampedEvent[] {
    return this.events.pendingEvents();
  }

  stats(): DeviceStats {
    return this.events.stats();
  }

  private assertOpen(): void {
    if (this.closing.signal.aborted) throw closedError();
  }

  private assertNoSession(): void {
    this.assertOpen();
    if (this.current || this.starting) {
      throw new LivelineError({
        status: 0,
        code: 'session_active',
        detail: 'End the current session first.',
      });
    }
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
    this.events.drain();
  }

  private reportError(error: LivelineError): void {
    this.emitter.emit('error', { error, rejectedEvents: [], rejections: [] });
  }
}

function asLivelineError(error: unknown): LivelineError {
  if (error instanceof LivelineError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  return new LivelineError({ status: 0, code: 'screenshot_failed', detail }, { cause: error });
}
