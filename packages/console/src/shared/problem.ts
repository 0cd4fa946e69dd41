/**
 * Every failure the pages show is an `ApiError` whose `detail` is the problem document's `detail`
 * (RFC 9457), the OAuth error's `error_description`, or a sentence saying the server is unreachable.
 */
export interface FieldError {
  path: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    /** HTTP status; 0 when no answer came. */
    readonly status: number,
    /** The problem's stable `code` (or the OAuth `error`). */
    readonly code: string,
    readonly detail: string,
    readonly errors: FieldError[] = [],
  ) {
    super(detail);
    this.name = 'ApiError';
  }
}

/** What an answer's body says went wrong. */
export function problemFrom(status: number, body: unknown): ApiError {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const detail =
    text(b.detail) ??
    text(b.error_description) ??
    text(b.title) ??
    (typeof body === 'string' && body.length < 300 && body.trim() !== '' ? body : undefined) ??
    `The server answered ${status}.`;
  const code = text(b.code) ?? text(b.error) ?? `http_${status}`;
  const errors = Array.isArray(b.errors)
    ? b.errors.filter(
        (e): e is FieldError =>
          typeof e === 'object' && e !== null && typeof e.path === 'string' && typeof e.message === 'string',
      )
    : [];
  return new ApiError(status, code, detail, errors);
}

/** Anything thrown while talking to the server, as an `ApiError`. */
export function asApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ApiError(0, 'network_error', `The liveline server could not be reached (${message}).`);
}

interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * The data of a typed client's answer, or an `ApiError` thrown with the problem's detail.
 * `await ok(api.GET('/sessions/active'))`.
 */
export async function ok<T>(request: Promise<FetchResult<T>>): Promise<T> {
  let result: FetchResult<T>;
  try {
    result = await request;
  } catch (err) {
    throw asApiError(err);
  }
  if (!result.response.ok) throw problemFrom(result.response.status, result.error);
  return result.data as T;
}

/**
 * The pages' fetch: without credentials. The pages authenticate with bearer tokens only, and a
 * request that carries no browser credentials never makes the browser answer a 401's
 * `WWW-Authenticate: Basic` challenge (from `/oauth/token`) with a login prompt of its own.
 */
export const browserFetch: typeof fetch = (input, init) => fetch(input, { ...init, credentials: 'omit' });
