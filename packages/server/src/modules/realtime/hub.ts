import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { RawData, WebSocket } from 'ws';
import type { Bus, BusMessage, Presence, WireCommand } from '../../bus/index.ts';
import type { Clock } from '../../clock.ts';
import type { DevicePrincipal } from '../auth/index.ts';
import type { SessionRow } from '../sessions/index.ts';
import { CLOSE, type DeviceMessage, parseDeviceMessage, type ServerMessage } from './protocol.ts';

/** Device contact over the socket moves `lastSeenAt` at most this often. */
const TOUCH_EVERY_MS = 1000;

/** The device's side of one connection, as the modules that answer its messages see it. */
export interface DeviceLine {
  connectionId: string;
  session: SessionRow;
  principal: DevicePrincipal;
  /** Closed because a newer connection took the session over (4001): the device is still there. */
  replaced: boolean;
}

type AckMessage = Extract<DeviceMessage, { type: 'ack' }>;
type EventsMessage = Extract<DeviceMessage, { type: 'events' }>;

/**
 * What the device's connection means to the rest of the server. The hub is transport only; the
 * wiring (`wire.ts`) supplies these: delivery replays pending commands on `opened`, commands settle
 * acks, events ingests batches, sessions record contact.
 */
export interface DeviceHandlers {
  opened(line: DeviceLine): Promise<void>;
  closed(line: DeviceLine): void;
  /** An `error` frame to answer with, or null. */
  ack(line: DeviceLine, message: AckMessage): Promise<ServerMessage | null>;
  /** The `events.ack` or `error` frame to answer with. */
  events(line: DeviceLine, message: EventsMessage): Promise<ServerMessage>;
  /** The device was heard from (noted, not written: contact is written in batches). */
  contact(sessionId: string): void;
}

/** One charge to the device's request budget: within it, or refused until the window ends. */
export type Spend = { ok: true } | { ok: false; retryAfterS: number };

/**
 * What one device may send over its socket (CONTRACT §8; see the README for which frames count):
 * its request budget, shared with its HTTP requests, and its connection's backlog.
 */
export interface InboundLimits {
  /** Charges one request to the device's budget. */
  spend(principal: DevicePrincipal): Promise<Spend>;
  /**
   * Unprocessed messages, and their bytes, at which the socket is no longer read (TCP holds the rest
   * back); it is read again once both are down to half.
   */
  pausePending: number;
  pauseBytes: number;
  /** Unprocessed messages beyond which the socket is closed with 1008. */
  maxPending: number;
}

const WITHIN: Spend = { ok: true };
const NO_LIMITS: InboundLimits = {
  spend: () => Promise.resolve(WITHIN),
  pausePending: Number.POSITIVE_INFINITY,
  pauseBytes: Number.POSITIVE_INFINITY,
  maxPending: Number.POSITIVE_INFINITY,
};

const sizeOf = (data: RawData) =>
  Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;

type Reading = ReturnType<typeof parseDeviceMessage>;
const BINARY: Reading = { ok: false, code: 'malformed_message', message: 'Messages are JSON text frames.' };

interface Connection extends DeviceLine {
  socket: WebSocket;
  /**
   * Serialises the device's messages: an ack is fully applied (a stream is `streaming`) before the
   * events the device sends next are stamped.
   */
  inbox: Promise<void>;
  lastTouch: number;
  /** A frame or a pong came in since the last ping round (`pingAll`). */
  heard: boolean;
  /** The last round pinged the socket, having heard nothing from it for a round. */
  pinged: boolean;
  limits: InboundLimits;
  /** Messages received and not yet answered (an answer counts once written to the socket), and their bytes. */
  pending: number;
  pendingBytes: number;
  /** Reading stopped because `pending` reached `limits.pausePending`. */
  paused: boolean;
  /** Closed for flooding: whatever still arrives is dropped. */
  flooded: boolean;
}

export interface HubOptions {
  heartbeatIntervalMs: number;
}

/**
 * The device sockets this process holds: frames in and out, heartbeats, takeover (one live socket per
 * session across every process, 4001) and closing on request from anywhere (`close` on the bus).
 */
export class RealtimeHub {
  /** By session id. */
  private readonly bySession = new Map<string, Connection>();
  private readonly byId = new Map<string, Connection>();
  private handlers: DeviceHandlers | null = null;
  /** Frames taken in and not yet handled, on every connection (closed ones too); see `drain`. */
  private unhandled = 0;
  private drained: (() => void)[] = [];

  constructor(
    private readonly bus: Bus,
    private readonly presence: Presence,
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    private readonly options: HubOptions,
  ) {
    bus.subscribe((message) => this.onBus(message));
  }

  /** Sets what the device's messages and connections mean (see `DeviceHandlers`). */
  handle(handlers: DeviceHandlers) {
    this.handlers = handlers;
  }

  /**
   * Resolves once every frame taken in so far has been handled, also on sockets closed meanwhile: the
   * shutdown waits for it after closing the sockets and before closing the store.
   */
  drain(): Promise<void> {
    if (this.unhandled === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  /**
   * Server-side pings find dead peers, run every heartbeat interval. A socket heard from since the
   * last round (a heartbeat, any frame, a pong) is not pinged: what it sent shows it alive, and
   * devices heartbeat at that interval anyway, so a fleet costs no ping at all. One silent for a
   * whole round is pinged; silent still at the next round (no pong either), it is dropped.
   */
  pingAll() {
    for (const conn of this.byId.values()) {
      if (conn.heard) {
        conn.heard = false;
        conn.pinged = false;
      } else if (conn.pinged) {
        conn.socket.terminate();
      } else {
        conn.pinged = true;
        conn.socket.ping();
      }
    }
  }

  /**
   * Closes this process's sockets whose token is no longer honoured: `refusal` says why for each
   * connection's principal — revoked (4003) or expired (4401) — or null to keep it. Cheap enough to
   * run over every socket each second. Returns how many were closed.
   */
  closeRefused(refusal: (principal: DevicePrincipal) => 'revoked' | 'expired' | null): number {
    let closed = 0;
    for (const conn of this.byId.values()) {
      const why = refusal(conn.principal);
      if (why === null || conn.socket.readyState !== conn.socket.OPEN) continue;
      if (why === 'revoked') conn.socket.close(CLOSE.forbidden, 'the token has been revoked');
      else conn.socket.close(CLOSE.tokenExpired, 'the token has expired');
      closed++;
    }
    return closed;
  }

  /**
   * Writes a `command` frame for each command on a connection of this process, in order. True once
   * the socket has taken them all (the last write's callback: a socket writes in order, and one that
   * fails fails every write after); false when the connection is gone or failed.
   */
  sendCommands(connectionId: string, commands: readonly WireCommand[]): Promise<boolean> {
    const conn = this.byId.get(connectionId);
    if (!conn || conn.socket.readyState !== conn.socket.OPEN) return Promise.resolve(false);
    if (commands.length === 0) return Promise.resolve(true);
    const { socket } = conn;
    return new Promise<boolean>((resolve) => {
      const last = commands.length - 1;
      for (let i = 0; i < last; i++)
        socket.send(JSON.stringify({ type: 'command', ...commands[i] } satisfies ServerMessage));
      socket.send(JSON.stringify({ type: 'command', ...commands[last] } satisfies ServerMessage), (err) =>
        resolve(!err),
      );
    });
  }

  /** Writes a `command.cancel` frame on a connection of this process; false when it is gone. */
  async sendCancel(connectionId: string, commandId: string): Promise<boolean> {
    const conn = this.byId.get(connectionId);
    if (!conn || conn.socket.readyState !== conn.socket.OPEN) return false;
    await new Promise<void>((resolve, reject) => {
      conn.socket.send(
        JSON.stringify({ type: 'command.cancel', commandId } satisfies ServerMessage),
        (err) => (err ? reject(err) : resolve()),
      );
    });
    return true;
  }

  /** Takes over a session's socket: the previous one (here or elsewhere) is closed with 4001. */
  async attach(
    socket: WebSocket,
    session: SessionRow,
    principal: DevicePrincipal,
    early: RawData[],
    limits: InboundLimits = NO_LIMITS,
  ) {
    const conn: Connection = {
      connectionId: randomUUID(),
      session,
      principal,
      socket,
      inbox: Promise.resolve(),
      lastTouch: 0,
      heard: true,
      pinged: false,
      replaced: false,
      limits,
      pending: 0,
      pendingBytes: 0,
      paused: false,
      flooded: false,
    };
    const sessionId = session.session_id;
    const previous = this.bySession.get(sessionId);
    this.bySession.set(sessionId, conn);
    this.byId.set(conn.connectionId, conn);
    if (previous) {
      previous.replaced = true;
      previous.socket.close(CLOSE.replaced, 'replaced by a newer connection');
    }
    socket.on('pong', () => {
      conn.heard = true;
    });
    socket.on('message', (data, isBinary) => this.receive(conn, data, isBinary));
    socket.on('close', () => {
      if (this.bySession.get(sessionId) === conn) this.bySession.delete(sessionId);
      this.byId.delete(conn.connectionId);
      this.handlers?.closed(conn);
      this.presence
        .release(sessionId, conn.connectionId)
        .catch((err) => this.log.error({ err }, 'presence release failed'));
    });
    socket.on('error', (err) => this.log.debug({ err }, 'device socket error'));
    await this.presence.claim(sessionId, conn.connectionId);
    await this.bus.publish({ type: 'takeover', sessionId, connectionId: conn.connectionId });
    this.send(conn, { type: 'welcome', sessionId, heartbeatIntervalMs: this.options.heartbeatIntervalMs });
    this.touch(conn);
    for (const data of early) this.receive(conn, data, false);
    await this.handlers?.opened(conn);
  }

  private onBus(message: BusMessage) {
    if (message.type !== 'takeover' && message.type !== 'close') return;
    const conn = this.bySession.get(message.sessionId);
    if (!conn) return;
    if (message.type === 'takeover' && message.connectionId !== conn.connectionId) {
      this.bySession.delete(message.sessionId);
      conn.replaced = true;
      conn.socket.close(CLOSE.replaced, 'replaced by a newer connection');
    } else if (message.type === 'close') conn.socket.close(message.code, message.reason);
  }

  /**
   * A frame in. Heartbeats need nothing more. Every other frame is handled and answered in order
   * and counts as pending until its answer is written: at `pausePending` the socket is not read any
   * more (TCP pushes back on the device, also one that does not read its answers), beyond
   * `maxPending` — frames that were already read — it is closed with 1008. `events` frames and
   * refused frames are charged to the device's request budget as they arrive; acks are not.
   */
  private receive(conn: Connection, data: RawData, isBinary: boolean) {
    if (conn.flooded) return;
    conn.heard = true;
    this.touch(conn);
    const reading = isBinary ? BINARY : parseDeviceMessage(data.toString());
    if (reading.ok && reading.message.type === 'heartbeat') return;
    if (++conn.pending > conn.limits.maxPending) {
      conn.flooded = true;
      conn.socket.close(CLOSE.policyViolation, 'too many unprocessed messages');
      // Read on, so the device's close frame is seen; what it still sends is dropped.
      conn.socket.resume();
      return;
    }
    const size = sizeOf(data);
    conn.pendingBytes += size;
    if (
      !conn.paused &&
      (conn.pending >= conn.limits.pausePending || conn.pendingBytes >= conn.limits.pauseBytes)
    ) {
      conn.paused = true;
      conn.socket.pause();
    }
    const charge =
      !reading.ok || reading.message.type === 'events' ? conn.limits.spend(conn.principal) : null;
    this.unhandled++;
    conn.inbox = conn.inbox.then(() => this.process(conn, reading, charge, size));
  }

  /** Handles one frame in its turn and answers it, then counts it handled (`drain`); never fails. */
  private async process(conn: Connection, reading: Reading, charge: Promise<Spend> | null, size: number) {
    const message = reading.ok ? reading.message : null;
    const requestId = message?.type === 'events' && message.requestId ? { requestId: message.requestId } : {};
    let answer: ServerMessage | null;
    try {
      const spent = charge ? await charge : WITHIN;
      if (!spent.ok) {
        answer = {
          type: 'error',
          code: 'rate_limited',
          message: `Too many requests from this device; retry in ${spent.retryAfterS} s.`,
          retryAfterS: spent.retryAfterS,
          ...requestId,
        };
      } else if (!reading.ok) answer = { type: 'error', code: reading.code, message: reading.message };
      else answer = await this.handleMessage(conn, reading.message);
    } catch (err) {
      this.log.error({ err }, 'device message failed');
      answer = {
        type: 'error',
        code: 'internal',
        message: 'The message could not be processed.',
        ...requestId,
      };
    }
    if (answer && conn.socket.readyState === conn.socket.OPEN) {
      conn.socket.send(JSON.stringify(answer), () => this.processed(conn, size));
    } else this.processed(conn, size);
    if (--this.unhandled === 0) for (const resolve of this.drained.splice(0)) resolve();
  }

  private processed(conn: Connection, size: number) {
    conn.pending--;
    conn.pendingBytes -= size;
    if (
      conn.paused &&
      conn.pending <= conn.limits.pausePending / 2 &&
      conn.pendingBytes <= conn.limits.pauseBytes / 2
    ) {
      conn.paused = false;
      conn.socket.resume();
    }
  }

  private handleMessage(conn: Connection, message: DeviceMessage): Promise<ServerMessage | null> | null {
    if (message.type === 'heartbeat' || !this.handlers) return null;
    return message.type === 'ack' ? this.handlers.ack(conn, message) : this.handlers.events(conn, message);
  }

  private touch(conn: Connection) {
    const now = this.clock.now();
    if (now - conn.lastTouch < TOUCH_EVERY_MS || !this.handlers) return;
    conn.lastTouch = now;
    this.handlers.contact(conn.session.session_id);
  }

  private send(conn: Connection, message: ServerMessage) {
    if (conn.socket.readyState === conn.socket.OPEN) conn.socket.send(JSON.stringify(message));
  }
}
