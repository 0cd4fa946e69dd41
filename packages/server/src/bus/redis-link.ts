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
 * `down` events, and `up` is emitted again after every reconnection. What must be redone after a
 * reconnection (subscribing again, re-writing presence claims) registers with `onRejoin`; the link
 * counts as `joined` once all of it is done — what `/readyz` reports.
 */
export class RedisLink extends EventEmitter<{ up: []; down: [] }> {
  readonly command: Redis;
  readonly subscriber: Redis;
  readonly prefix: string;
  private wasUp = false;
  private readonly rejoinTasks = new Set<() => Promise<unknown>>();
  /** Bumped on every reconnection; `joinedGeneration` catches up once the rejoin work is done. */
  private generation = 0;
  private joinedGeneration = 0;

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

  /** Up, and everything registered with `onRejoin` is done since the last (re)connection. */
  get joined(): boolean {
    return this.up && this.joinedGeneration === this.generation;
  }

  /** Work to redo after every reconnection; returns the function that unregisters it. */
  onRejoin(task: () => Promise<unknown>): () => void {
    this.rejoinTasks.add(task);
    return () => this.rejoinTasks.delete(task);
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
    const cameUp = up && !this.wasUp;
    if (!up && this.wasUp) this.emit('down');
    this.wasUp = up;
    if (cameUp) {
      const generation = ++this.generation;
      this.emit('up');
      void this.rejoin(generation);
    }
  }

  /** Runs the rejoin work until all of it succeeds or the link drops (a second between tries). */
  private async rejoin(generation: number) {
    while (this.generation === generation && this.up) {
      const results = await Promise.allSettled([...this.rejoinTasks].map((task) => task()));
      if (results.every((r) => r.status === 'fulfilled')) {
        if (this.generation === generation) this.joinedGeneration = generation;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000).unref());
    }
  }

  async close(): Promise<void> {
    this.removeAllListeners();
    await Promise.allSettled([this.command.quit(), this.subscriber.quit()]);
    this.command.disconnect();
    this.subscriber.disconnect();
  }
}
