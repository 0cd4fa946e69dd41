/**
 * The realtime bus joins the server processes of one deployment (CONTRACT §9): a message published
 * by any process reaches the handler of every process, and one sent to a node reaches that node's
 * handlers alone (a command goes to the process holding its device's socket, the word of its delivery
 * back to the process that accepted it). The in-memory bus serves one process; a Redis
 * bus serves several, behind this same interface. Who holds which socket is `Presence`'s business,
 * not the bus's. Nothing outside `bus/` may assume there is only one process.
 */

/** A command as it travels to the device's socket (the `command` frame of CONTRACT §2, plus its session). */
export interface WireCommand {
  commandId: string;
  name: string;
  data: unknown;
  issuedAt: number;
}

/** Every message the bus carries, as a typed union (in the shape of socket.io-adapter's cluster messages). */
export type BusMessage =
  /**
   * Write this command to the session's socket, if this node holds it. `origin` awaits `delivered`,
   * published to every node. The form nodes of before 2026-11-29 send and hear (`commands` since).
   */
  | { type: 'command'; sessionId: string; origin: string; command: WireCommand }
  /**
   * Write these commands, each to its session's socket if this node holds it, in this order; `origin`
   * awaits `delivered`, sent to it alone. What one node sends another in one moment, in one message
   * (nodes since 2026-11-29; earlier ones get a `command` each).
   */
  | { type: 'commands'; origin: string; commands: [sessionId: string, command: WireCommand][] }
  /**
   * Commands `origin` accepted in the last moments (every ~100 ms, at most `ACCEPTED_PER_MESSAGE` a
   * message): other nodes count them in their queue quotas. `[sessionId, commandId, expiresAt]` each.
   */
  | { type: 'commands.accepted'; origin: string; commands: [string, string, number][] }
  /** The command was cancelled: the node holding the session's socket tells the device (`command.cancel`). */
  | { type: 'command.cancel'; sessionId: string; commandId: string }
  /**
   * The node holding the socket wrote these commands to it, at `at` (unix ms: the delivery time it
   * writes down, which the accepting node answers with; absent from nodes of before 2026-11-27).
   * `sessionId`: the commands' session; absent when they are of several (nodes since 2026-11-29).
   */
  | { type: 'delivered'; sessionId?: string; origin: string; commandIds: string[]; at?: number }
  /** A newer connection took the session: other nodes close theirs (close code 4001). */
  | { type: 'takeover'; sessionId: string; connectionId: string }
  /** Close the session's socket wherever it is (e.g. the session ended). */
  | { type: 'close'; sessionId: string; code: number; reason: string }
  /** A tenant's webhook endpoints changed on `origin`: other nodes drop what they cached of them. */
  | { type: 'endpoints.changed'; tenantId: string; origin: string }
  /** A tenant's alert rules changed on `origin`: other nodes drop what they cached of them. */
  | { type: 'alerts.changed'; tenantId: string; origin: string }
  /**
   * Tokens were revoked, or the signing keys changed, on `origin` (CONTRACT §15): every node updates
   * what it keeps in memory (keys: reads them again) and closes the sockets of revoked tokens (4003).
   */
  | { type: 'auth.changed'; origin: string; change: AuthChange }
  /** A session started or ended, or its device connected or went (the live tail's presence, CONTRACT §11). */
  | { type: 'presence'; presence: PresenceChange };

/** What `presence` carries (the tail module's `PresenceNote`). */
export interface PresenceChange {
  kind: 'session.started' | 'session.ended' | 'device.connected' | 'device.disconnected';
  tenantId: string;
  sessionId: string;
  playerId: string;
  tenantCohortId: string | null;
  at: number;
}

/** What `auth.changed` carries (the auth module's `AuthChange`). */
export type AuthChange =
  | { kind: 'client'; tenantId: string; clientId: string; revokedAt: number }
  | { kind: 'player'; tenantId: string; playerId: string; notBefore: number }
  | { kind: 'keys' };

export type BusHandler = (message: BusMessage) => Promise<void> | void;

const DONE: Promise<void> = Promise.resolve();

/**
 * Runs this node's handlers on a message, in the order they were added, each once the one before has
 * finished. Only a handler that returns a promise is awaited: most return nothing for most messages
 * (they ignore them), and a message no handler returns a promise for costs no promise at all (a
 * command's `delivered` message). A handler that throws rejects the returned promise.
 */
export function runHandlers(handlers: readonly BusHandler[], message: BusMessage): Promise<void> {
  return runFrom(handlers, message, 0);
}

function runFrom(handlers: readonly BusHandler[], message: BusMessage, from: number): Promise<void> {
  try {
    for (let i = from; i < handlers.length; i++) {
      const running = handlers[i](message);
      if (running) return running.then(() => runFrom(handlers, message, i + 1));
    }
  } catch (err) {
    return Promise.reject(err);
  }
  return DONE;
}

export interface Bus {
  /** This process's id on the bus. */
  readonly nodeId: string;
  /**
   * Sends a message to every node, this one included. Resolves once this node's handlers have run
   * (so a local delivery is done before the caller answers) and the message is on its way to others.
   */
  publish(message: BusMessage): Promise<void>;
  /**
   * Sends a message to one node (`nodeId`, as `Presence.holders` names it), not to every node: this
   * node's handlers run when it is this node (resolving as `publish` does), else it is carried to that
   * node alone. A node that is gone gets nothing; nobody is told.
   */
  send(nodeId: string, message: BusMessage): Promise<void>;
  /** Adds a handler for every message; handlers run in the order they were added. */
  subscribe(handler: BusHandler): void;
  /**
   * Adds a listener called when this node may have missed messages from others (its link to them
   * was cut and is back). Whoever must not miss a message keeps it elsewhere too (commands are in
   * the store) and catches up here. A single-process bus never calls it.
   */
  onResync(listener: () => void): void;
  close(): Promise<void>;
}
