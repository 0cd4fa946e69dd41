/**
 * Who holds each session's device socket, across every process of a deployment (as Centrifuge's
 * PresenceManager): the hub claims a session when a socket opens and releases it when it closes.
 * `connected` answers session views and the stream sweep wherever the socket is.
 */
export interface Presence {
  /** Records that `connectionId` on this node now holds the session's socket. */
  claim(sessionId: string, connectionId: string): Promise<void>;
  /** Forgets the claim, if `connectionId` still holds it. */
  release(sessionId: string, connectionId: string): Promise<void>;
  /** Which of these sessions have a live socket on any node. */
  connected(sessionIds: string[]): Promise<Set<string>>;
  close(): Promise<void>;
}
