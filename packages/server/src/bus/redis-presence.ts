import type { Holder, Presence } from './presence.ts';
import type { RedisLink } from './redis-link.ts';

export interface RedisPresenceOptions {
  /** This process's id: a claim names its node, and a node is alive while its lease key lives. */
  nodeId: string;
  /** How long a node's lease lasts without renewal: a dead node's sessions are free after it. */
  leaseMs: number;
  onError: (err: unknown, what: string) => void;
}

/**
 * For each session in KEYS whose owner's node lease (ARGV[1] .. node id) is alive: its index, the
 * node, and the lease's value (`LEASE`, or '1' from nodes of before 2026-11-29).
 */
const HOLDERS = `
local found = {}
for i, key in ipairs(KEYS) do
  local owner = redis.call('GET', key)
  if owner then
    local node = string.match(owner, '^[^ ]+')
    local lease = node and redis.call('GET', ARGV[1] .. node)
    if lease then
      found[#found + 1] = i
      found[#found + 1] = node
      found[#found + 1] = lease
    end
  end
end
return found`;

/**
 * What a node's lease key holds: '2' says the node hears `Bus.send` on its own channel. Nodes of
 * before 2026-11-29 write '1' and hear only what is published to every node.
 */
const LEASE = '2';

/** Deletes KEYS[1] only if it still holds ARGV[1] (a newer connection's claim stays). */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** A claim outlives a socket that stays open this long only if renewed (see `renewClaims`). */
const CLAIM_TTL_S = 86_400;
const RENEW_CLAIMS_EVERY_MS = 3_600_000;

type PresenceRedis = RedisLink['command'] & {
  presenceHolders(numKeys: number, ...args: string[]): Promise<(number | string)[]>;
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
  readonly nodeId: string;
  private readonly self: Holder;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastClaimRenewal = Date.now();
  private unregisterRejoin: (() => void) | undefined;

  constructor(
    private readonly link: RedisLink,
    private readonly options: RedisPresenceOptions,
  ) {
    this.nodeId = options.nodeId;
    this.self = { node: options.nodeId, addressable: true };
    const redis = link.command;
    if (!('presenceHolders' in redis)) {
      redis.defineCommand('presenceHolders', { lua: HOLDERS });
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
    return new Set((await this.holders(sessionIds)).keys());
  }

  async holders(sessionIds: string[]): Promise<Map<string, Holder>> {
    const found = new Map<string, Holder>();
    if (sessionIds.length === 0) return found;
    try {
      const flat = await this.redis.presenceHolders(
        sessionIds.length,
        ...sessionIds.map((id) => this.sessionKey(id)),
        this.link.key('node:'),
      );
      for (let i = 0; i + 2 < flat.length; i += 3) {
        const node = String(flat[i + 1]);
        found.set(sessionIds[Number(flat[i]) - 1], { node, addressable: flat[i + 2] === LEASE });
      }
    } catch {
      // Redis is away: what this node holds is all it can vouch for.
      for (const id of sessionIds) if (this.local.has(id)) found.set(id, this.self);
    }
    return found;
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
      await this.redis.set(this.link.key(`node:${this.options.nodeId}`), LEASE, 'PX', this.options.leaseMs);
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
