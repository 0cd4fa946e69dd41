/** Small HTTP helpers for tests: real requests, parsed answers. */

export interface Answer<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export async function call<T = Record<string, unknown>>(
  base: string,
  method: string,
  path: string,
  options: { token?: string; json?: unknown; body?: string; headers?: Record<string, string> } = {},
): Promise<Answer<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body });
  // A live tail (text/event-stream) never ends by itself: its head is the answer.
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    await res.body?.cancel();
    return { status: res.status, headers: res.headers, body: null as T, text: '' };
  }
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

export interface TenantFixture {
  tenantId: string;
  clientId: string;
  clientSecret: string;
  token: string;
}

/** Creates a tenant, a client with the given scopes (default all) and an access token. */
export async function createTenant(
  base: string,
  adminToken: string,
  options: { name?: string; scopes?: string[] } = {},
): Promise<TenantFixture> {
  const tenant = await call(base, 'POST', '/admin/v1/tenants', {
    token: adminToken,
    json: { name: options.name ?? 'Test tenant' },
  });
  if (tenant.status !== 201) throw new Error(`tenant create failed: ${tenant.text}`);
  const tenantId = String(tenant.body.tenantId);
  const client = await call(base, 'POST', `/admin/v1/tenants/${tenantId}/clients`, {
    token: adminToken,
    json: options.scopes ? { scopes: options.scopes } : {},
  });
  if (client.status !== 201) throw new Error(`client create failed: ${client.text}`);
  const clientId = String(client.body.clientId);
  const clientSecret = String(client.body.clientSecret);
  const token = await accessToken(base, clientId, clientSecret);
  return { tenantId, clientId, clientSecret, token };
}

export async function accessToken(base: string, clientId: string, clientSecret: string, scope?: string) {
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (scope) form.set('scope', scope);
  const res = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
    },
    body: form.toString(),
  });
  const body = (await res.json()) as { access_token?: string };
  if (res.status !== 200 || !body.access_token) throw new Error(`token failed: ${JSON.stringify(body)}`);
  return body.access_token;
}

export async function deviceToken(
  base: string,
  tenantToken: string,
  playerId: string,
  tenantCohortId?: string,
) {
  const res = await call(base, 'POST', '/client-tokens', {
    token: tenantToken,
    json: tenantCohortId ? { playerId, tenantCohortId } : { playerId },
  });
  if (res.status !== 200) throw new Error(`device token failed: ${res.text}`);
  return String(res.body.token);
}
