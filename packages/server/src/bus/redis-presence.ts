import type { Presence } from './presence.ts';
import type { RedisLink } from './redis-link.ts';

export interface RedisPresenceOptions {
  /** This process's id: a claim names its node, and a node is alive while its lease key lives. */
  nodeId: string;
  /** How long a node's lease lasts without renewal: a dead node's sessions are free after it. */
  leaseMs: number;
  onError: (err: unknown, what: string) => void;
}

/** Which of the sessions in KEYS have an owner whose node lease (ARGV[1] .. node id) is alive. */
const CONNECTED = `
local found = {}
for i, key in ipairs(KEYS) do
  local owner = redis.call('GET', key)
  if owner then
    local node = string.match(owner, '^[^ ]+')
    if node and redis.call('EXISTS', ARGV[1] .. node) == 1 then found[#found + 1] = i end
  end
end
return found`;

/** Deletes KEYS[1] only if it still holds ARGV[1] (a newer connection's claim stays). */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** A claim outlives a socket that stays open this long only if renewed (see `renewClaims`). */
const CLAIM_TTL_S = 86_400;
const RENEW_CLAIMS_EVERY_MS = 3_600_000;

type PresenceRedis = RedisLink['command'] & {
  presenceConnected(numKeys: number, ...args: string[]): Promise<number[]>;
  presenceRelease(key: string, owner: string): Promise<number>;
};

/**
 * Presence across processes (as Centrifuge's Redis presence): a claim is a key per session naming
 * `<node> <connection>`; each node keeps a lease key alive while it runs, and a claim counts only
 * while its node's lease lives — so a process that dies leaves no session "connected" longer than
 * `leaseMs`, and nobody has to clean up after it (its claims are overwritten or expire).
 *
 * While Redis is unreachable, the node answers from its own claims and re-writes them all when
 * Redis is back.
 */
export class RedisPresence implements Presence {
  /** This node's claims: session → connection. */
  private readonly local = new Map<string, string>();
  private readonly redis: PresenceRedis;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastClaimRenewal = Date.now();
  private unregisterRejoin: (() => void) | undefined;

  constructor(
    private readonly link: RedisLink,
    private readonly options: RedisPresenceOptions,
  ) {
    const redis = link.command;
    if (!('presenceConnected' in redis)) {
      redis.defineCommand('presenceConnected', { lua: CONNECTED });
      redis.defineCommand('presenceRelease', { lua: RELEASE, numberOfKeys: 1 });
    }
    this.redis = redis as PresenceRedis;
  }

  /** Starts renewing this node's lease (a third of the lease apart). */
  async start(): Promise<void> {
    this.unregisterRejoin = this.link.onRejoin(() => Promise.all([this.renewLease(), this.renewClaims()]));
    await this.renewLease();
    this.heartbeat = setInterval(
      () => {
        void this.renewLease();
        if (Date.now() - this.lastClaimRenewal > RENEW_CLAIMS_EVERY_MS) void this.renewClaims();
      },
      Math.max(50, Math.floor(this.options.leaseMs / 3)),
    );
    this.heartbeat.unref();
  }

  async claim(sessionId: string, connectionId: string): Promise<void> {
    this.local.set(sessionId, connectionId);
    try {
      await this.redis.set(this.sessionKey(sessionId), this.owner(connectionId), 'EX', CLAIM_TTL_S);
    } catch (err) {
      this.options.onError(err, 'presence claim');
    }
  }

  async release(sessionId: string, connectionId: string): Promise<void> {
    if (this.local.get(sessionId) === connectionId) this.local.delete(sessionId);
    try {
      await this.redis.presenceRelease(this.sessionKey(sessionId), this.owner(connectionId));
    } catch (err) {
      this.options.onError(err, 'presence release');
    }
  }

  async connected(sessionIds: string[]): Promise<Set<string>> {
    if (sessionIds.length === 0) return new Set();
    try {
      const found = await this.redis.presenceConnected(
        sessionIds.length,
        ...sessionIds.map((id) => this.sessionKey(id)),
        this.link.key('node:'),
      );
      return new Set(found.map((i) => sessionIds[i - 1]));
    } catch {
      // Redis is away: what this node holds is all it can vouch for.
      return new Set(sessionIds.filter((id) => this.local.has(id)));
    }
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    this.unregisterRejoin?.();
    const claims = [...this.local];
    this.local.clear();
    try {
      await Promise.all(
        claims.map(([s, c]) => this.redis.presenceRelease(this.sessionKey(s), this.owner(c))),
      );
      await this.redis.del(this.link.key(`node:${this.options.nodeId}`));
    } catch {
      // Unreachable: the lease expires by itself.
    }
  }

  private sessionKey(sessionId: string) {
    return this.link.key(`presence:${sessionId}`);
  }

  private owner(connectionId: string) {
    return `${this.options.nodeId} ${connectionId}`;
  }

  private async renewLease() {
    try {
      await this.redis.set(this.link.key(`node:${this.options.nodeId}`), '1', 'PX', this.options.leaseMs);
    } catch (err) {
      this.options.onError(err, 'presence lease');
    }
  }

  /** Writes every claim of this node again (after an outage, and now and then against their expiry). */
  private async renewClaims() {
    this.lastClaimRenewal = Date.now();
    if (this.local.size === 0) return;
    try {
      const pipeline = this.redis.pipeline();
      for (const [sessionId, connectionId] of this.local) {
        pipeline.set(this.sessionKey(sessionId), this.owner(connectionId), 'EX', CLAIM_TTL_S);
      }
      await pipeline.exec();
    } catch (err) {
      this.options.onError(err, 'presence renewal');
    }
  }
}

RedisPresence satisfies new (
  link: RedisLink,
  options: RedisPresenceOptions,
) => Presence;
