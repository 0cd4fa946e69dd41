import { createTenantClient, type TenantClient, TokenError } from '@liveline/tenant';
import { ApiError, asApiError, browserFetch, ok } from '../shared/problem.ts';

/**
 * Who the console acts for. It lives in the tab's sessionStorage only (CONTRACT §10: the page keeps
 * its token for the tab): a reload keeps the sign-in, closing the tab forgets it. Client secrets are
 * never stored: they stay in memory, where they refresh the access token while the page is open.
 */
export interface Auth {
  mode: 'client' | 'operator';
  /** The tenant client whose access token the console uses. */
  clientId: string;
  accessToken: string;
  /** When the access token expires (ms). */
  expiresAt: number;
  tenantId: string | null;
  /** What the header shows: the tenant's name, or the client id. */
  label: string;
  /** Operator sign-in: the admin token, and the client the console made for itself (deleted at sign-out). */
  adminToken?: string;
}

/** What the pages call the API with. */
export interface Api {
  auth: Auth;
  /** The tenant API (sections 3–7 of the contract), as this tenant. */
  tenant: TenantClient;
  /** The operator API (`/admin/v1/*`) when an operator signed in, else null. */
  admin: TenantClient | null;
}

const KEY = 'liveline.console.auth';
/** Clients the console creates for an operator's sign-in carry this name. */
export const CONSOLE_CLIENT_NAME = 'liveline console (operator sign-in)';
/** An operator's console clients older than the longest token lifetime are removed at the next sign-in. */
const STALE_CONSOLE_CLIENT_MS = 24 * 3600 * 1000;

const origin = () => window.location.origin;

export function loadAuth(): Auth | null {
  try {
    const raw = sessionStorage.getItem(KEY);
    if (!raw) return null;
    const auth = JSON.parse(raw) as Auth;
    return typeof auth.accessToken === 'string' && auth.expiresAt > Date.now() ? auth : null;
  } catch {
    return null;
  }
}

export function saveAuth(auth: Auth) {
  sessionStorage.setItem(KEY, JSON.stringify(auth));
}

export function clearAuth() {
  sessionStorage.removeItem(KEY);
}

/** The `exp` claim of a JWT, in ms (the token's lifetime; nothing is verified here). */
function expiryOf(jwt: string): number {
  try {
    const payload = jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const exp = (JSON.parse(atob(payload)) as { exp?: unknown }).exp;
    if (typeof exp === 'number') return exp * 1000;
  } catch {
    // not a JWT we can read: assume the shortest lifetime the server allows
  }
  return Date.now() + 60_000;
}

/** A refused token request, as a sentence for people. */
function tokenRefusal(err: unknown): ApiError {
  if (err instanceof TokenError) {
    const description = /\): (.*)$/s.exec(err.message)?.[1] ?? err.message;
    const detail =
      err.error === 'invalid_client'
        ? `Sign-in refused: ${description} Check the client ID and secret.`
        : `Sign-in refused: ${description}`;
    return new ApiError(err.status, err.error, detail);
  }
  return asApiError(err);
}

/** Sign-in with a tenant's client credentials: the page asks `/oauth/token` for its own token. */
export async function signInWithClient(clientId: string, clientSecret: string): Promise<Api> {
  const tenant = createTenantClient({
    baseUrl: origin(),
    credentials: { clientId, clientSecret },
    fetch: browserFetch,
  });
  let accessToken: string;
  try {
    accessToken = await tenant.tokens!.token();
  } catch (err) {
    throw tokenRefusal(err);
  }
  const auth: Auth = {
    mode: 'client',
    clientId,
    accessToken,
    expiresAt: expiryOf(accessToken),
    tenantId: null,
    label: clientId,
  };
  saveAuth(auth);
  return { auth, tenant, admin: null };
}

function adminClient(adminToken: string): TenantClient {
  return createTenantClient({ baseUrl: origin(), accessToken: adminToken, fetch: browserFetch });
}

export interface TenantChoice {
  tenantId: string;
  name: string;
}

/** Operator sign-in, step 1: the admin token is checked by listing the tenants. */
export async function listTenants(adminToken: string): Promise<TenantChoice[]> {
  const page = await ok(adminClient(adminToken).GET('/admin/v1/tenants'));
  return page.tenants.map((t) => ({ tenantId: t.tenantId, name: t.name }));
}

/**
 * Operator sign-in, step 2: the tenant API needs a tenant's token, so the console creates a client of
 * that tenant for this sign-in (named `CONSOLE_CLIENT_NAME`), and deletes it at sign-out. Console
 * clients left behind by a closed tab are deleted once they are older than any token they could
 * have issued.
 */
export async function signInAsOperator(adminToken: string, choice: TenantChoice): Promise<Api> {
  const admin = adminClient(adminToken);
  const path = { tenantId: choice.tenantId };
  const existing = await ok(admin.GET('/admin/v1/tenants/{tenantId}/clients', { params: { path } }));
  const stale = existing.clients.filter(
    (c) =>
      c.name === CONSOLE_CLIENT_NAME &&
      c.revokedAt === null &&
      c.createdAt < Date.now() - STALE_CONSOLE_CLIENT_MS,
  );
  await Promise.all(
    stale.map((c) =>
      admin
        .DELETE('/admin/v1/tenants/{tenantId}/clients/{clientId}', {
          params: { path: { ...path, clientId: c.clientId } },
        })
        .catch(() => undefined),
    ),
  );
  const created = await ok(
    admin.POST('/admin/v1/tenants/{tenantId}/clients', {
      params: { path },
      body: { name: CONSOLE_CLIENT_NAME },
    }),
  );
  const tenant = createTenantClient({
    baseUrl: origin(),
    credentials: { clientId: created.clientId, clientSecret: created.clientSecret },
    fetch: browserFetch,
  });
  let accessToken: string;
  try {
    accessToken = await tenant.tokens!.token();
  } catch (err) {
    throw tokenRefusal(err);
  }
  const auth: Auth = {
    mode: 'operator',
    clientId: created.clientId,
    accessToken,
    expiresAt: expiryOf(accessToken),
    tenantId: choice.tenantId,
    label: choice.name,
    adminToken,
  };
  saveAuth(auth);
  return { auth, tenant, admin };
}

/** The API of a sign-in kept in the tab (after a reload: the stored token, until it expires). */
export function apiFromStoredAuth(auth: Auth): Api {
  return {
    auth,
    tenant: createTenantClient({ baseUrl: origin(), accessToken: auth.accessToken, fetch: browserFetch }),
    admin: auth.adminToken ? adminClient(auth.adminToken) : null,
  };
}

/** Forgets the sign-in; an operator's console client is deleted (its tokens stop working at once). */
export async function signOut(api: Api): Promise<void> {
  clearAuth();
  const { auth, admin } = api;
  if (auth.mode === 'operator' && admin && auth.tenantId) {
    await admin
      .DELETE('/admin/v1/tenants/{tenantId}/clients/{clientId}', {
        params: { path: { tenantId: auth.tenantId, clientId: auth.clientId } },
      })
      .catch(() => undefined);
  }
}
