import type { FastifyBaseLogger } from 'fastify';
import type { Bus, BusMessage, Holder, Presence, WireCommand } from '../../bus/index.ts';
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

/** A command accepted here, waiting for word of its delivery (`at`); `done` is set once someone waits. */
interface Waiting {
  at: number | null;
  done: ((at: number | null) => void) | null;
}

/** A stored command on its way: to be sent once this turn's holder lookup is answered. */
interface Outbound {
  sessionId: string;
  command: WireCommand;
  /** Resolves `deliver`: when the command was written to the device's socket, or null (queued). */
  done: (at: number | null) => void;
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
  /** Commands `deliver` was given this turn, for sessions not held here (`dispatch`). */
  private outbound: Outbound[] = [];
  /** Written here this turn, by the node to tell (`delivered`, sent at `setImmediate`): `[time, ids]`. */
  private written = new Map<string, [number, string[]]>();
  private telling = false;
  /** This process as a holder of sockets. */
  private readonly here: Holder;

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly bus: Bus,
    private readonly presence: Presence,
    private readonly log: FastifyBaseLogger,
    private readonly options: DeliveryOptions,
  ) {
    this.here = { node: bus.nodeId, addressable: true };
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
   *
   * A command for a socket held here is written at once; the others of one turn of the event loop
   * (a group commit's commands) go together: one holder lookup for all their sessions, one message to
   * each node holding some (`commands`), one `delivered` back from each.
   */
  deliver(sessionId: string, command: WireCommand): Promise<number | null> {
    return new Promise((done) => {
      const outbound: Outbound = { sessionId, command, done };
      if (this.lines.has(sessionId)) {
        void this.sendTo(this.here, [outbound]);
        return;
      }
      this.outbound.push(outbound);
      if (this.outbound.length === 1)
        setImmediate(() => {
          const batch = this.outbound;
          this.outbound = [];
          void this.dispatch(batch);
        });
    });
  }

  /** Sends each command to the node holding its session's socket, if any (else it resolves null). */
  private async dispatch(batch: Outbound[]): Promise<void> {
    let holders: Map<string, Holder> | undefined;
    try {
      holders = await this.presence.holders([...new Set(batch.map((o) => o.sessionId))]);
    } catch (err) {
      // Presence answers from what it knows when its store is away; anything else: they stay queued.
      this.log.warn({ err }, 'command holders not found');
    }
    const byNode = new Map<string, { holder: Holder; items: Outbound[] }>();
    for (const o of batch) {
      // A connection opened here meanwhile: this is the holder now (its claim came first).
      const holder = this.lines.has(o.sessionId) ? this.here : holders?.get(o.sessionId);
      // Not connected anywhere: it stays queued, and the device's next connection gets it.
      if (!holder) o.done(null);
      else {
        const group = byNode.get(holder.node);
        if (group) group.items.push(o);
        else byNode.set(holder.node, { holder, items: [o] });
      }
    }
    await Promise.all([...byNode.values()].map(({ holder, items }) => this.sendTo(holder, items)));
  }

  /**
   * Sends commands to one node and resolves each with its delivery time, once that node's word comes
   * (at most `remoteWaitMs`; then null).
   */
  private async sendTo(holder: Holder, items: Outbound[]): Promise<void> {
    const self = this.bus.nodeId;
    for (const o of items) this.waiting.set(o.command.commandId, { at: null, done: null });
    try {
      if (holder.addressable) {
        const commands = items.map((o): [string, WireCommand] => [o.sessionId, o.command]);
        await this.bus.send(holder.node, { type: 'commands', origin: self, commands });
      } else {
        // A node of an earlier version hears only what is published to every node, a command at a time.
        for (const o of items)
          await this.bus.publish({
            type: 'command',
            sessionId: o.sessionId,
            origin: self,
            command: o.command,
          });
      }
    } catch (err) {
      this.log.warn({ err }, 'command not sent');
    }
    let open = 0;
    let timer: NodeJS.Timeout | undefined;
    for (const o of items) {
      const id = o.command.commandId;
      const wait = this.waiting.get(id);
      // Written here already, or here was where to write it (the connection just went): no word to wait for.
      if (!wait || wait.at !== null || holder.node === self) {
        this.waiting.delete(id);
        o.done(wait?.at ?? null);
      } else {
        open++;
        wait.done = (at) => {
          o.done(at);
          if (--open === 0) clearTimeout(timer);
        };
      }
    }
    if (open === 0) return;
    // Held by another process: its word wakes each command (`onBus`); what has none by then is queued.
    timer = setTimeout(() => {
      for (const o of items) {
        const wait = this.waiting.get(o.command.commandId);
        if (!wait?.done) continue;
        this.waiting.delete(o.command.commandId);
        wait.done(null);
      }
    }, this.options.remoteWaitMs);
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
    if (message.type === 'commands') {
      const writing: Promise<void>[] = [];
      for (const [sessionId, command] of message.commands) {
        const line = this.lines.get(sessionId);
        if (line) writing.push(this.enqueue(sessionId, line, message.origin, command));
      }
      return writing.length > 0 ? Promise.all(writing).then(() => undefined) : undefined;
    }
    if (message.type === 'command') {
      const line = this.lines.get(message.sessionId);
      if (!line) return undefined;
      // From or for a node of an earlier version: `delivered` is published to every node.
      return this.enqueue(message.sessionId, line, null, message.command);
    }
    if (message.type === 'command.cancel') return this.onCancel(message.sessionId, message.commandId);
    if (message.type === 'delivered') {
      // The time the writing node notes down (`write`), so the 202 and the stored row agree.
      const at = message.at ?? this.clock.now();
      for (const id of message.commandIds) {
        const wait = this.waiting.get(id);
        if (!wait) continue;
        wait.at = at;
        if (wait.done) {
          this.waiting.delete(id);
          wait.done(at);
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
    if (origin === null || origin === this.bus.nodeId) {
      // A replay (whoever accepted them may be waiting, anywhere), or accepted here: told now.
      const delivered: BusMessage = {
        type: 'delivered',
        sessionId,
        origin: this.bus.nodeId,
        commandIds: written,
        at,
      };
      await (origin === null ? this.bus.publish(delivered) : this.bus.send(origin, delivered));
      return;
    }
    // Another node accepted them: it hears of everything written for it this turn in one message.
    const pending = this.written.get(origin);
    if (pending?.[0] === at) {
      pending[1].push(...written);
      return;
    }
    if (pending) this.tell(origin, pending);
    this.written.set(origin, [at, written]);
    if (this.telling) return;
    this.telling = true;
    setImmediate(() => {
      const all = this.written;
      this.written = new Map();
      this.telling = false;
      for (const [to, word] of all) this.tell(to, word);
    });
  }

  /** Sends `origin` word that these commands were written at that time. */
  private tell(origin: string, [at, commandIds]: [number, string[]]) {
    this.bus
      .send(origin, { type: 'delivered', origin: this.bus.nodeId, commandIds, at })
      .catch((err) => this.log.warn({ err }, 'delivery word not sent'));
  }
}
