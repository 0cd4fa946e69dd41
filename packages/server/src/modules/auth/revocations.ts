import type { Clock } from '../../clock.ts';
import type { Storage } from '../../storage/index.ts';
import { MAX_TOKEN_LIFETIME_S } from './keys.ts';
import type { DevicePrincipal, TenantPrincipal } from './tokens.ts';

/**
 * A revocation older than this refuses no token that could still be valid (every token it could
 * concern has expired), so it is forgotten, in memory and in the store.
 */
const HORIZON_MS = MAX_TOKEN_LIFETIME_S * 1000 + 10 * 60_000;
/**
 * A refresh asks for what changed since the last one started, less this much: rows written by a
 * process whose clock runs behind, or committed while the last refresh was reading, are not missed.
 */
const REFRESH_OVERLAP_MS = 5 * 60_000;
/** The store's expired revocations are deleted at most this often. */
const PRUNE_EVERY_MS = 60 * 60_000;

const keyOf = (tenantId: string, id: string) => `${tenantId}\u0000${id}`;

/**
 * What is revoked, in memory (CONTRACT §15), so that checking a bearer token costs two map lookups and
 * never a query: the revoked clients (their access and device tokens fail) and, per player, the time
 * before which the player's device tokens were issued. Loaded whole at start; afterwards a change made
 * here is noted at once, one made by another process arrives over the bus (`auth.changed`), and
 * `refresh()` (a job, and after a cut in the bus) reads what changed in the store since it last looked,
 * so a lost bus message is made up for.
 */
export class Revocations {
  /** tenant + client → when it was revoked. */
  private readonly clients = new Map<string, number>();
  /** tenant + player → tokens issued before this time are refused. */
  private readonly players = new Map<string, number>();
  /** The time the last complete refresh started; 0 before the first (which reads everything). */
  private refreshedFrom = 0;
  private lastPruneAt = 0;
  private refreshing: Promise<boolean> | null = null;
  /**
   * Counts the revocations learnt (a client revoked, a player's time moved forward): a token that
   * passed `isRevoked` at one count passes it at the same count (forgetting old revocations refuses
   * nothing new).
   */
  private learnt = 0;

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
  ) {}

  /** Is this tenant or device token revoked? In memory only. */
  isRevoked(principal: TenantPrincipal | DevicePrincipal): boolean {
    if (principal.clientId !== null && this.clients.has(keyOf(principal.tenantId, principal.clientId)))
      return true;
    if (principal.kind === 'tenant') return false;
    const notBefore = this.players.get(keyOf(principal.tenantId, principal.playerId));
    return notBefore !== undefined && principal.issuedAt < notBefore;
  }

  /** How many revocations were learnt so far (see `learnt`): unchanged, no token became revoked. */
  version(): number {
    return this.learnt;
  }

  /** A client was revoked (here or elsewhere). */
  noteClient(tenantId: string, clientId: string, revokedAt: number): void {
    const key = keyOf(tenantId, clientId);
    if (!this.clients.has(key)) this.learnt++;
    this.clients.set(key, revokedAt);
  }

  /** A player's tokens issued before `notBefore` were revoked (here or elsewhere); later wins. */
  notePlayer(tenantId: string, playerId: string, notBefore: number): void {
    const key = keyOf(tenantId, playerId);
    const known = this.players.get(key);
    if (known === undefined || known < notBefore) {
      this.players.set(key, notBefore);
      this.learnt++;
    }
  }

  /**
   * Reads the revocations made since the last refresh (everything, the first time), forgets those
   * past the horizon and, once an hour, deletes them from the store. True when something new was
   * learnt. Concurrent calls share one read.
   */
  refresh(): Promise<boolean> {
    this.refreshing ??= this.read().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  private async read(): Promise<boolean> {
    const now = this.clock.now();
    const horizon = now - HORIZON_MS;
    const since =
      this.refreshedFrom === 0 ? horizon : Math.max(horizon, this.refreshedFrom - REFRESH_OVERLAP_MS);
    const [clients, players] = await Promise.all([
      this.storage.db
        .selectFrom('oauth_clients')
        .select(['tenant_id', 'client_id', 'revoked_at'])
        .where('revoked_at', '>=', since)
        .execute(),
      this.storage.db
        .selectFrom('player_token_revocations')
        .select(['tenant_id', 'player_id', 'not_before'])
        .where('not_before', '>=', since)
        .execute(),
    ]);
    let learnt = false;
    for (const row of clients) {
      const key = keyOf(row.tenant_id, row.client_id);
      if (!this.clients.has(key)) {
        learnt = true;
        this.learnt++;
      }
      this.clients.set(key, Number(row.revoked_at));
    }
    for (const row of players) {
      const key = keyOf(row.tenant_id, row.player_id);
      const notBefore = Number(row.not_before);
      if ((this.players.get(key) ?? -1) < notBefore) learnt = true;
      this.notePlayer(row.tenant_id, row.player_id, notBefore);
    }
    for (const [key, at] of this.clients) if (at < horizon) this.clients.delete(key);
    for (const [key, at] of this.players) if (at < horizon) this.players.delete(key);
    this.refreshedFrom = now;
    if (now - this.lastPruneAt >= PRUNE_EVERY_MS) {
      this.lastPruneAt = now;
      await this.storage.db
        .deleteFrom('player_token_revocations')
        .where('not_before', '<', horizon)
        .execute();
    }
    return learnt;
  }
}
