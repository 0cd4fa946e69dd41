import { Gauge, type Registry } from 'prom-client';
import type { Bus } from './bus.ts';
import { MemoryBus } from './memory-bus.ts';
import { MemoryPresence } from './memory-presence.ts';
import type { Presence } from './presence.ts';
import { RedisBus } from './redis-bus.ts';
import { RedisLink } from './redis-link.ts';
import { RedisPresence } from './redis-presence.ts';

export interface BusOptions {
  /** null: one process (in-memory bus and presence). */
  redisUrl: string | null;
  redisPrefix: string;
  presenceLeaseMs: number;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  registry: Registry;
}

/** What joins the processes of a deployment: the bus, presence, and the Redis link under them (if any). */
export interface BusDeployment {
  bus: Bus;
  presence: Presence;
  redis: RedisLink | null;
  close(): Promise<void>;
}

/** How long a starting process waits for Redis before it starts alone (and joins when Redis answers). */
const CONNECT_WAIT_MS = 5000;
/** A failing Redis operation is logged at most this often per kind (an outage must not flood the log). */
const LOG_EVERY_MS = 5000;

/** Logs a failing Redis operation, at most once every few seconds per kind (an outage must not flood the log). */
export function redisErrorLogger(log: Pick<BusOptions['log'], 'warn'>) {
  const lastLogged = new Map<string, number>();
  return (err: unknown, what: string) => {
    const now = Date.now();
    if (now - (lastLogged.get(what) ?? 0) < LOG_EVERY_MS) return;
    lastLogged.set(what, now);
    log.warn({ err, what }, 'redis operation failed');
  };
}

/**
 * The in-memory bus and presence for one process; with `REDIS_URL`, their Redis implementations.
 * A Redis that is down at start does not stop the process (CONTRACT §9.1: it serves its own sockets).
 */
export async function connectBus(options: BusOptions): Promise<BusDeployment> {
  if (!options.redisUrl) {
    const bus = new MemoryBus();
    const presence = new MemoryPresence(bus.nodeId);
    return {
      bus,
      presence,
      redis: null,
      async close() {
        await bus.close();
        await presence.close();
      },
    };
  }
  const { log } = options;
  const onError = redisErrorLogger(log);
  const redis = new RedisLink({ url: options.redisUrl, prefix: options.redisPrefix });
  redis.on('up', () => log.info({}, 'redis is up'));
  redis.on('down', () => log.warn({}, 'redis is down: serving this process only until it is back'));
  new Gauge({
    name: 'liveline_redis_up',
    help: '1 while this process is connected to Redis, else 0.',
    registers: [options.registry],
    collect() {
      this.set(redis.up ? 1 : 0);
    },
  });
  if (!(await redis.connect(CONNECT_WAIT_MS))) {
    log.warn({}, 'redis is not reachable: starting alone, joining the others when it answers');
  }
  const bus = new RedisBus(redis, onError);
  const presence = new RedisPresence(redis, {
    nodeId: bus.nodeId,
    leaseMs: options.presenceLeaseMs,
    onError,
  });
  await bus.start();
  await presence.start();
  return {
    bus,
    presence,
    redis,
    async close() {
      await bus.close();
      await presence.close();
      await redis.close();
    },
  };
}
