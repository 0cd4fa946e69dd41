import type { FastifyBaseLogger } from 'fastify';
import type { Bus, BusMessage, Presence, WireCommand } from '../../bus/index.ts';
import type { Clock } from '../../clock.ts';
import { NotedTimes } from '../../noted-times.ts';
import type { Storage } from '../../storage/index.ts';
import * as store from './store.ts';

/** What delivery needs of the sockets this process holds (the realtime hub provides it). */
export interface CommandTransport {
  /**
   * Writes a `command` frame for each command on the connection, in order; true once the socket has
   * taken every one, false when that connection is gone or failed.
   */
  sendCommands(connectionId: string, commands: readonly WireCommand[]): Promise<boolean>;
  /** Writes a `command.cancel` frame on the connection; false when that connection is gone. */
  sendCancel(connectionId: string, commandId: string): Promise<boolean>;
}

/**
 * Pending commands a new connection gets are read and written this many at a time: the next page is
 * read once the previous one has left for the device (every frame's write callback has fired, i.e.
 * the socket's buffer took it), so a device back after a long time is not sent one huge burst.
 */
export const REPLAY_PAGE = 100;

/** One device connection held by this process, as delivery tracks it. */
interface Line {
  connectionId: string;
  /**
   * Commands written on this connection, with their names (a new connection gets unanswered ones
   * again: at-least-once). A cancelled command is marked too, so it is not written after its cancel.
   */
  sent: Map<string, string>;
  /** Serialises writes, so commands reach the device in the order they were accepted. */
  chain: Promise<void>;
}

/** A command accepted here, waiting for word of its delivery (`at`); `wake` is set once someone waits. */
interface Waiting {
  at: number | null;
  wake: (() => void) | null;
}

export interface DeliveryOptions {
  /** How long an accepted command waits for a process elsewhere to report it written (then: queued). */
  remoteWaitMs: number;
  /**
   * Other processes count this one's commands (the queue quota across processes): the commands
   * accepted here are announced to every node (`commands.accepted`) at most this often; 0: never.
   */
  announceEveryMs?: number;
}

/** Commands one `commands.accepted` message names at most (a cohort-wide command may name thousands). */
export const ACCEPTED_PER_MESSAGE = 1000;

/**
 * Command delivery (CONTRACT §3, §9.1): a stored command travels on the bus, itself, to whichever
 * process holds the device's socket, which writes it in order and records it delivered
 * (group-committed). A new connection first gets what is pending in the store, then live commands.
 * The process that accepted the command learns of the delivery through a `delivered` message.
 */
export class CommandDelivery {
  private readonly lines = new Map<string, Line>();
  /** Commands accepted here whose delivery is awaited: set when a `delivered` message names them. */
  private readonly waiting = new Map<string, Waiting>();
  /**
   * Written to a socket here, delivery time not yet written: command → when. `flushMarks` (a job)
   * writes them a few times a second; a command answered before that needs no mark of its own (its
   * settlement records the delivery too), so most commands cost no write for their delivery.
   */
  private readonly unmarked = new NotedTimes();
  private transport: CommandTransport | null = null;
  private readonly elsewhere: ((sessionId: string, commandId: string, expiresAt: number) => void)[] = [];
  /** Accepted here since the last `commands.accepted` message: `[sessionId, commandId, expiresAt]`. */
  private accepted: [string, string, number][] = [];
  private announcing: NodeJS.Timeout | null = null;

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
   * Hears of every command another process accepted (its `commands.accepted` messages, ~100 ms
   * after): the queue quota counts them.
   */
  onCommandElsewhere(listener: (sessionId: string, commandId: string, expiresAt: number) => void) {
    this.elsewhere.push(listener);
  }

  /**
   * A command was stored here: other processes hear of it with the others of the next moments, in
   * one message (`announceEveryMs`), not one message a command.
   */
  accept(sessionId: string, commandId: string, expiresAt: number) {
    const every = this.options.announceEveryMs ?? 0;
    if (every <= 0) return;
    this.accepted.push([sessionId, commandId, expiresAt]);
    if (this.announcing) return;
    this.announcing = setTimeout(() => {
      this.announcing = null;
      void this.announce();
    }, every);
    this.announcing.unref();
  }

  private async announce() {
    const commands = this.accepted;
    this.accepted = [];
    for (let i = 0; i < commands.length; i += ACCEPTED_PER_MESSAGE)
      await this.bus.publish({
        type: 'commands.accepted',
        origin: this.bus.nodeId,
        commands: commands.slice(i, i + ACCEPTED_PER_MESSAGE),
      });
  }

  /**
   * Sends a stored command towards the device. Resolves with the time it was written to the
   * device's socket, or null when the device is not connected anywhere (it stays queued).
   */
  async deliver(sessionId: string, command: WireCommand): Promise<number | null> {
    const self = this.bus.nodeId;
    // Held here: written now, no one asked. Else the node holding the socket, if any, is asked for.
    const holder = this.lines.has(sessionId)
      ? { node: self, addressable: true }
      : (await this.presence.holders([sessionId])).get(sessionId);
    // Not connected anywhere: it stays queued, and the device's next connection gets it.
    if (!holder) return null;
    const wait: Waiting = { at: null, wake: null };
    this.waiting.set(command.commandId, wait);
    try {
      const message: BusMessage = { type: 'command', sessionId, origin: self, command, direct: true };
      // A node of an earlier version hears only what is published to every node.
      await (holder.addressable ? this.bus.send(holder.node, message) : this.bus.publish(message));
      // Written here already, or here was where to write it (the connection just went): no word to wait for.
      if (wait.at !== null || holder.node === self) return wait.at;
      // Held by another process: wait for its word (unless it came meanwhile), briefly.
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        wait.wake = resolve;
        timer = setTimeout(resolve, this.options.remoteWaitMs);
      });
      clearTimeout(timer);
      return wait.at;
    } finally {
      this.waiting.delete(command.commandId);
    }
  }

  /** A device connected to this process: it gets every pending command, oldest first. */
  opened(sessionId: string, connectionId: string): Promise<void> {
    const line: Line = { connectionId, sent: new Map(), chain: Promise.resolve() };
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

  /**
   * The line gets what is pending in the store, oldest first, in pages of `REPLAY_PAGE` (the next
   * page once the last one is written); commands accepted meanwhile wait behind it on the line.
   */
  private replay(sessionId: string, line: Line): Promise<void> {
    line.chain = line.chain
      .then(async () => {
        let after: string | null = null;
        for (;;) {
          const page = await store.pendingPage(
            this.storage.db,
            sessionId,
            this.clock.now(),
            after,
            REPLAY_PAGE,
          );
          if (page.length === 0) return;
          after = page[page.length - 1].command_id;
          await this.write(
            sessionId,
            line,
            null,
            page.map((row) => ({
              commandId: row.command_id,
              name: row.name,
              data: JSON.parse(row.data) as unknown,
              issuedAt: row.issued_at,
            })),
          );
          // A shorter page was the last; a connection replaced meanwhile gets its own replay.
          if (page.length < REPLAY_PAGE || this.lines.get(sessionId) !== line) return;
        }
      })
      .catch((err) => this.log.warn({ err, sessionId }, 'command replay failed'));
    return line.chain;
  }

  /**
   * Tells the device that a command was cancelled (`command.cancel`), through the process that holds
   * its socket, if any; resolves once a socket of this process has been written to.
   */
  cancel(sessionId: string, commandId: string): Promise<void> {
    return this.bus.publish({ type: 'command.cancel', sessionId, commandId });
  }

  /** A cancelled command is not written to this line any more, and the device hears of the cancel. */
  private onCancel(sessionId: string, commandId: string): Promise<void> {
    const line = this.lines.get(sessionId);
    if (!line || !this.transport) return Promise.resolve();
    const transport = this.transport;
    line.sent.set(commandId, '');
    line.chain = line.chain
      .then(async () => {
        await transport.sendCancel(line.connectionId, commandId);
      })
      .catch((err) => this.log.warn({ err, sessionId }, 'command cancel not sent'));
    return line.chain;
  }

  /**
   * The name of a command this process wrote to the session's connection (what an ack arriving on it
   * answers), or undefined when it does not know.
   */
  nameOf(sessionId: string, commandId: string): string | undefined {
    return this.lines.get(sessionId)?.sent.get(commandId) || undefined;
  }

  /** When this process wrote the command to its device, while that is not yet written down. */
  writtenAt(commandId: string): number | undefined {
    return this.unmarked.get(commandId);
  }

  /**
   * The command was settled (its settlement records the delivery): no mark of its own is needed,
   * and its connection need not remember having written it.
   */
  settled(sessionId: string, commandId: string) {
    this.unmarked.forget(commandId);
    this.lines.get(sessionId)?.sent.delete(commandId);
  }

  /**
   * Writes the delivery times noted since the last flush, in one transaction sent whole
   * (`Storage.atomically`): it never holds SQLite's writer across a turn of this thread.
   */
  async flushMarks(): Promise<number> {
    if (this.unmarked.size === 0) return 0;
    // The times stay readable (`writtenAt`) until committed: a command never looks queued meanwhile.
    return this.unmarked.flush(async (byTime) => {
      const { db, dialect, skipLocked } = this.storage;
      await this.storage.atomically(
        store.deliveryMarkStatements(db, dialect, byTime, { lockInOrder: skipLocked }),
      );
    });
  }

  /** The connection closed: what it was sent but not answered goes again on the next one. */
  closed(sessionId: string, connectionId: string) {
    if (this.lines.get(sessionId)?.connectionId === connectionId) this.lines.delete(sessionId);
  }

  /** A promise only for what it writes to a socket here (the bus awaits only those). */
  private onBus(message: BusMessage): Promise<void> | undefined {
    if (message.type === 'commands.accepted') {
      if (message.origin !== this.bus.nodeId)
        for (const [sessionId, commandId, expiresAt] of message.commands)
          for (const heard of this.elsewhere) heard(sessionId, commandId, expiresAt);
      return undefined;
    }
    if (message.type === 'command') {
      const line = this.lines.get(message.sessionId);
      if (!line) return undefined;
      return this.enqueue(message.sessionId, line, message.direct ? message.origin : null, message.command);
    }
    if (message.type === 'command.cancel') return this.onCancel(message.sessionId, message.commandId);
    if (message.type === 'delivered') {
      // The time the writing node notes down (`write`), so the 202 and the stored row agree.
      const at = message.at ?? this.clock.now();
      for (const id of message.commandIds) {
        const wait = this.waiting.get(id);
        if (wait) {
          wait.at = at;
          wait.wake?.();
        }
      }
    }
    return undefined;
  }

  /** Writes a command after everything queued before it on the line; reports it delivered. */
  private enqueue(sessionId: string, line: Line, origin: string | null, command: WireCommand): Promise<void> {
    line.chain = line.chain
      .then(() => this.write(sessionId, line, origin, [command]))
      .catch((err) => this.log.warn({ err, sessionId }, 'command delivery failed'));
    return line.chain;
  }

  /**
   * Writes the commands the line has not been sent yet, in order, and reports them delivered: to
   * `origin` alone when it is known to hear its own channel, else (a replay: whoever accepted them
   * may be waiting; or an origin of an earlier version) to every node.
   */
  private async write(
    sessionId: string,
    line: Line,
    origin: string | null,
    commands: WireCommand[],
  ): Promise<void> {
    const fresh = commands.filter((c) => !line.sent.has(c.commandId));
    if (fresh.length === 0 || !this.transport) return;
    for (const command of fresh) line.sent.set(command.commandId, command.name);
    // Not written (the connection went): they stay pending, and the device's next connection gets them.
    if (!(await this.transport.sendCommands(line.connectionId, fresh))) return;
    const written = fresh.map((c) => c.commandId);
    // The delivery time is written in the background (`flushMarks`): the accepting process is
    // told at once, and this process shows the command delivered meanwhile (`writtenAt`).
    const at = this.clock.now();
    for (const id of written) this.unmarked.note(id, at);
    const delivered: BusMessage = {
      type: 'delivered',
      sessionId,
      origin: this.bus.nodeId,
      commandIds: written,
      at,
    };
    await (origin === null ? this.bus.publish(delivered) : this.bus.send(origin, delivered));
  }
}
