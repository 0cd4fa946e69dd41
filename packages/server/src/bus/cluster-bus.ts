import { randomUUID } from 'node:crypto';
import { type Bus, type BusHandler, type BusMessage, runHandlers } from './bus.ts';

/** A bus message as it travels between nodes: who sent it, and the message. */
export interface ClusterEnvelope {
  origin: string;
  message: BusMessage;
}

export type ClusterErrorHandler = (err: unknown, what: string) => void;

/**
 * A bus across several nodes, in the shape of socket.io-adapter's `ClusterAdapter`: this class runs
 * the local handlers, stamps and encodes messages and drops a node's own echoes; a subclass adds
 * only the transport (`doPublish` to send, `onClusterMessage` on receipt).
 *
 * Messages from other nodes reach the handlers in the order the transport delivers them; each
 * handler call starts before the next message's, and none is awaited by the transport, so one
 * slow handler (a device's socket that drains slowly) holds up no other session.
 */
export abstract class ClusterBus implements Bus {
  readonly nodeId = randomUUID();
  /**
   * How this node's own payloads begin (`JSON.stringify` writes `origin` first): its echoes, which a
   * transport like Redis pub/sub brings back, are dropped unparsed. Payloads keep their format, so
   * nodes of earlier versions read them as before.
   */
  private readonly ownPrefix = `{"origin":${JSON.stringify(this.nodeId)},`;
  private handlers: BusHandler[] = [];
  private resyncListeners: (() => void)[] = [];
  protected closed = false;

  constructor(protected readonly onError: ClusterErrorHandler) {}

  /** Sends the encoded envelope to every other node. May reject when the transport is down. */
  protected abstract doPublish(payload: string): Promise<void>;
  /** Sends the encoded envelope to node `nodeId` alone. May reject when the transport is down. */
  protected abstract doSend(nodeId: string, payload: string): Promise<void>;

  async publish(message: BusMessage): Promise<void> {
    if (this.closed) return;
    await runHandlers(this.handlers, message);
    await this.carry(message, null);
  }

  async send(nodeId: string, message: BusMessage): Promise<void> {
    if (this.closed) return;
    if (nodeId === this.nodeId) await runHandlers(this.handlers, message);
    else await this.carry(message, nodeId);
  }

  /** Hands the message to the transport: for node `to`, or for every other node when null. */
  private async carry(message: BusMessage, to: string | null) {
    const payload = JSON.stringify({ origin: this.nodeId, message } satisfies ClusterEnvelope);
    try {
      await (to === null ? this.doPublish(payload) : this.doSend(to, payload));
    } catch (err) {
      // Other nodes miss this message; what they must not miss (commands) is in the store, and they
      // replay it when the transport is back (`onResync`).
      this.onError(err, to === null ? 'bus publish' : 'bus send');
    }
  }

  subscribe(handler: BusHandler): void {
    this.handlers.push(handler);
  }

  onResync(listener: () => void): void {
    this.resyncListeners.push(listener);
  }

  /** The transport received a payload from some node (perhaps this one), published or sent to this one. */
  protected onClusterMessage(payload: string) {
    if (this.closed || payload.startsWith(this.ownPrefix)) return;
    let envelope: ClusterEnvelope;
    try {
      envelope = JSON.parse(payload) as ClusterEnvelope;
    } catch (err) {
      this.onError(err, 'bus message');
      return;
    }
    if (envelope.origin === this.nodeId) return;
    for (const handler of this.handlers) {
      try {
        const running = handler(envelope.message);
        if (running) running.catch((err: unknown) => this.onError(err, 'bus handler'));
      } catch (err) {
        this.onError(err, 'bus handler');
      }
    }
  }

  /** The transport was cut and is back: messages may have been missed meanwhile. */
  protected resync() {
    if (this.closed) return;
    for (const listener of this.resyncListeners) listener();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.handlers = [];
    this.resyncListeners = [];
  }
}
