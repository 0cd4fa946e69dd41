import {
  CloseCode,
  compileFrameReader,
  DEFAULT_MAX_MESSAGE_BYTES,
  type ErrorMessage,
  type EventsMessage,
  type HeartbeatMessage,
  SERVER_MESSAGE_SCHEMAS,
  type ServerMessage,
  type WelcomeMessage,
} from '@liveline/protocol';
import { backoffDelay, type RetryOptions } from './backoff.ts';
import type { RealtimeCommand } from './commands.ts';
import type { StampedEvent } from './events.ts';
import { LivelineError } from './http.ts';
import type { RealtimeSocket, SocketClose, SocketConnector } from './socket.ts';

export { CloseCode };

/** The server's `welcome`. */
export type WelcomeInfo = Omit<WelcomeMessage, 'type'>;

export interface DisconnectedInfo {
  /** The close code: 1006 when the connection dropped or never opened. */
  code: number;
  reason: string;
  /** False after `disconnect()`/`close()`, a replacement (4001) or a permanent refusal. */
  willReconnect: boolean;
}

export interface ReconnectingInfo {
  /** 1 for the first retry after a connection was lost, counting up until one is welcomed. */
  attempt: number;
  delayMs: number;
  /** Why the previous connection ended (its close code). */
  code: number;
}

/** What the channel tells the device. */
export interface ChannelListener {
  welcome(info: WelcomeInfo): void;
  command(command: RealtimeCommand): void;
  /** The tenant cancelled a command sent earlier (`command.cancel`). */
  commandCancelled(commandId: string): void;
  disconnected(info: DisconnectedInfo): void;
  reconnecting(info: ReconnectingInfo): void;
  /** Another connection took the session over (4001); the channel has stopped. */
  replaced(): void;
  /** A permanent refusal (4003, 4004, 4009, or a 4xx on upgrade); the channel has stopped. */
  failed(error: LivelineError): void;
  /** An `error` message that answers no request of ours (say, an ack for an expired command). */
  serverError(error: LivelineError): void;
}

/** How the server answered an `events` message, or why no answer could be had over the socket. */
export type SocketBatchAnswer =
  | { kind: 'ack'; accepted: number; duplicates: number }
  | { kind: 'refused'; error: LivelineError }
  | { kind: 'unavailable' };

export interface RealtimeChannelOptions {
  connector: SocketConnector;
  retry: RetryOptions;
  random: () => number;
  /** The URL of the current session's channel and the current token; null when there is no session. */
  target(): { url: string; token: string } | null;
  listener: ChannelListener;
  /** Frames larger than this are not sent (the server closes the socket over its limit, 256 KiB). */
  maxMessageBytes?: number;
}

interface Connection {
  socket: RealtimeSocket | null;
  closed: boolean;
  welcome: WelcomeInfo | null;
  /** performance.now() of the last frame or ping from the server. */
  lastContact: number;
  /** Pings prove the server probes liveness; only then is a silent connection considered dead. */
  sawPing: boolean;
  heartbeat: ReturnType<typeof setInterval> | undefined;
}

interface PendingRequest {
  resolve(answer: SocketBatchAnswer): void;
}

/** The server sends a ping every heartbeat interval; this many intervals of silence mean a dead peer. */
const DEAD_AFTER_INTERVALS = 3;
/** How long `disconnect()` waits for the closing handshake before dropping the connection. */
const CLOSE_TIMEOUT_MS = 1000;
/** Server frames, each checked against its type's schema by a validator compiled once. */
const readFrame = compileFrameReader<ServerMessage>(SERVER_MESSAGE_SCHEMAS);
/** Codes of `error` answers to an `events` message that refuse the batch itself (an HTTP 400). */
const BATCH_REFUSALS = new Set(['validation_failed', 'unknown_event_type']);

/**
 * The device's WebSocket to its session (CONTRACT §2): opens it, reconnects with exponential backoff
 * and full jitter when it drops, sends heartbeats, and matches `events` messages with their answers.
 * It stops for good on `disconnect()`, on a replacement (4001) and on permanent refusals.
 */
export class RealtimeChannel {
  private readonly options: RealtimeChannelOptions;
  private readonly maxMessageBytes: number;
  private conn: Connection | null = null;
  /** The app wants a connection: set by `connect()`, cleared by `disconnect()` and permanent failures. */
  private wanted = false;
  private attempt = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private connectWaiters: { resolve(): void; reject(error: LivelineError): void }[] = [];
  private readonly requests = new Map<string, PendingRequest>();
  private closeWaiters: (() => void)[] = [];
  /** A 401/403 on upgrade: the token is the problem, so `resume()` (a new token) tries again. */
  private haltedByAuth = false;

  constructor(options: RealtimeChannelOptions) {
    this.options = options;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /** True between the server's `welcome` and the end of that connection. */
  get connected(): boolean {
    return this.conn?.welcome != null && !this.conn.closed;
  }

  /** The welcome of the current connection, or null. */
  get welcome(): WelcomeInfo | null {
    return this.connected ? (this.conn?.welcome ?? null) : null;
  }

  /**
   * Opens the channel (if it is not open or opening) and resolves on the server's `welcome`. Failures
   * that may pass are retried; the promise rejects on a permanent one, on a replacement, or when
   * `disconnect()` is called first.
   */
  connect(): Promise<void> {
    if (this.connected) return Promise.resolve();
    const welcomed = new Promise<void>((resolve, reject) => this.connectWaiters.push({ resolve, reject }));
    this.wanted = true;
    this.haltedByAuth = false;
    if (!this.conn && this.retryTimer === undefined) {
      this.attempt = 0;
      void this.open();
    }
    return welcomed;
  }

  /** Closes the channel with 1000 and stops reconnecting; resolves once the socket has closed. */
  disconnect(): Promise<void> {
    this.wanted = false;
    this.haltedByAuth = false;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.rejectConnectWaiters(
      new LivelineError({ status: 0, code: 'disconnected', detail: 'disconnect() was called.' }),
    );
    const conn = this.conn;
    if (!conn) return Promise.resolve();
    if (!conn.socket) {
      // Still opening: the attempt sees it was abandoned and drops its socket.
      this.conn = null;
      conn.closed = true;
      return Promise.resolve();
    }
    const socket = conn.socket;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => socket.terminate(), CLOSE_TIMEOUT_MS);
      this.closeWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
      socket.close(CloseCode.normal, 'client closed');
    });
  }

  /** After a new token: reconnects if the channel stopped because the server refused the old one. */
  resume(): void {
    if (!this.haltedByAuth) return;
    this.haltedByAuth = false;
    this.wanted = true;
    this.attempt = 0;
    if (!this.conn && this.retryTimer === undefined) void this.open();
  }

  /** Writes a message if the channel is welcomed; returns whether it did. */
  send(message: object): boolean {
    const conn = this.conn;
    if (!conn?.welcome || conn.closed || !conn.socket) return false;
    return conn.socket.send(JSON.stringify(message));
  }

  /**
   * Sends a batch as an `events` message and waits for its `events.ack` or `error`. Anything short of
   * an answer (not connected, frame too large, a drop, no answer within `timeoutMs`, `signal` aborted)
   * is `unavailable`: the caller sends the batch over HTTP instead, with the same ids.
   */
  sendEvents(events: StampedEvent[], timeoutMs: number, signal: AbortSignal): Promise<SocketBatchAnswer> {
    const conn = this.conn;
    if (!conn?.welcome || conn.closed || !conn.socket || signal.aborted) {
      return Promise.resolve({ kind: 'unavailable' });
    }
    const requestId = crypto.randomUUID();
    const text = JSON.stringify({ type: 'events', events, requestId } satisfies EventsMessage);
    if (!fitsIn(text, this.maxMessageBytes)) return Promise.resolve({ kind: 'unavailable' });
    return new Promise<SocketBatchAnswer>((resolve) => {
      const finish = (answer: SocketBatchAnswer) => {
        if (!this.requests.delete(requestId)) return;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        resolve(answer);
      };
      const onAbort = () => finish({ kind: 'unavailable' });
      const timer = setTimeout(onAbort, timeoutMs);
      signal.addEventListener('abort', onAbort, { once: true });
      this.requests.set(requestId, { resolve: finish });
      if (!conn.socket?.send(text)) finish({ kind: 'unavailable' });
    });
  }

  private async open(): Promise<void> {
    const target = this.options.target();
    if (!target) {
      this.wanted = false;
      this.rejectConnectWaiters(
        new LivelineError({ status: 0, code: 'no_session', detail: 'Start a session before connecting.' }),
      );
      return;
    }
    const conn: Connection = {
      socket: null,
      closed: false,
      welcome: null,
      lastContact: performance.now(),
      sawPing: false,
      heartbeat: undefined,
    };
    this.conn = conn;
    let socket: RealtimeSocket;
    try {
      socket = await this.options.connector(target.url, target.token, {
        open: () => {
          conn.lastContact = performance.now();
        },
        message: (text) => {
          if (this.conn === conn) this.receive(conn, text);
        },
        ping: () => {
          conn.lastContact = performance.now();
          conn.sawPing = true;
        },
        close: (info) => this.onClose(conn, info),
      });
    } catch (error) {
      this.onClose(conn, { code: 1006, reason: error instanceof Error ? error.message : String(error) });
      return;
    }
    if (conn.closed || this.conn !== conn) {
      // disconnect() came first, or the socket already failed.
      if (!conn.closed) conn.closed = true;
      socket.terminate();
      return;
    }
    conn.socket = socket;
  }

  private receive(conn: Connection, text: string): void {
    conn.lastContact = performance.now();
    const reading = readFrame(text);
    if (reading.kind === 'invalid') {
      // A frame this SDK cannot read. If it answers a batch of ours, that batch goes over HTTP now
      // rather than after a timeout; anything else is dropped, like a frame that is not JSON.
      const requestId = reading.value.requestId;
      if (typeof requestId === 'string') this.requests.get(requestId)?.resolve({ kind: 'unavailable' });
      return;
    }
    // Not JSON, not a message, or a type of a newer server: ignored.
    if (reading.kind !== 'message') return;
    const message = reading.message;
    switch (message.type) {
      case 'welcome':
        this.onWelcome(conn, {
          sessionId: message.sessionId,
          heartbeatIntervalMs: message.heartbeatIntervalMs,
        });
        return;
      case 'command':
        this.options.listener.command({
          commandId: message.commandId,
          name: message.name,
          data: message.data,
          issuedAt: message.issuedAt,
        });
        return;
      case 'command.cancel':
        this.options.listener.commandCancelled(message.commandId);
        return;
      case 'events.ack': {
        const pending = message.requestId === undefined ? undefined : this.requests.get(message.requestId);
        pending?.resolve({ kind: 'ack', accepted: message.accepted, duplicates: message.duplicates });
        return;
      }
      case 'error':
        this.onError(message);
        return;
    }
  }

  private onWelcome(conn: Connection, welcome: WelcomeInfo): void {
    const interval = welcome.heartbeatIntervalMs;
    conn.welcome = welcome;
    this.attempt = 0;
    clearInterval(conn.heartbeat);
    conn.heartbeat = setInterval(() => {
      if (conn.sawPing && performance.now() - conn.lastContact > DEAD_AFTER_INTERVALS * interval) {
        // The server pings every interval: this long without a frame, the connection is dead.
        conn.socket?.terminate();
        return;
      }
      conn.socket?.send(JSON.stringify({ type: 'heartbeat' } satisfies HeartbeatMessage));
    }, interval);
    const waiters = this.connectWaiters;
    this.connectWaiters = [];
    for (const waiter of waiters) waiter.resolve();
    this.options.listener.welcome(welcome);
  }

  private onError(m: ErrorMessage): void {
    const { code, message: detail, errors } = m;
    const pending = m.requestId === undefined ? undefined : this.requests.get(m.requestId);
    if (pending) {
      // A refused batch is final, like an HTTP 400; any other failure is retried over HTTP.
      pending.resolve(
        BATCH_REFUSALS.has(code)
          ? { kind: 'refused', error: new LivelineError({ status: 400, code, detail, errors }) }
          : { kind: 'unavailable' },
      );
      return;
    }
    const commandId = m.commandId === undefined ? '' : ` (command ${m.commandId})`;
    this.options.listener.serverError(
      new LivelineError({ status: 0, code, detail: `${detail}${commandId}`, errors }),
    );
  }

  private onClose(conn: Connection, info: SocketClose): void {
    if (this.conn !== conn) {
      conn.closed = true;
      return;
    }
    this.conn = null;
    conn.closed = true;
    clearInterval(conn.heartbeat);
    for (const pending of [...this.requests.values()]) pending.resolve({ kind: 'unavailable' });
    const closeWaiters = this.closeWaiters;
    this.closeWaiters = [];
    for (const done of closeWaiters) done();

    const welcomed = conn.welcome !== null;
    const { listener } = this.options;
    const stop = (error: LivelineError | null) => {
      this.wanted = false;
      if (welcomed) listener.disconnected({ code: info.code, reason: info.reason, willReconnect: false });
      if (error) this.rejectConnectWaiters(error);
    };
    if (!this.wanted) {
      // disconnect(): its waiters are already settled.
      stop(null);
      return;
    }
    if (info.code === CloseCode.replaced) {
      stop(
        new LivelineError({
          status: 0,
          code: 'replaced',
          detail: 'Another connection to this session replaced this one (4001).',
        }),
      );
      listener.replaced();
      return;
    }
    const permanent = permanentError(info);
    if (permanent) {
      this.haltedByAuth = info.status === 401 || info.status === 403;
      stop(permanent);
      listener.failed(permanent);
      return;
    }
    // 1012: the server is restarting and another process can take us at once. Else back off.
    const delayMs =
      info.code === CloseCode.restart
        ? backoffDelay(0, this.options.retry, this.options.random)
        : backoffDelay(this.attempt, this.options.retry, this.options.random);
    this.attempt = info.code === CloseCode.restart ? 1 : this.attempt + 1;
    if (welcomed) listener.disconnected({ code: info.code, reason: info.reason, willReconnect: true });
    listener.reconnecting({ attempt: this.attempt, delayMs, code: info.code });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.wanted && !this.conn) void this.open();
    }, delayMs);
  }

  private rejectConnectWaiters(error: LivelineError): void {
    const waiters = this.connectWaiters;
    this.connectWaiters = [];
    for (const waiter of waiters) waiter.reject(error);
  }
}

/** The refusals that retrying cannot fix, as errors; null for failures worth retrying. */
function permanentError(info: SocketClose): LivelineError | null {
  const said = info.reason ? `: ${info.reason}` : '';
  switch (info.code) {
    case CloseCode.forbidden:
      return new LivelineError({
        status: 0,
        code: 'forbidden',
        detail: `The session belongs to another player (4003${said}).`,
      });
    case CloseCode.notFound:
      return new LivelineError({ status: 0, code: 'not_found', detail: `No such session (4004${said}).` });
    case CloseCode.sessionEnded:
      return new LivelineError({
        status: 0,
        code: 'session_ended',
        detail: `The session has ended (4009${said}).`,
      });
  }
  const status = info.status;
  if (status === undefined || status < 400 || status >= 500 || status === 408 || status === 429) return null;
  const code =
    status === 401
      ? 'unauthorized'
      : status === 403
        ? 'forbidden'
        : status === 404
          ? 'not_found'
          : `http_${status}`;
  return new LivelineError({
    status,
    code,
    detail: `The server refused the WebSocket upgrade (HTTP ${status}).`,
  });
}

/** Whether `text` is at most `limit` bytes in UTF-8 (each UTF-16 unit takes 1 to 3 bytes). */
function fitsIn(text: string, limit: number): boolean {
  if (text.length * 3 <= limit) return true;
  if (text.length > limit) return false;
  return new TextEncoder().encode(text).length <= limit;
}
