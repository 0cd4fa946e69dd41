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

interface Connection extends DeviceLine {
  socket: WebSocket;
  /**
   * Serialises the device's messages: an ack is fully applied (a stream is `streaming`) before the
   * events the device sends next are stamped.
   */
  inbox: Promise<void>;
  lastTouch: number;
  alive: boolean;
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

  /** Server-side pings find dead peers: no pong within one interval and the socket is dropped. */
  pingAll() {
    for (const conn of this.byId.values()) {
      if (!conn.alive) {
        conn.socket.terminate();
        continue;
      }
      conn.alive = false;
      conn.socket.ping();
    }
  }

  /** Writes a `command` frame on a connection of this process; false when it is gone. */
  async sendCommand(connectionId: string, command: WireCommand): Promise<boolean> {
    const conn = this.byId.get(connectionId);
    if (!conn || conn.socket.readyState !== conn.socket.OPEN) return false;
    await new Promise<void>((resolve, reject) => {
      conn.socket.send(JSON.stringify({ type: 'command', ...command } satisfies ServerMessage), (err) =>
        err ? reject(err) : resolve(),
      );
    });
    return true;
  }

  /** Takes over a session's socket: the previous one (here or elsewhere) is closed with 4001. */
  async attach(socket: WebSocket, session: SessionRow, principal: DevicePrincipal, early: RawData[]) {
    const conn: Connection = {
      connectionId: randomUUID(),
      session,
      principal,
      socket,
      inbox: Promise.resolve(),
      lastTouch: 0,
      alive: true,
    };
    const sessionId = session.session_id;
    const previous = this.bySession.get(sessionId);
    this.bySession.set(sessionId, conn);
    this.byId.set(conn.connectionId, conn);
    if (previous) previous.socket.close(CLOSE.replaced, 'replaced by a newer connection');
    socket.on('pong', () => {
      conn.alive = true;
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
      conn.socket.close(CLOSE.replaced, 'replaced by a newer connection');
    } else if (message.type === 'close') conn.socket.close(message.code, message.reason);
  }

  private receive(conn: Connection, data: RawData, isBinary: boolean) {
    this.touch(conn);
    if (isBinary) {
      this.send(conn, {
        type: 'error',
        code: 'malformed_message',
        message: 'Messages are JSON text frames.',
      });
      return;
    }
    const parsed = parseDeviceMessage(data.toString());
    if (!parsed.ok) {
      this.send(conn, { type: 'error', code: parsed.code, message: parsed.message });
      return;
    }
    const message = parsed.message;
    conn.inbox = conn.inbox.then(() =>
      this.handleMessage(conn, message).catch((err) => {
        this.log.error({ err }, 'device message failed');
        this.send(conn, {
          type: 'error',
          code: 'internal',
          message: 'The message could not be processed.',
          ...(message.type === 'events' && message.requestId ? { requestId: message.requestId } : {}),
        });
      }),
    );
  }

  private async handleMessage(conn: Connection, message: DeviceMessage) {
    if (message.type === 'heartbeat' || !this.handlers) return;
    const answer =
      message.type === 'ack'
        ? await this.handlers.ack(conn, message)
        : await this.handlers.events(conn, message);
    if (answer) this.send(conn, answer);
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
