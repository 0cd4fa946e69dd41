import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { RawData, WebSocket } from 'ws';
import type { BusMessage } from '../../bus/bus.ts';
import type { AppContext } from '../../context.ts';
import { ProblemError } from '../../http/problem.ts';
import type { DevicePrincipal } from '../auth/tokens.ts';
import { ingestBatch } from '../events/batch.ts';
import type { SessionRow } from '../sessions/service.ts';
import { CLOSE, type DeviceMessage, parseDeviceMessage, type ServerMessage } from './protocol.ts';

/** Device contact over the socket moves `lastSeenAt` at most this often. */
const TOUCH_EVERY_MS = 1000;

interface Connection {
  id: string;
  session: SessionRow;
  principal: DevicePrincipal;
  socket: WebSocket;
  /** Commands written on this connection (a reconnect gets unanswered ones again: at-least-once). */
  sent: Set<string>;
  /** Serialises command writes, so commands reach the device in the order they were accepted. */
  chain: Promise<void>;
  /**
   * Serialises the device's messages: an ack is fully applied (a stream is `streaming`) before the
   * events the device sends next are stamped.
   */
  inbox: Promise<void>;
  lastTouch: number;
  alive: boolean;
}

/**
 * The device sockets this process holds. Commands reach them through the bus (`flush`), whichever
 * process accepted them; a session has one live socket across all processes (`takeover`).
 */
export class RealtimeHub {
  private readonly local = new Map<string, Connection>();
  private pinger: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: AppContext,
    private readonly log: FastifyBaseLogger,
  ) {
    ctx.bus.subscribe((message) => this.onBus(message));
    // An ended session's socket is closed wherever it is (the device can still post late events).
    ctx.signals.on('session.ended', ({ sessionId }) =>
      ctx.bus.publish({
        type: 'close',
        sessionId,
        code: CLOSE.sessionEnded,
        reason: 'the session has ended',
      }),
    );
    ctx.sessions.addDecorator(async (ids) => {
      const connected = await ctx.bus.connected(ids);
      return new Map([...connected].map((id) => [id, { connected: true }]));
    });
  }

  /** Server-side pings find dead peers: no pong within one interval and the socket is dropped. */
  start() {
    this.pinger = setInterval(() => {
      for (const conn of this.local.values()) {
        if (!conn.alive) {
          conn.socket.terminate();
          continue;
        }
        conn.alive = false;
        conn.socket.ping();
      }
    }, this.ctx.config.heartbeatIntervalMs);
    this.pinger.unref();
  }

  /** Closes every socket with 1012 (service restart): devices reconnect to another process. */
  stop() {
    clearInterval(this.pinger);
    for (const conn of this.local.values()) conn.socket.close(CLOSE.restart, 'server restarting');
  }

  get size() {
    return this.local.size;
  }

  /** Takes over a session's socket: the previous one (here or elsewhere) is closed with 4001. */
  async attach(socket: WebSocket, session: SessionRow, principal: DevicePrincipal, early: RawData[]) {
    const conn: Connection = {
      id: randomUUID(),
      session,
      principal,
      socket,
      sent: new Set(),
      chain: Promise.resolve(),
      inbox: Promise.resolve(),
      lastTouch: 0,
      alive: true,
    };
    const previous = this.local.get(session.session_id);
    this.local.set(session.session_id, conn);
    if (previous) previous.socket.close(CLOSE.replaced, 'replaced by a newer connection');
    socket.on('pong', () => {
      conn.alive = true;
    });
    socket.on('message', (data, isBinary) => this.receive(conn, data, isBinary));
    socket.on('close', () => {
      if (this.local.get(session.session_id) === conn) this.local.delete(session.session_id);
      this.ctx.bus
        .release(session.session_id, conn.id)
        .catch((err) => this.log.error({ err }, 'bus release failed'));
    });
    socket.on('error', (err) => this.log.debug({ err }, 'device socket error'));
    await this.ctx.bus.claim(session.session_id, conn.id);
    await this.ctx.bus.publish({ type: 'takeover', sessionId: session.session_id, connectionId: conn.id });
    this.send(conn, {
      type: 'welcome',
      sessionId: session.session_id,
      heartbeatIntervalMs: this.ctx.config.heartbeatIntervalMs,
    });
    this.touch(conn);
    for (const data of early) this.receive(conn, data, false);
    await this.flush(conn);
  }

  private async onBus(message: BusMessage) {
    const conn = this.local.get(message.sessionId);
    if (!conn) return;
    if (message.type === 'flush') await this.flush(conn);
    else if (message.type === 'takeover' && message.connectionId !== conn.id) {
      this.local.delete(message.sessionId);
      conn.socket.close(CLOSE.replaced, 'replaced by a newer connection');
    } else if (message.type === 'close') conn.socket.close(message.code, message.reason);
  }

  /** Writes the session's pending commands, in order, then records them as delivered. */
  private flush(conn: Connection): Promise<void> {
    conn.chain = conn.chain
      .then(async () => {
        if (conn.socket.readyState !== conn.socket.OPEN) return;
        const pending = await this.ctx.commands.pending(conn.session.session_id);
        const fresh = pending.filter((row) => !conn.sent.has(row.command_id));
        if (fresh.length === 0) return;
        await Promise.all(
          fresh.map((row) => {
            conn.sent.add(row.command_id);
            return this.sendAsync(conn, {
              type: 'command',
              commandId: row.command_id,
              name: row.name,
              data: JSON.parse(row.data) as unknown,
              issuedAt: row.issued_at,
            });
          }),
        );
        await this.ctx.commands.markDelivered(fresh.map((row) => row.command_id));
      })
      .catch((err) => this.log.warn({ err, sessionId: conn.session.session_id }, 'command delivery failed'));
    return conn.chain;
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
      this.handle(conn, message).catch((err) => {
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

  private async handle(conn: Connection, message: DeviceMessage) {
    const sessionId = conn.session.session_id;
    if (message.type === 'heartbeat') return;
    if (message.type === 'ack') {
      const result = await this.ctx.commands.acknowledge(
        sessionId,
        message.commandId,
        message.ok,
        message.error,
      );
      if (result === 'unknown') {
        this.send(conn, {
          type: 'error',
          code: 'unknown_command',
          message: 'No such command for this session.',
          commandId: message.commandId,
        });
      } else if (result === 'expired') {
        this.send(conn, {
          type: 'error',
          code: 'command_expired',
          message: 'The command expired before this ack arrived.',
          commandId: message.commandId,
        });
      }
      return;
    }
    const { requestId } = message;
    const session = (await this.ctx.sessions.findForDevice(conn.principal, sessionId)) ?? conn.session;
    try {
      const result = await ingestBatch(this.ctx, session, { events: message.events }, 'device');
      this.send(conn, { type: 'events.ack', ...result, ...(requestId ? { requestId } : {}) });
    } catch (err) {
      if (!(err instanceof ProblemError)) throw err;
      this.send(conn, {
        type: 'error',
        code: err.code,
        message: err.message,
        errors: err.errors,
        ...(requestId ? { requestId } : {}),
      });
    }
  }

  private touch(conn: Connection) {
    const now = this.ctx.clock.now();
    if (now - conn.lastTouch < TOUCH_EVERY_MS) return;
    conn.lastTouch = now;
    this.ctx.sessions.touch(conn.session.session_id).catch((err) => this.log.error({ err }, 'touch failed'));
  }

  private send(conn: Connection, message: ServerMessage) {
    if (conn.socket.readyState === conn.socket.OPEN) conn.socket.send(JSON.stringify(message));
  }

  private sendAsync(conn: Connection, message: ServerMessage) {
    return new Promise<void>((resolve, reject) => {
      conn.socket.send(JSON.stringify(message), (err) => (err ? reject(err) : resolve()));
    });
  }
}
