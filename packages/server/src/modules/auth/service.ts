import type { Clock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import type { Storage } from '../../storage/index.ts';
import { type ClientCredentials, decideGrant, type OAuthFailure, type TokenRequest } from './grant.ts';
import type { ServerKeys } from './keys.ts';
import { type OperatorToken, resolveOperatorToken } from './operator.ts';
import { SCOPES, type Scope } from './scopes.ts';
import * as store from './store.ts';
import { type DevicePrincipal, type Principal, type TenantPrincipal, TokenService } from './tokens.ts';

export type { ClientInfo, Tenant } from './store.ts';

/** The settings auth reads. */
export type AuthConfig = Pick<
  Config,
  'adminToken' | 'dataDir' | 'publicUrl' | 'accessTokenTtlS' | 'deviceTokenTtlS'
>;

export interface AuthDeps {
  storage: Storage;
  clock: Clock;
  config: AuthConfig;
  /** The server's keys (`loadServerKeys`): they sign tokens and digest client secrets. */
  keys: ServerKeys;
}

/** A token request answered: the access token (RFC 6749 §5.1) or why not (§5.2). */
export type TokenResponse = { token: AccessToken } | { failure: OAuthFailure };
export type AccessToken = Awaited<ReturnType<TokenService['issueAccessToken']>>;
export type DeviceToken = Awaited<ReturnType<TokenService['issueDeviceToken']>>;

/** Builds the auth module's service: the operator token from the settings, tokens signed with `keys`. */
export function createAuth(deps: AuthDeps): AuthService {
  const { config, clock } = deps;
  const operator = resolveOperatorToken(config.adminToken, config.dataDir);
  const tokens = new TokenService(deps.keys, config.publicUrl ?? 'urn:liveline', clock);
  return new AuthService(deps, operator, tokens);
}

/**
 * Who may call what (CONTRACT §1): tenants, their OAuth2 clients, the tokens the server issues, and
 * the one question every request asks — who holds this bearer token.
 */
/** How long an answer about a client's liveness is trusted (other processes' revocations apply within it). */
const CLIENT_LIVENESS_MS = 1000;
const MAX_REMEMBERED_CLIENTS = 10_000;

export class AuthService {
  private readonly storage: Storage;
  private readonly clock: Clock;
  private readonly config: AuthConfig;
  private readonly digestKey: Buffer;

  /** Recent answers of `isClientLive`, by tenant and client. */
  private readonly liveness = new Map<string, { live: boolean; until: number }>();

  constructor(
    deps: AuthDeps,
    /** The operator's admin token (`generated` is set when this start made it: print it once). */
    readonly operator: OperatorToken,
    private readonly tokens: TokenService,
  ) {
    this.storage = deps.storage;
    this.clock = deps.clock;
    this.config = deps.config;
    this.digestKey = deps.keys.digestKey;
  }

  // --- the bearer token of a request ---------------------------------------------------------------

  /**
   * The principal a bearer token stands for, or null. Verified tokens are cached until they expire,
   * so this says nothing of revocation: ask `isClientLive` for a tenant principal on every request.
   */
  async authenticate(token: string): Promise<Principal | null> {
    if (this.operator.matches(token)) return { kind: 'operator' };
    return this.tokens.verify(token);
  }

  /**
   * True while the client of a tenant token exists and is not revoked. Asked on every request, so the
   * answer is remembered for `CLIENT_LIVENESS_MS`: a revocation through this process applies at once
   * (it forgets the answer), one through another process within that time (CONTRACT §9.1: 1 s).
   */
  async isClientLive(principal: Pick<TenantPrincipal, 'tenantId' | 'clientId'>): Promise<boolean> {
    const key = `${principal.tenantId}\u0000${principal.clientId}`;
    const known = this.liveness.get(key);
    const now = performance.now();
    if (known && known.until > now) return known.live;
    const live = await store.isClientLive(this.storage, principal.tenantId, principal.clientId);
    if (this.liveness.size >= MAX_REMEMBERED_CLIENTS) this.liveness.clear();
    this.liveness.set(key, { live, until: now + CLIENT_LIVENESS_MS });
    return live;
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

  /** Revokes a live client of the tenant, or a 404 `not_found`. */
  async revokeClient(tenantId: string, clientId: string): Promise<void> {
    const revoked = await store.revokeClient(this.storage, tenantId, clientId, this.clock.now());
    this.liveness.delete(`${tenantId}\u0000${clientId}`);
    if (!revoked) throw problems.notFound('client');
  }

  // --- tokens --------------------------------------------------------------------------------------

  /** The client-credentials grant (RFC 6749 §4.4): an access token for the client, or an OAuth error. */
  async grantClientCredentials(
    credentials: ClientCredentials | null,
    form: TokenRequest,
  ): Promise<TokenResponse> {
    const client = credentials ? await store.findClient(this.storage, credentials.id) : null;
    const grant = decideGrant(this.digestKey, credentials, client, form);
    if ('failure' in grant) return grant;
    const token = await this.tokens.issueAccessToken({
      tenantId: grant.client.tenantId,
      clientId: grant.client.clientId,
      scopes: grant.scopes,
      ttlSeconds: this.config.accessTokenTtlS,
    });
    return { token };
  }

  /** A device token for a player of the tenant (`ttlSeconds` defaults to the configured lifetime). */
  mintDeviceToken(
    tenantId: string,
    player: Omit<DevicePrincipal, 'kind' | 'tenantId'> & { ttlSeconds?: number },
  ): Promise<DeviceToken> {
    return this.tokens.issueDeviceToken({
      tenantId,
      playerId: player.playerId,
      tenantCohortId: player.tenantCohortId,
      ttlSeconds: player.ttlSeconds ?? this.config.deviceTokenTtlS,
    });
  }

  /** A device token for a new anonymous pool player (`pool-<uuid>`). */
  mintPoolUserToken(tenantId: string, tenantCohortId: string | null): Promise<DeviceToken> {
    return this.mintDeviceToken(tenantId, { playerId: `pool-${crypto.randomUUID()}`, tenantCohortId });
  }
}
