/** OAuth2 client credentials (RFC 6749 §4.4) against liveline's `/oauth/token`, with refresh. */

export interface ClientCredentials {
  clientId: string;
  clientSecret: string;
  /** Space-separated scopes to ask for (default: all the client has). */
  scope?: string;
}

export interface TokenSourceOptions extends ClientCredentials {
  baseUrl: string;
  fetch?: typeof fetch;
  /** Refresh this long before the token expires (default 60 s, at most half its lifetime). */
  refreshBeforeMs?: number;
  now?: () => number;
}

export class TokenError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    description: string,
  ) {
    super(`token request failed (${status} ${error}): ${description}`);
    this.name = 'TokenError';
  }
}

interface Cached {
  token: string;
  refreshAt: number;
  expiresAt: number;
}

/**
 * Access tokens for a tenant client: fetched on first use, reused, and fetched again shortly before
 * they expire. Concurrent callers share one request.
 */
export class TokenSource {
  private cached: Cached | null = null;
  private pending: Promise<Cached> | null = null;
  private readonly fetch: typeof fetch;
  private readonly now: () => number;

  constructor(private readonly options: TokenSourceOptions) {
    // Called as a method of this object, a browser's own fetch would throw "Illegal invocation".
    const fetchImpl = options.fetch ?? globalThis.fetch;
    this.fetch = (input, init) => fetchImpl(input, init);
    this.now = options.now ?? Date.now;
  }

  /** A valid access token. */
  async token(): Promise<string> {
    const c = this.cached;
    if (c && this.now() < c.refreshAt) return c.token;
    // Past the refresh point but not expired: the current token still works while a new one comes.
    this.pending ??= this.request().finally(() => {
      this.pending = null;
    });
    if (c && this.now() < c.expiresAt) {
      this.pending.catch(() => {});
      return c.token;
    }
    return (await this.pending).token;
  }

  /** Forgets the token (say, after a 401), so the next call fetches a new one. */
  invalidate() {
    this.cached = null;
  }

  private async request(): Promise<Cached> {
    const { clientId, clientSecret, scope, baseUrl } = this.options;
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (scope) form.set('scope', scope);
    // btoa, not Buffer: the client runs in browsers too (the console). The text is ASCII once encoded.
    const basic = btoa(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`);
    const started = this.now();
    const res = await this.fetch(`${baseUrl.replace(/\/+$/, '')}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}` },
      body: form.toString(),
    });
    const body = (await res.json().catch(() => ({}))) as {
      access_token?: string;
      expires_in?: number;
      error?: string;
      error_description?: string;
    };
    if (!res.ok || typeof body.access_token !== 'string' || typeof body.expires_in !== 'number') {
      throw new TokenError(
        res.status,
        body.error ?? 'invalid_response',
        body.error_description ?? 'no access token',
      );
    }
    const lifetime = body.expires_in * 1000;
    const early = Math.min(this.options.refreshBeforeMs ?? 60_000, lifetime / 2);
    this.cached = {
      token: body.access_token,
      expiresAt: started + lifetime,
      refreshAt: started + lifetime - early,
    };
    return this.cached;
  }
}
