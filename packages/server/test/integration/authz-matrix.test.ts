/**
 * The authorization matrix (issue 10): every protected route of `/openapi.json` × every kind of
 * caller, each with the answer CONTRACT §0/§1 gives it — 401 without a valid token (none, garbage, a
 * bad signature, expired), 403 for a valid token of the wrong kind or without the scope, 404 for
 * another tenant's resource or another player's session, and through for its owners. Routes and the
 * scopes they need are read from the document a running server publishes, so a new route is checked
 * without anyone writing a case; a route the matrix cannot classify (a new path parameter, a new kind
 * of caller, a public route no one listed) fails.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessToken, call, createTenant, deviceToken } from '../helpers/api.ts';
import {
  type Body,
  bodyFor,
  CALLERS,
  type Caller,
  type Expected,
  expectations,
  misplaced,
  OWNER,
  PUBLIC_ROUTES,
  type Shared,
  TenantWorld,
  withForeignSignature,
} from '../helpers/authz-world.ts';
import { type Callers, fetchDocument, type Operation, operationsOf } from '../helpers/openapi.ts';
import { type Receiver, startReceiver } from '../helpers/receiver.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

const ENV = {
  LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
  LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
  LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
};

/** The routes, from the document of a server started only to publish it. */
async function publishedOperations() {
  const server = await startTestServer('sqlite', ENV);
  try {
    return operationsOf(await fetchDocument(server.url));
  } finally {
    await server.close();
  }
}

const operations = await publishedOperations();
const protectedOps = operations.filter((op): op is Operation & { callers: Callers } => op.callers !== null);

const REFUSAL_CODE: Record<number, string> = { 401: 'unauthorized', 403: 'forbidden', 404: 'not_found' };

/** Refusals first (they must change nothing), then the allowed callers, the owners last. */
const ALLOWED_ORDER: Caller[] = [
  'tenant B',
  "tenant B's device",
  "another player's device",
  'operator',
  'own device',
  'tenant A',
];

async function send(base: string, method: string, path: string, token: string | null, body: Body) {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let payload: string | FormData | undefined;
  if (body && 'json' in body) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body.json);
  } else if (body && 'form' in body) payload = body.form();
  const res = await fetch(base + path, { method, headers, body: payload });
  // A live tail (text/event-stream) never ends by itself: its head is the answer.
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    await res.body?.cancel();
    return { status: res.status, headers: res.headers, text: '', body: null };
  }
  const text = await res.text();
  let parsed: Record<string, unknown> | null = null;
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : null;
  } catch {
    parsed = null;
  }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

describe.each(backends)('authorization matrix (%s)', (backend) => {
  let server: TestServer;
  let receiver: Receiver;
  let shared: Shared;
  let offset = 0;

  beforeAll(async () => {
    receiver = await startReceiver();
    server = await startTestServer(backend, ENV, { clock: { now: () => Date.now() + offset } });
    const base = server.url;
    // Tokens that were valid once: minted three days ago by the server's own keys.
    offset = -3 * 86_400_000;
    const old = await createTenant(base, server.adminToken, { name: 'Expired' });
    const expiredDevice = await deviceToken(base, old.token, OWNER);
    offset = 0;
    const b = await createTenant(base, server.adminToken, { name: 'Tenant B' });
    shared = {
      base,
      adminToken: server.adminToken,
      webhookUrl: receiver.url,
      tenantB: { token: b.token },
      expired: { tenant: old.token, device: expiredDevice },
    };
    // The expired tokens are refused for their age alone: their client still exists and is live.
    const fresh = await accessToken(base, old.clientId, old.clientSecret);
    expect((await call(base, 'GET', '/sessions/active', { token: fresh })).status).toBe(200);
    expect((await call(base, 'GET', '/sessions/active', { token: old.token })).status).toBe(401);
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it('checks the routes of the document this server publishes', async () => {
    const served = operationsOf(await fetchDocument(server.url)).map((op) => op.key);
    expect(served).toEqual(operations.map((op) => op.key));
    expect(protectedOps.length).toBeGreaterThan(50);
  });

  it('knows every route that takes no token, and each protected route sits where its callers belong', () => {
    const wrong = operations.map((op) => [op.key, misplaced(op)]).filter(([, why]) => why !== null);
    expect(wrong).toEqual([]);
    for (const key of PUBLIC_ROUTES) expect(operations.map((op) => op.key)).toContain(key);
  });

  it.each(protectedOps)('$key', async (op) => {
    const expected = expectations(op);
    const world = await TenantWorld.create(shared);
    const path = await world.pathFor(op);
    const bDevice = await deviceToken(shared.base, shared.tenantB.token, OWNER);

    const tokens: Record<Caller, () => Promise<string | null>> = {
      'no token': async () => null,
      'not a token': async () => 'not-a-token',
      'wrong admin token': async () => `${shared.adminToken}x`,
      'tenant token, bad signature': async () => withForeignSignature(world.token, shared.tenantB.token),
      'device token, bad signature': async () => withForeignSignature(world.ownDevice, bDevice),
      'tenant token, expired': async () => shared.expired.tenant,
      'device token, expired': async () => shared.expired.device,
      operator: async () => shared.adminToken,
      'tenant A': async () => world.token,
      'tenant B': async () => shared.tenantB.token,
      'tenant A client without the scope': () => world.tokenWithout(op.callers.tenantScopes ?? []),
      'own device': async () => world.ownDevice,
      "another player's device": async () => world.otherDevice,
      "tenant B's device": async () => bDevice,
    };

    const refused = CALLERS.filter((c) => expected.get(c) !== 'allowed');
    const allowed = ALLOWED_ORDER.filter((c) => expected.get(c) === 'allowed');
    expect(allowed.length, 'a protected route that no caller may use').toBeGreaterThan(0);

    const failures: string[] = [];
    for (const caller of [...refused, ...allowed]) {
      const want = expected.get(caller) as Expected;
      const res = await send(shared.base, op.method, path, await tokens[caller](), bodyFor(op, shared));
      const said = `${caller}: ${res.status} ${res.text.slice(0, 300)}`;
      if (want === 'allowed') {
        if (!((res.status >= 200 && res.status < 300) || res.status === 409))
          failures.push(`${said} (expected to get through)`);
        continue;
      }
      if (res.status !== want) failures.push(`${said} (expected ${want})`);
      else if (!String(res.headers.get('content-type')).startsWith('application/problem+json'))
        failures.push(`${said} (not a problem document)`);
      else if (res.body?.status !== want || res.body?.code !== REFUSAL_CODE[want])
        failures.push(`${said} (expected status ${want}, code ${REFUSAL_CODE[want]})`);
      else if (want === 401 && !res.headers.get('www-authenticate'))
        failures.push(`${said} (a 401 without WWW-Authenticate)`);
    }
    expect(failures, `${op.key} as ${path}`).toEqual([]);
  });
});
