import { decodeProtectedHeader, errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { uuidv7 } from 'uuidv7';
import type { Clock } from '../../clock.ts';
import { type ServerKeys, SIGNING_ALG } from './keys.ts';
import { isScope, type Scope } from './scopes.ts';

const TENANT_AUDIENCE = 'liveline:tenant';
const DEVICE_AUDIENCE = 'liveline:device';

export interface TenantPrincipal {
  kind: 'tenant';
  tenantId: string;
  clientId: string;
  scopes: ReadonlySet<Scope>;
}

export interface DevicePrincipal {
  kind: 'device';
  tenantId: string;
  playerId: string;
  tenantCohortId: string | null;
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
   * so only a token that verified before can hit. Insertion order makes the Map an LRU.
   */
  private readonly verified = new Map<
    string,
    { principal: TenantPrincipal | DevicePrincipal; expiresAt: number }
  >();

  constructor(
    private readonly keys: ServerKeys,
    private readonly issuer: string,
    private readonly clock: Clock,
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
    ttlSeconds: number;
  }) {
    const claims: Record<string, unknown> = { tenant: input.tenantId };
    if (input.tenantCohortId !== null) claims.cohort = input.tenantCohortId;
    const token = await this.sign(claims, input.playerId, DEVICE_AUDIENCE, input.ttlSeconds);
    const expiresAt = (Math.floor(this.clock.now() / 1000) + input.ttlSeconds) * 1000;
    return { token, playerId: input.playerId, tenantCohortId: input.tenantCohortId, expiresAt };
  }

  /** The principal a token stands for, or null when it is not a valid, unexpired token of ours. */
  async verify(token: string): Promise<TenantPrincipal | DevicePrincipal | null> {
    const cached = this.verified.get(token);
    if (cached) {
      this.verified.delete(token);
      if (cached.expiresAt > this.clock.now()) {
        this.verified.set(token, cached);
        return cached.principal;
      }
    }
    const checked = await this.verifySignature(token);
    if (checked) {
      if (this.verified.size >= VERIFIED_CACHE_SIZE) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(token, checked);
    }
    return checked?.principal ?? null;
  }

  private async verifySignature(token: string) {
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch {
      return null;
    }
    const key = kid ? this.keys.verifying.get(kid) : undefined;
    if (!key) return null;
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
      const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
      if (aud === TENANT_AUDIENCE) {
        const scopes = new Set<Scope>();
        for (const s of String(payload.scope ?? '').split(' ')) if (isScope(s)) scopes.add(s);
        const principal: TenantPrincipal = { kind: 'tenant', tenantId, clientId: payload.sub, scopes };
        return { principal, expiresAt };
      }
      const cohort = payload.cohort;
      const principal: DevicePrincipal = {
        kind: 'device',
        tenantId,
        playerId: payload.sub,
        tenantCohortId: typeof cohort === 'string' ? cohort : null,
      };
      return { principal, expiresAt };
    } catch (err) {
      if (err instanceof joseErrors.JOSEError) return null;
      throw err;
    }
  }

  private sign(claims: Record<string, unknown>, subject: string, audience: string, ttlSeconds: number) {
    const nowS = Math.floor(this.clock.now() / 1000);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: SIGNING_ALG, kid: this.keys.signing.kid, typ: 'JWT' })
      .setIssuer(this.issuer)
      .setSubject(subject)
      .setAudience(audience)
      .setIssuedAt(nowS)
      .setExpirationTime(nowS + ttlSeconds)
      .setJti(uuidv7())
      .sign(this.keys.signing.privateKey);
  }
}
