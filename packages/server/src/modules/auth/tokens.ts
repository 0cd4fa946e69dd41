import { decodeProtectedHeader, errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../../clock.ts';
import { uuidv7 } from '../../ids.ts';
import { type KeyRing, SIGNING_ALG } from './keys.ts';
import { isScope, type Scope } from './scopes.ts';

const TENANT_AUDIENCE = 'liveline:tenant';
const DEVICE_AUDIENCE = 'liveline:device';

export interface TenantPrincipal {
  kind: 'tenant';
  tenantId: string;
  clientId: string;
  scopes: ReadonlySet<Scope>;
  /** When the access token expires (ms): what outlives the request (a live tail) ends then. */
  expiresAt: number;
}

export interface DevicePrincipal {
  kind: 'device';
  tenantId: string;
  playerId: string;
  tenantCohortId: string | null;
  /** The client that minted the token (`client_id`); null for a token minted before tokens said. */
  clientId: string | null;
  /** When the token was issued (Unix ms): a player's revocation refuses the tokens issued before it. */
  issuedAt: number;
  /** When the token expires (Unix ms): its socket is closed then. */
  expiresAt: number;
}

export interface OperatorPrincipal {
  kind: 'operator';
}

export type Principal = TenantPrincipal | DevicePrincipal | OperatorPrincipal;

/** Verified tokens kept, so a backend or device reusing its token skips the signature check. */
const VERIFIED_CACHE_SIZE = 10_000;

/** Signs and verifies the two kinds of JWT the server issues: tenant access tokens and device tokens. */
export class TokenService {
  /**
   * token → what it verified to, until it expires. Keyed by the whole token (signature included),
   * so only a token that verified before can hit. Insertion order makes the Map an LRU, nearly: a
   * token used again moves to the young end only once it has fallen into the older half (`at`, the
   * count of insertions when it was last put there). A delete and set on every request cost ~1.4 µs
   * with a thousand tokens kept (the Map compacts the holes deletes leave).
   */
  private readonly verified = new Map<
    string,
    { principal: TenantPrincipal | DevicePrincipal; expiresAt: number; kid: string; at: number }
  >();
  /** Insertions into `verified` so far. */
  private insertions = 0;

  constructor(
    private readonly keys: KeyRing,
    private readonly issuer: string,
    private readonly clock: Clock,
    private readonly cacheSize = VERIFIED_CACHE_SIZE,
  ) {}

  get jwks() {
    return this.keys.jwks;
  }

  async issueAccessToken(input: { tenantId: string; clientId: string; scopes: Scope[]; ttlSeconds: number }) {
    const scope = input.scopes.join(' ');
    const token = await this.sign(
      { tenant: input.tenantId, scope },
      input.clientId,
      TENANT_AUDIENCE,
      input.ttlSeconds,
    );
    return { access_token: token, token_type: 'Bearer' as const, expires_in: input.ttlSeconds, scope };
  }

  async issueDeviceToken(input: {
    tenantId: string;
    playerId: string;
    tenantCohortId: string | null;
    /** The client whose access token minted it (RFC 9068 `client_id`): deleting the client revokes it. */
    clientId: string;
    ttlSeconds: number;
  }) {
    const claims: Record<string, unknown> = { tenant: input.tenantId, client_id: input.clientId };
    if (input.tenantCohortId !== null) claims.cohort = input.tenantCohortId;
    const token = await this.sign(claims, input.playerId, DEVICE_AUDIENCE, input.ttlSeconds);
    const expiresAt = (Math.floor(this.clock.now() / 1000) + input.ttlSeconds) * 1000;
    return { token, playerId: input.playerId, tenantCohortId: input.tenantCohortId, expiresAt };
  }

  /** The principal a token stands for, or null when it is not a valid, unexpired token of ours. */
  async verify(token: string): Promise<TenantPrincipal | DevicePrincipal | null> {
    const known = this.remembered(token);
    if (known) return known;
    const checked = await this.verifySignature(token);
    if (checked) {
      if (this.verified.size >= this.cacheSize) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(token, { ...checked, at: this.insertions++ });
    }
    return checked?.principal ?? null;
  }

  /**
   * The principal of a token this process verified before, while it is unexpired and its key still
   * verifies (a key retired at once drops its tokens); null when there is none (`verify` checks it).
   */
  remembered(token: string): TenantPrincipal | DevicePrincipal | null {
    const cached = this.verified.get(token);
    if (!cached) return null;
    if (cached.expiresAt <= this.clock.now() || !this.keys.verifies(cached.kid)) {
      this.verified.delete(token);
      return null;
    }
    if (this.insertions - cached.at > this.cacheSize / 2) {
      this.verified.delete(token);
      cached.at = this.insertions++;
      this.verified.set(token, cached);
    }
    return cached.principal;
  }

  private async verifySignature(token: string) {
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch {
      return null;
    }
    const key = kid ? await this.keys.verifierFor(kid) : null;
    if (!key || !kid) return null;
    try {
      const { payload } = await jwtVerify(token, key, {
        algorithms: [SIGNING_ALG],
        issuer: this.issuer,
        audience: [TENANT_AUDIENCE, DEVICE_AUDIENCE],
        currentDate: new Date(this.clock.now()),
        requiredClaims: ['sub', 'exp', 'tenant'],
      });
      const tenantId = payload.tenant;
      if (typeof tenantId !== 'string' || typeof payload.sub !== 'string') return null;
      const expiresAt = (payload.exp ?? 0) * 1000;
      // `iat` carries milliseconds (a NumericDate may have a fraction, RFC 7519 §2); older tokens whole seconds.
      const issuedAt = typeof payload.iat === 'number' ? Math.round(payload.iat * 1000) : 0;
      const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
      if (aud === TENANT_AUDIENCE) {
        const scopes = new Set<Scope>();
        for (const s of String(payload.scope ?? '').split(' ')) if (isScope(s)) scopes.add(s);
        const principal: TenantPrincipal = {
          kind: 'tenant',
          tenantId,
          clientId: payload.sub,
          scopes,
          expiresAt,
        };
        return { principal, expiresAt, kid };
      }
      const cohort = payload.cohort;
      const clientId = payload.client_id;
      const principal: DevicePrincipal = {
        kind: 'device',
        tenantId,
        playerId: payload.sub,
        tenantCohortId: typeof cohort === 'string' ? cohort : null,
        clientId: typeof clientId === 'string' ? clientId : null,
        issuedAt,
        expiresAt,
      };
      return { principal, expiresAt, kid };
    } catch (err) {
      if (err instanceof joseErrors.JOSEError) return null;
      throw err;
    }
  }

  /**
   * Signs with the newest key. `iat` has milliseconds, so a player's revocation and a token minted
   * right after it in the same second are told apart; `exp` stays whole seconds.
   */
  private sign(claims: Record<string, unknown>, subject: string, audience: string, ttlSeconds: number) {
    const nowMs = this.clock.now();
    const nowS = Math.floor(nowMs / 1000);
    const signing = this.keys.signing;
    return new SignJWT(claims)
      .setProtectedHeader({ alg: SIGNING_ALG, kid: signing.kid, typ: 'JWT' })
      .setIssuer(this.issuer)
      .setSubject(subject)
      .setAudience(audience)
      .setIssuedAt(nowMs / 1000)
      .setExpirationTime(nowS + ttlSeconds)
      .setJti(uuidv7())
      .sign(signing.privateKey);
  }
}
