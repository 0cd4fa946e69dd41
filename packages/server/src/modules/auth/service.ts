import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import type { Database, Storage } from '../../storage/index.ts';
import { type ClientCredentials, decideGrant, type OAuthFailure, type TokenRequest } from './grant.ts';
import type { KeyInfo, KeyRing } from './keys.ts';
import { type OperatorToken, resolveOperatorToken } from './operator.ts';
import { Revocations } from './revocations.ts';
import { SCOPES, type Scope } from './scopes.ts';
import * as store from './store.ts';
import { type DevicePrincipal, type Principal, type TenantPrincipal, TokenService } from './tokens.ts';

export type { ClientInfo, Tenant, TenantRetention } from './store.ts';

/** The settings auth reads. */
export type AuthConfig = Pick<
  Config,
  'adminToken' | 'dataDir' | 'publicUrl' | 'accessTokenTtlS' | 'deviceTokenTtlS'
>;

export interface AuthDeps {
  storage: Storage;
  clock: Clock;
  config: AuthConfig;
  /** The server's keys (`KeyRing.open`): they sign tokens and digest client secrets. */
  keys: KeyRing;
}

/** A token request answered: the access token (RFC 6749 §5.1) or why not (§5.2). */
export type TokenResponse = { token: AccessToken } | { failure: OAuthFailure };
export type AccessToken = Awaited<ReturnType<TokenService['issueAccessToken']>>;
export type DeviceToken = Awaited<ReturnType<TokenService['issueDeviceToken']>>;

/**
 * A change to what tokens are honoured, made by one process and applied by every other (the bus
 * carries it as `auth.changed`): a client revoked, a player's tokens revoked, the signing keys changed.
 */
export type AuthChange =
  | { kind: 'client'; tenantId: string; clientId: string; revokedAt: number }
  | { kind: 'player'; tenantId: string; playerId: string; notBefore: number }
  | { kind: 'keys' };

/** Why a verified token is no longer honoured. */
export type TokenRefusal = 'revoked' | 'expired';

/**
 * How often every process reads the revocations and keys changed in the store: the bus brings them
 * within a second, this is for a message the bus lost.
 */
export const AUTH_REFRESH_MS = 30_000;

/** Signing keys past retirement are deleted from the store at most this often (besides start and rotation). */
const KEY_PRUNE_EVERY_MS = 3600_000;

/** How long the secret a rotation replaced keeps working (CONTRACT §15). */
export const SECRET_ROTATION_OVERLAP_MS = 24 * 3600_000;

/**
 * Builds the auth module's service: the operator token from the settings, tokens signed with `keys`,
 * the revocations read from the store.
 */
export async function createAuth(deps: AuthDeps): Promise<AuthService> {
  const { config, clock } = deps;
  const operator = resolveOperatorToken(config.adminToken, config.dataDir);
  const tokens = new TokenService(deps.keys, config.publicUrl ?? 'urn:liveline', clock);
  const revocations = new Revocations(deps.storage, clock);
  await revocations.refresh();
  await deps.keys.prune();
  return new AuthService(deps, operator, tokens, revocations);
}

/**
 * Who may call what (CONTRACT §1): tenants, their OAuth2 clients, the tokens the server issues, and
 * the one question every request asks — who holds this bearer token, and is it still honoured.
 */
export class AuthService {
  private readonly storage: Storage;
  private readonly clock: Clock;
  private readonly config: AuthConfig;
  private readonly keys: KeyRing;
  private readonly digestKey: Buffer;
  private readonly changeListeners: ((change: AuthChange) => Promise<void> | void)[] = [];
  private lastKeyPruneAt = 0;

  constructor(
    deps: AuthDeps,
    /** The operator's admin token (`generated` is set when this start made it: print it once). */
    readonly operator: OperatorToken,
    private readonly tokens: TokenService,
    private readonly revocations: Revocations,
  ) {
    this.storage = deps.storage;
    this.clock = deps.clock;
    this.config = deps.config;
    this.keys = deps.keys;
    this.digestKey = deps.keys.digestKey;
  }

  // --- the bearer token of a request ---------------------------------------------------------------

  /**
   * The principal a bearer token stands for, or null when it is not a valid, unexpired token of
   * ours. Verified tokens are cached until they expire, so this says nothing of revocation: ask
   * `refusal` too.
   */
  /**
   * The principal of a token this process verified before and still holds good (`authenticate`
   * without its promise, for the request path), or null: then ask `authenticate`.
   */
  remembered(token: string): Principal | null {
    return this.tokens.remembered(token);
  }

  async authenticate(token: string): Promise<Principal | null> {
    // A token verified before is not the operator's: the constant-time test (a SHA-256 of the
    // candidate) is for the others, the operator's among them.
    const known = this.tokens.remembered(token);
    if (known) return known;
    if (this.operator.matches(token)) return { kind: 'operator' };
    return this.tokens.verify(token);
  }

  /**
   * Whether a verified token is still honoured: null, or `revoked` (its client was deleted, or its
   * player's tokens revoked after it was issued) or `expired` (asked again for what outlives its
   * request: a device's socket, a tenant's live tail). In memory only: asked on every request and for every open socket.
   */
  refusal(principal: TenantPrincipal | DevicePrincipal): TokenRefusal | null {
    if (this.revocations.isRevoked(principal)) return 'revoked';
    if (principal.expiresAt <= this.clock.now()) return 'expired';
    return null;
  }

  /**
   * `refusal` for one pass over every open socket and live tail (a job, each second), given the
   * revocations `version` of the caller's previous pass (-1 the first time). While no revocation has
   * been learnt since, a token that passed then can only have expired since, so only that is checked:
   * at 15,000 idle sockets the revocation lookups were a third of the server's CPU.
   */
  passRefusal(lastVersion: number): {
    version: number;
    refusal: (principal: TenantPrincipal | DevicePrincipal) => TokenRefusal | null;
  } {
    const version = this.revocations.version();
    if (version !== lastVersion) return { version, refusal: (principal) => this.refusal(principal) };
    const now = this.clock.now();
    return { version, refusal: (principal) => (principal.expiresAt <= now ? 'expired' : null) };
  }

  // --- changes, across processes -------------------------------------------------------------------

  /**
   * Adds a listener for the changes this process makes (revocations, key rotations), which the wiring
   * publishes on the bus; the change is already applied here when it is called, and awaited before
   * the request that made it is answered.
   */
  onChange(listener: (change: AuthChange) => Promise<void> | void): void {
    this.changeListeners.push(listener);
  }

  /** Applies a change another process made (from the bus). */
  async changedElsewhere(change: AuthChange): Promise<void> {
    if (change.kind === 'client')
      this.revocations.noteClient(change.tenantId, change.clientId, change.revokedAt);
    else if (change.kind === 'player')
      this.revocations.notePlayer(change.tenantId, change.playerId, change.notBefore);
    else await this.keys.reload();
  }

  /**
   * Reads the revocations and keys changed in the store since the last look: a job, and after a cut
   * in the bus (changes published meanwhile were lost). True when a revocation was learnt.
   */
  async refresh(): Promise<boolean> {
    const [learnt] = await Promise.all([this.revocations.refresh(), this.keys.reload()]);
    // Keys past retirement no longer verify; their rows go once an hour (and at start and rotation).
    if (this.clock.now() - this.lastKeyPruneAt >= KEY_PRUNE_EVERY_MS) {
      this.lastKeyPruneAt = this.clock.now();
      await this.keys.prune();
    }
    return learnt;
  }

  private async changed(change: AuthChange) {
    for (const listener of this.changeListeners) await listener(change);
  }

  /** The public keys that verify every token the server issues (`/.well-known/jwks.json`). */
  get jwks() {
    return this.tokens.jwks;
  }

  // --- tenants -------------------------------------------------------------------------------------

  createTenant(name: string): Promise<store.Tenant> {
    return store.createTenant(this.storage, name, this.clock.now());
  }

  listTenants(page: PageRequest) {
    return store.listTenants(this.storage, page);
  }

  findTenant(tenantId: string): Promise<store.Tenant | null> {
    return store.findTenant(this.storage, tenantId);
  }

  async tenantExists(tenantId: string): Promise<boolean> {
    return (await this.findTenant(tenantId)) !== null;
  }

  /**
   * Sets a tenant's event retention in days (0: forever; null: back to the server's
   * LIVELINE_EVENT_RETENTION_DAYS); the tenant as it now is, or a 404 `not_found`.
   */
  async setEventRetention(tenantId: string, eventRetentionDays: number | null): Promise<store.Tenant> {
    const tenant = await store.setTenantRetention(this.storage, tenantId, eventRetentionDays);
    if (!tenant) throw problems.notFound('tenant');
    return tenant;
  }

  /** Every tenant's event retention, `limit` at a time after `afterTenantId` (the retention sweep pages through them). */
  tenantRetentions(afterTenantId: string | null, limit: number): Promise<store.TenantRetention[]> {
    return store.tenantRetentions(this.storage, afterTenantId, limit);
  }

  /** The tenant, or a 404 `not_found`. */
  async requireTenant(tenantId: string): Promise<store.Tenant> {
    const tenant = await this.findTenant(tenantId);
    if (!tenant) throw problems.notFound('tenant');
    return tenant;
  }

  // --- OAuth2 clients ------------------------------------------------------------------------------

  /** A new client of an existing tenant (default: every scope); its secret is shown only here. */
  async createClient(tenantId: string, input: { name?: string; scopes?: Scope[] }) {
    await this.requireTenant(tenantId);
    const client = { tenantId, name: input.name ?? null, scopes: input.scopes ?? [...SCOPES] };
    return store.createClient(this.storage, this.digestKey, client, this.clock.now());
  }

  /** A tenant's clients, oldest first, never their secrets; 404 for an unknown tenant. */
  async listClients(tenantId: string, page: PageRequest) {
    await this.requireTenant(tenantId);
    return store.listClients(this.storage, tenantId, page);
  }

  /**
   * Revokes a live client of the tenant, or a 404 `not_found`: its access tokens and the device tokens
   * it minted fail at once here, within a second on every other process.
   */
  async revokeClient(tenantId: string, clientId: string): Promise<void> {
    const revokedAt = this.clock.now();
    const revoked = await store.revokeClient(this.storage, tenantId, clientId, revokedAt);
    if (!revoked) throw problems.notFound('client');
    this.revocations.noteClient(tenantId, clientId, revokedAt);
    await this.changed({ kind: 'client', tenantId, clientId, revokedAt });
  }

  /**
   * A new secret for a live client of the tenant (404 `not_found` otherwise), shown only in this
   * answer. The current secret keeps working for 24 h, or stops at once with `immediately`. Tokens
   * already issued are not affected (delete the client to stop those).
   */
  async rotateClientSecret(tenantId: string, clientId: string, immediately: boolean) {
    const previousUntil = immediately ? null : this.clock.now() + SECRET_ROTATION_OVERLAP_MS;
    const rotated = await store.rotateClientSecret(
      this.storage,
      this.digestKey,
      tenantId,
      clientId,
      previousUntil,
    );
    if (!rotated) throw problems.notFound('client');
    return rotated;
  }

  // --- tokens --------------------------------------------------------------------------------------

  /** The client-credentials grant (RFC 6749 §4.4): an access token for the client, or an OAuth error. */
  async grantClientCredentials(
    credentials: ClientCredentials | null,
    form: TokenRequest,
  ): Promise<TokenResponse> {
    const client = credentials ? await store.findClient(this.storage, credentials.id) : null;
    const grant = decideGrant(this.digestKey, credentials, client, form, this.clock.now());
    if ('failure' in grant) return grant;
    const token = await this.tokens.issueAccessToken({
      tenantId: grant.client.tenantId,
      clientId: grant.client.clientId,
      scopes: grant.scopes,
      ttlSeconds: this.config.accessTokenTtlS,
    });
    return { token };
  }

  /**
   * A device token for a player of the tenant, minted by `clientId` (`ttlSeconds` defaults to the
   * configured lifetime).
   */
  mintDeviceToken(
    minter: { tenantId: string; clientId: string },
    player: { playerId: string; tenantCohortId: string | null; ttlSeconds?: number },
  ): Promise<DeviceToken> {
    return this.tokens.issueDeviceToken({
      tenantId: minter.tenantId,
      clientId: minter.clientId,
      playerId: player.playerId,
      tenantCohortId: player.tenantCohortId,
      ttlSeconds: player.ttlSeconds ?? this.config.deviceTokenTtlS,
    });
  }

  /** A device token for a new anonymous pool player (`pool-<uuid>`). */
  mintPoolUserToken(
    minter: { tenantId: string; clientId: string },
    tenantCohortId: string | null,
  ): Promise<DeviceToken> {
    return this.mintDeviceToken(minter, { playerId: `pool-${crypto.randomUUID()}`, tenantCohortId });
  }

  /**
   * Revokes every device token of the player issued before now (CONTRACT §15): they fail at once here,
   * within a second everywhere, and their open sockets close (4003). Tokens minted afterwards work.
   */
  async revokePlayerTokens(tenantId: string, playerId: string) {
    const revokedAt = this.clock.now();
    await store.revokePlayerTokens(this.storage, tenantId, playerId, revokedAt);
    this.revocations.notePlayer(tenantId, playerId, revokedAt);
    await this.changed({ kind: 'player', tenantId, playerId, notBefore: revokedAt });
    return { playerId, revokedAt };
  }

  /**
   * `revokePlayerTokens` written in the caller's transaction (a player's erasure); the returned
   * function, called once it committed, applies it here and tells the other processes (sockets: 4003).
   */
  async revokePlayerTokensIn(trx: Kysely<Database>, tenantId: string, playerId: string, at: number) {
    await store.revokePlayerTokensIn(trx, tenantId, playerId, at);
    return async () => {
      this.revocations.notePlayer(tenantId, playerId, at);
      await this.changed({ kind: 'player', tenantId, playerId, notBefore: at });
    };
  }

  // --- signing keys --------------------------------------------------------------------------------

  /** The signing keys, newest (the one that signs) last. */
  signingKeys(): KeyInfo[] {
    return this.keys.list();
  }

  /**
   * A new signing key, which signs from now on here and, within a second, on every process; older
   * keys verify until the longest token lifetime has passed (with `retireOthers`, not at all).
   */
  async rotateSigningKey(options: { retireOthers?: boolean } = {}) {
    const key = await this.keys.rotate(options);
    await this.changed({ kind: 'keys' });
    return { key, keys: this.keys.list() };
  }
}
