import type { FieldError } from '@liveline/protocol';

/** One field-level complaint of a problem document (`errors[]`), as `@liveline/protocol` defines it. */
export type { FieldError };

/** The device's view of time; tests inject their own. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Every failure the SDK reports. HTTP failures carry the server's problem document (`status`, `code`,
 * `detail`, `errors`); failures without a response use status 0 and one of the codes
 * `network_error`, `timeout`, `closed`, `no_session`, `session_active`, `realtime_origin_mismatch`.
 */
export class LivelineError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly errors: FieldError[];
  /** True when sending the same request again later may succeed (network, 408, 429, 5xx). */
  readonly retryable: boolean;
  /** How long the server asked us to wait (`Retry-After`), in ms. */
  readonly retryAfterMs: number | undefined;

  constructor(
    init: { status: number; code: string; detail: string; errors?: FieldError[]; retryAfterMs?: number },
    options?: { cause?: unknown },
  ) {
    super(
      init.status ? `${init.status} ${init.code}: ${init.detail}` : `${init.code}: ${init.detail}`,
      options,
    );
    this.name = 'LivelineError';
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
    this.errors = init.errors ?? [];
    this.retryAfterMs = init.retryAfterMs;
    this.retryable =
      init.status === 0
        ? init.code === 'network_error' || init.code === 'timeout'
        : isRetryableStatus(init.status);
  }
}

export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3), in ms from `nowMs`. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

export interface HttpClientOptions {
  baseUrl: string;
  token: string;
  fetch?: typeof fetch;
  clock?: Clock;
  /** A request without a complete response by then fails as a retryable `timeout`. */
  requestTimeoutMs?: number;
}

/** JSON over HTTP with the device's bearer token; every failure becomes a `LivelineError`. */
export class HttpClient {
  token: string;
  private readonly baseUrl: string;
  private readonly fetch: typeof fetch;
  private readonly clock: Clock;
  private readonly requestTimeoutMs: number;

  constructor(options: HttpClientOptions) {
    // Joined by hand rather than with `new URL(path, base)`, which would drop a path prefix in baseUrl.
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    // Called as a method of this client, the browser's fetch throws "Illegal invocation": call it bare.
    this.fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.clock = options.clock ?? systemClock;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  }

  /**
   * Sends `body` as JSON (a `FormData` as multipart/form-data) and returns the parsed JSON response.
   * `signal` aborts with code `closed`.
   */
  async request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const timeout = AbortSignal.timeout(this.requestTimeoutMs);
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.token}`,
      accept: 'application/json',
    };
    const form = body instanceof FormData;
    if (body !== undefined && !form) headers['content-type'] = 'application/json';
    try {
      const response = await this.fetch(this.baseUrl + path, {
        method,
        headers,
        body: body === undefined ? undefined : form ? body : JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      const text = await response.text();
      if (!response.ok) throw this.problemFrom(response, text);
      return (text ? JSON.parse(text) : undefined) as T;
    } catch (error) {
      if (error instanceof LivelineError) throw error;
      if (signal?.aborted) {
        throw new LivelineError(
          { status: 0, code: 'closed', detail: 'The device was closed.' },
          { cause: error },
        );
      }
      if (timeout.aborted) {
        const detail = `No response within ${this.requestTimeoutMs} ms.`;
        throw new LivelineError({ status: 0, code: 'timeout', detail }, { cause: error });
      }
      const detail = error instanceof Error ? error.message : String(error);
      throw new LivelineError({ status: 0, code: 'network_error', detail }, { cause: error });
    }
  }

  private problemFrom(response: Response, text: string): LivelineError {
    const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), this.clock.now());
    const problem = parseProblem(text);
    return new LivelineError({
      status: response.status,
      // A response that is not a problem document (say, from a proxy) still gets a stable code.
      code: problem?.code ?? `http_${response.status}`,
      detail: problem?.detail ?? (response.statusText || `HTTP ${response.status}`),
      errors: problem?.errors,
      retryAfterMs,
    });
  }
}

function parseProblem(text: string): { code?: string; detail?: string; errors?: FieldError[] } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { code, detail, title, errors } = parsed as Record<string, unknown>;
  return {
    code: typeof code === 'string' ? code : undefined,
    detail: typeof detail === 'string' ? detail : typeof title === 'string' ? title : undefined,
    errors: Array.isArray(errors) ? errors.filter(isFieldError) : undefined,
  };
}

function isFieldError(value: unknown): value is FieldError {
  if (typeof value !== 'object' || value === null) return false;
  const { path, message } = value as Record<string, unknown>;
  return typeof path === 'string' && typeof message === 'string';
}

/** The error of anything asked of a device after `close()`. */
export function closedError(): LivelineError {
  return new LivelineError({ status: 0, code: 'closed', detail: 'The device was closed.' });
}
