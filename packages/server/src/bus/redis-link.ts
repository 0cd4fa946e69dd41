import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';

export interface RedisLinkOptions {
  url: string;
  /** Prepended to every key and channel: several deployments (or tests) can share one Redis. */
  prefix: string;
}

/**
 * The connections of one process to Redis: one for commands, one in subscriber mode. Commands fail
 * at once while Redis is unreachable (no offline queue): a caller falls back to what it knows
 * locally instead of waiting. Reconnects by itself, at most a second apart, and says so: `up` and
 * `down` events, and `up` is emitted again after every reconnection (listeners catch up then).
 */
export class RedisLink extends EventEmitter<{ up: []; down: [] }> {
  readonly command: Redis;
  readonly subscriber: Redis;
  readonly prefix: string;
  private wasUp = false;

  constructor(options: RedisLinkOptions) {
    super();
    this.prefix = options.prefix;
    const common = {
      lazyConnect: true,
      retryStrategy: (times: number) => Math.min(100 * times, 1000),
      // A connection that hangs (a Redis that stopped answering) is dropped and retried.
      connectTimeout: 2000,
    };
    this.command = new Redis(options.url, {
      ...common,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 2000,
    });
    this.subscriber = new Redis(options.url, { ...common, autoResubscribe: true });
    // Errors are reported through `up`/`down`; an unhandled 'error' event would end the process.
    this.command.on('error', () => {});
    this.subscriber.on('error', () => {});
    for (const connection of [this.command, this.subscriber]) {
      connection.on('ready', () => this.check());
      connection.on('close', () => this.check());
    }
  }

  /** Both connections are ready. */
  get up(): boolean {
    return this.command.status === 'ready' && this.subscriber.status === 'ready';
  }

  key(name: string): string {
    return `${this.prefix}${name}`;
  }

  /** Connects both; resolves once they are up, or after `timeoutMs` (the process then starts degraded). */
  async connect(timeoutMs: number): Promise<boolean> {
    void this.command.connect().catch(() => {});
    void this.subscriber.connect().catch(() => {});
    if (this.up) return true;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.off('up', onUp);
        resolve(false);
      }, timeoutMs);
      const onUp = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.once('up', onUp);
    });
  }

  private check() {
    const up = this.up;
    if (up && !this.wasUp) this.emit('up');
    if (!up && this.wasUp) this.emit('down');
    this.wasUp = up;
  }

  async close(): Promise<void> {
    this.removeAllListeners();
    await Promise.allSettled([this.command.quit(), this.subscriber.quit()]);
    this.command.disconnect();
    this.subscriber.disconnect();
  }
}
