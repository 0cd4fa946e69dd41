/**
 * Who holds each session's device socket, across every process of a deployment (as Centrifuge's
 * PresenceManager): the hub claims a session when a socket opens and releases it when it closes.
 * `connected` answers session views and the stream sweep wherever the socket is; `holders` tells
 * command delivery which node to send a command to.
 */
/** The node whose socket holds a session. */
export interface Holder {
  /** The node's id on the bus (`Bus.nodeId`): `Bus.send` reaches it. */
  node: string;
  /**
   * The node hears what is sent to it alone (`Bus.send`); false for nodes of versions before
   * 2026-11-29, which hear only what is published to every node.
   */
  addressable: boolean;
}

export interface Presence {
  /** This node's id, the one its claims name (the bus's `nodeId`). */
  readonly nodeId: string;
  /** Records that `connectionId` on this node now holds the session's socket. */
  claim(sessionId: string, connectionId: string): Promise<void>;
  /** Forgets the claim, if `connectionId` still holds it. */
  release(sessionId: string, connectionId: string): Promise<void>;
  /** Which of these sessions have a live socket on any node. */
  connected(sessionIds: string[]): Promise<Set<string>>;
  /** Which node holds each of these sessions' live socket (a session held by none is absent). */
  holders(sessionIds: string[]): Promise<Map<string, Holder>>;
  close(): Promise<void>;
}
