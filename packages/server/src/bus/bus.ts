/**
 * The realtime bus joins the server processes of one deployment (CONTRACT §9): a command accepted
 * by any process reaches the device's socket wherever it is held. The in-memory bus serves one
 * process; a Redis bus serves several, behind this same interface. Nothing outside `bus/` may
 * assume there is only one process.
 */
export type BusMessage =
  /** Write the session's pending commands to its socket, if this node holds it. */
  | { type: 'flush'; sessionId: string }
  /** A newer connection took the session: other nodes close theirs (close code 4001). */
  | { type: 'takeover'; sessionId: string; connectionId: string }
  /** Close the session's socket wherever it is (e.g. the session ended). */
  | { type: 'close'; sessionId: string; code: number; reason: string };

export type BusHandler = (message: BusMessage) => Promise<void> | void;

export interface RealtimeBus {
  /** This process's id on the bus. */
  readonly nodeId: string;
  /**
   * Sends a message to every node, this one included. Resolves once this node's handler has run
   * (so a local delivery is done before the caller answers) and the message is on its way to others.
   */
  publish(message: BusMessage): Promise<void>;
  /** Sets this node's handler for messages. */
  subscribe(handler: BusHandler): void;
  /** Records that `connectionId` on this node now holds the session's socket. */
  claim(sessionId: string, connectionId: string): Promise<void>;
  /** Forgets the claim, if `connectionId` still holds it. */
  release(sessionId: string, connectionId: string): Promise<void>;
  /** Which of these sessions have a live socket on any node. */
  connected(sessionIds: string[]): Promise<Set<string>>;
  close(): Promise<void>;
}
