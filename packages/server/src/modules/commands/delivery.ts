import type { FastifyBaseLogger } from 'fastify';
import type { Bus, BusMessage, Presence, WireCommand } from '../../bus/index.ts';
import type { Clock } from '../../clock.ts';
import { NotedTimes } from '../../noted-times.ts';
import type { Storage } from '../../storage/index.ts';
import * as store from './store.ts';

/** What delivery needs of the sockets this process holds (the realtime hub provides it). */
export interface CommandTransport {
  /** Writes a `command` frame on the connection; false when that connection is gone. */
  sendCommand(connectionId: string, command: WireCommand): Promise<boolean>;
}

/** One device connection held by this process, as delivery tracks it. */
interface Line {
  connectionId: string;
  /** Commands written on this connection (a new connection gets unanswered ones again: at-least-once). */
  sent: Set<string>;
  /** Serialises writes, so commands reach the device in the order they were accepted. */
  chain: Promise<void>;
}

export interface DeliveryOptions {
  /** How long an accepted command waits for a process elsewhere to report it written (then: queued). */
  remoteWaitMs: number;
}

/**
 * Command delivery (CONTRACT §3, §9.1): a stored command travels on the bus, itself, to whichever
 * process holds the device's socket, which writes it in order and records it delivered
 * (group-committed). A new connection first gets what is pending in the store, then live commands.
 * The process that accepted the command learns of the delivery through a `delivered` message.
 */
export class CommandDelivery {
  private readonly lines = new Map<string, Line>();
  /** Commands accepted here whose delivery is awaited: set when a `delivered` message names them. */
  private readonly waiting = new Map<string, { at: number | null; wake: () => void }>();
  /**
   * Written to a socket here, delivery time not yet written: command → when. `flushMarks` (a job)
   * writes them a few times a second; a command answered before that needs no mark of its own (its
   * settlement records the delivery too), so most commands cost no write for their delivery.
   */
  private readonly unmarked = new NotedTimes();
  private transport: CommandTransport | null = null;

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly bus: Bus,
    private readonly presence: Presence,
    private readonly log: FastifyBaseLogger,
    private readonly options: DeliveryOptions,
  ) {
    bus.subscribe((message) => this.onBus(message));
  }

  /** Where commands are written: the sockets of this process. */
  useTransport(transport: CommandTransport) {
    this.transport = transport;
  }

  /**
   * Sends a stored command towards the device. Resolves with the time it was written to the
   * device's socket, or null when the device is not connected anywhere (it stays queued).
   */
  async deliver(sessionId: string, command: WireCommand): Promise<number | null> {
    let wake = () => {};
    const woken = new Promise<void>((resolve) => {
      wake = resolve;
    });
    const wait = { at: null as number | null, wake };
    this.waiting.set(command.commandId, wait);
    try {
      await this.bus.publish({ type: 'command', sessionId, origin: this.bus.nodeId, command });
      // Written here already, or not connected anywhere: nothing to wait for.
      if (wait.at !== null || !(await this.presence.connected([sessionId])).has(sessionId)) return wait.at;
      // Held by another process: wait for its word, briefly.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        woken,
        new Promise((resolve) => (timer = setTimeout(resolve, this.options.remoteWaitMs))),
      ]);
      clearTimeout(timer);
      return wait.at;
    } finally {
      this.waiting.delete(command.commandId);
    }
  }

  /** A device connected to this process: it gets every pending command, oldest first. */
  opened(sessionId: string, connectionId: string): Promise<void> {
    const line: Line = { connectionId, sent: new Set(), chain: Promise.resolve() };
    this.lines.set(sessionId, line);
    return this.replay(sessionId, line);
  }

  /**
   * This process may have missed commands sent to it (the bus was cut and is back): every device
   * it holds gets what is pending in the store and was not yet written on its connection.
   */
  resync(): Promise<void> {
    return Promise.all([...this.lines].map(([sessionId, line]) => this.replay(sessionId, line))).then(
      () => undefined,
    );
  }

  private replay(sessionId: string, line: Line): Promise<void> {
    return this.enqueue(sessionId, line, async () => {
      const pending = await store.pendingCommands(this.storage.db, sessionId, this.clock.now());
      return pending.map((row) => ({
        commandId: row.command_id,
        name: row.name,
        data: JSON.parse(row.data) as unknown,
        issuedAt: row.issued_at,
      }));
    });
  }

  /** When this process wrote the command to its device, while that is not yet written down. */
  writtenAt(commandId: string): number | undefined {
    return this.unmarked.get(commandId);
  }

  /** The command was settled (its settlement records the delivery): no mark of its own is needed. */
  settled(commandId: string) {
    this.unmarked.forget(commandId);
  }

  /** Writes the delivery times noted since the last flush, in one transaction. */
  async flushMarks(): Promise<number> {
    if (this.unmarked.size === 0) return 0;
    const byTime = this.unmarked.take();
    try {
      await this.storage.db.transaction().execute(async (trx) => {
        for (const [at, ids] of byTime) await store.markDelivered(trx, ids, at);
      });
    } catch (err) {
      this.unmarked.restore(byTime);
      throw err;
    }
    return [...byTime.values()].reduce((n, ids) => n + ids.length, 0);
  }

  /** The connection closed: what it was sent but not answered goes again on the next one. */
  closed(sessionId: string, connectionId: string) {
    if (this.lines.get(sessionId)?.connectionId === connectionId) this.lines.delete(sessionId);
  }

  private async onBus(message: BusMessage) {
    if (message.type === 'command') {
      const line = this.lines.get(message.sessionId);
      if (line) await this.enqueue(message.sessionId, line, async () => [message.command]);
    } else if (message.type === 'delivered') {
      const at = this.clock.now();
      for (const id of message.commandIds) {
        const wait = this.waiting.get(id);
        if (wait) {
          wait.at = at;
          wait.wake();
        }
      }
    }
  }

  /** Writes commands after everything queued before them on the line; reports them delivered. */
  private enqueue(sessionId: string, line: Line, commands: () => Promise<WireCommand[]>): Promise<void> {
    line.chain = line.chain
      .then(async () => {
        const fresh = (await commands()).filter((c) => !line.sent.has(c.commandId));
        if (fresh.length === 0 || !this.transport) return;
        const written: string[] = [];
        await Promise.all(
          fresh.map(async (command) => {
            line.sent.add(command.commandId);
            if (await this.transport!.sendCommand(line.connectionId, command))
              written.push(command.commandId);
          }),
        );
        if (written.length === 0) return;
        // The delivery time is written in the background (`flushMarks`): the accepting process is
        // told at once, and this process shows the command delivered meanwhile (`writtenAt`).
        const at = this.clock.now();
        for (const id of written) this.unmarked.note(id, at);
        await this.bus.publish({
          type: 'delivered',
          sessionId,
          origin: this.bus.nodeId,
          commandIds: written,
        });
      })
      .catch((err) => this.log.warn({ err, sessionId }, 'command delivery failed'));
    return line.chain;
  }
}
