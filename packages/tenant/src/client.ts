import createClient, { type Client, type Middleware } from 'openapi-fetch';
import { type ClientCredentials, TokenSource } from './auth.ts';
import type { paths } from './generated/api.ts';
import { tail } from './tail.ts';
import type { TailMessage, TailOptions, TailTarget } from './tail-types.ts';

export interface TenantClientOptions {
  /** The liveline server, e.g. `https://liveline.example.com`. */
  baseUrl: string;
  /** The tenant's OAuth2 client: tokens are fetched and refreshed for you. */
  credentials?: ClientCredentials;
  /** Or a fixed access token (you refresh it). */
  accessToken?: string;
  fetch?: typeof fetch;
}

export type TenantClient = Client<paths> & {
  tokens: TokenSource | null;
  /**
   * The live tail of a session (`{sessionId}`), a cohort (`{tenantCohortId}`) or the tenant (`{}`):
   * an async iterator of events and presence changes that reconnects by itself with `Last-Event-ID`.
   */
  tail(target?: TailTarget, options?: TailOptions): AsyncGenerator<TailMessage, void, undefined>;
};

/**
 * A typed client for the tenant API, generated from the server's OpenAPI document: paths, bodies,
 * answers and errors are checked by TypeScript.
 *
 * ```ts
 * const liveline = createTenantClient({ baseUrl, credentials: { clientId, clientSecret } });
 * const { data, error } = await liveline.GET('/sessions/{SessionId}', { params: { path: { SessionId } } });
 * ```
 */
export function createTenantClient(options: TenantClientOptions): TenantClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const client = createClient<paths>({ baseUrl, fetch: fetchImpl });
  const tokens = options.credentials
    ? new TokenSource({ ...options.credentials, baseUrl, fetch: fetchImpl })
    : null;
  if (!tokens && !options.accessToken)
    throw new TypeError('createTenantClient needs credentials or an accessToken');
  const auth: Middleware = {
    async onRequest({ request }) {
      request.headers.set('authorization', `Bearer ${tokens ? await tokens.token() : options.accessToken}`);
      return request;
    },
    async onResponse({ response }) {
      // A token revoked or signed with a rotated key: the next request fetches a fresh one.
      if (response.status === 401) tokens?.invalidate();
      return response;
    },
  };
  client.use(auth);
  const connection = {
    baseUrl,
    // Called as a method of another object, a browser's own fetch would throw "Illegal invocation".
    fetch: ((input, init) => fetchImpl(input, init)) as typeof fetch,
    token: async () => (tokens ? tokens.token() : (options.accessToken as string)),
    invalidate: () => {
      tokens?.invalidate();
      return tokens !== null;
    },
  };
  return Object.assign(client, {
    tokens,
    tail: (target: TailTarget = {}, tailOptions: TailOptions = {}) => tail(connection, target, tailOptions),
  });
}
