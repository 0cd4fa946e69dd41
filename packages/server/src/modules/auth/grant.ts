import { constantTimeEqual, digestSecret } from '../../secrets.ts';
import { isScope, type Scope } from './scopes.ts';
import type { StoredClient } from './store.ts';

/** Client credentials as presented: by HTTP Basic or in the form (RFC 6749 §2.3.1). */
export interface ClientCredentials {
  id: string;
  secret: string;
}

/** The form fields of a token request that the grant reads (the rest are client credentials). */
export interface TokenRequest {
  grant_type?: unknown;
  scope?: unknown;
}

/** A token request refused, as RFC 6749 §5.2 words it: `{error, error_description}` with its status. */
export interface OAuthFailure {
  /** 400 or 401 from the grant; 413, 415 or 429 for a request refused before it (see routes/oauth.ts). */
  status: number;
  error: 'invalid_client' | 'invalid_request' | 'unsupported_grant_type' | 'invalid_scope';
  description: string;
}

/** The OAuth2 error catalogue of `/oauth/token`: each refusal named once, with its status. */
export const oauthFailures = {
  clientAuthenticationRequired: (): OAuthFailure => ({
    status: 401,
    error: 'invalid_client',
    description: 'Client authentication is required.',
  }),
  invalidClient: (): OAuthFailure => ({
    status: 401,
    error: 'invalid_client',
    description: 'Unknown client or wrong secret.',
  }),
  grantTypeRequired: (): OAuthFailure => ({
    status: 400,
    error: 'invalid_request',
    description: 'grant_type is required.',
  }),
  unsupportedGrantType: (): OAuthFailure => ({
    status: 400,
    error: 'unsupported_grant_type',
    description: 'Only client_credentials is supported.',
  }),
  scopeNotGranted: (scopes: string[]): OAuthFailure => ({
    status: 400,
    error: 'invalid_scope',
    description: `Not granted to this client: ${scopes.join(' ')}`,
  }),
};

/** What a client-credentials request is granted: the client and the scopes of its token. */
export type Grant = { client: StoredClient; scopes: Scope[] } | { failure: OAuthFailure };

/**
 * Decides a client-credentials request (RFC 6749 §4.4), in the order the errors are reported: client
 * authentication first (so an unauthenticated caller learns nothing about the form; the current
 * secret, or the one a rotation replaced while its overlap lasts), then the grant type, then the
 * scopes asked for, which must be a subset of the client's.
 */
export function decideGrant(
  digestKey: Buffer,
  credentials: ClientCredentials | null,
  client: StoredClient | null,
  form: TokenRequest,
  now: number,
): Grant {
  if (!credentials) return { failure: oauthFailures.clientAuthenticationRequired() };
  const presented = digestSecret(digestKey, credentials.secret);
  // Compare with both secrets, even when the client is unknown or has no previous one, so timing
  // tells neither which ids exist nor which secret matched.
  const currentOk = constantTimeEqual(presented, client?.secretDigest ?? '');
  const previousOk = constantTimeEqual(presented, client?.previousSecretDigest ?? '');
  const previousLive =
    client?.previousSecretDigest != null && (client.previousSecretExpiresAt ?? 0) > now && previousOk;
  const secretOk = currentOk || previousLive;
  if (!client || !secretOk || client.revokedAt !== null) return { failure: oauthFailures.invalidClient() };
  if (form.grant_type === undefined) return { failure: oauthFailures.grantTypeRequired() };
  if (form.grant_type !== 'client_credentials') return { failure: oauthFailures.unsupportedGrantType() };
  if (typeof form.scope !== 'string' || form.scope.trim() === '') return { client, scopes: client.scopes };
  const asked = form.scope.trim().split(/\s+/);
  const bad = asked.filter((s) => !isScope(s) || !client.scopes.includes(s));
  if (bad.length > 0) return { failure: oauthFailures.scopeNotGranted(bad) };
  return { client, scopes: [...new Set(asked)] as Scope[] };
}
