import type { Bus } from './bus.ts';
import { ClusterBus, type ClusterErrorHandler } from './cluster-bus.ts';
import type { RedisLink } from './redis-link.ts';

/**
 * The bus of a deployment of several processes: Redis pub/sub, on one channel every node hears
 * (`bus`) and one channel a node (`bus:<node id>`), as socket.io's Redis adapter answers a request on
 * the requester's own channel. Redis keeps the order of one connection's publishes, so a node's
 * messages to another reach it in the order sent. Pub/sub forgets what it could not deliver: after a
 * cut, nodes resync (see `ClusterBus.onResync`).
 */
export class RedisBus extends ClusterBus {
  private readonly channel: string;
  /** This node's own channel: what other nodes `send` it. */
  private readonly ownChannel: string;
  private readonly onMessage = (channel: string, payload: string) => {
    if (channel === this.ownChannel || channel === this.channel) this.onClusterMessage(payload);
  };
  private readonly rejoin = async () => {
    // The channels are subscribed again (SUBSCRIBE is answered in order on the connection, so this
    // resolves after ioredis's own resubscription); only then can nothing published slip by.
    try {
      await this.link.subscriber.subscribe(this.channel, this.ownChannel);
    } catch (err) {
      this.onError(err, 'bus resubscribe');
      throw err;
    }
    this.resync();
  };
  private unregisterRejoin: (() => void) | undefined;
  private started = false;

  constructor(
    private readonly link: RedisLink,
    onError: ClusterErrorHandler,
  ) {
    super(onError);
    this.channel = link.key('bus');
    this.ownChannel = this.nodeChannel(this.nodeId);
    link.subscriber.on('message', this.onMessage);
  }

  /** Subscribes; afterwards every (re)connection resyncs the node. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.unregisterRejoin = this.link.onRejoin(this.rejoin);
    // While Redis is unreachable the node starts alone; `up` subscribes it when Redis answers.
    if (this.link.up) await this.link.subscriber.subscribe(this.channel, this.ownChannel);
  }

  protected async doPublish(payload: string): Promise<void> {
    await this.link.command.publish(this.channel, payload);
  }

  protected async doSend(nodeId: string, payload: string): Promise<void> {
    await this.link.command.publish(this.nodeChannel(nodeId), payload);
  }

  private nodeChannel(nodeId: string) {
    return this.link.key(`bus:${nodeId}`);
  }

  override async close(): Promise<void> {
    await super.close();
    this.unregisterRejoin?.();
    this.link.subscriber.off('message', this.onMessage);
    await this.link.subscriber.unsubscribe(this.channel, this.ownChannel).catch(() => {});
  }
}

RedisBus satisfies new (
  link: RedisLink,
  onError: ClusterErrorHandler,
) => Bus;
