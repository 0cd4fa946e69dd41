import { STATUS_CODES } from 'node:http';

/** One field-level complaint inside a problem document. */
export interface FieldError {
  path: string;
  message: string;
}

/** RFC 9457 problem document, with our stable `code`. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  errors?: FieldError[];
  [extra: string]: unknown;
}

/**
 * An error that becomes a problem document. Throw it from any handler or hook;
 * the error handler renders it. `extra` members are merged into the document.
 */
export class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
    readonly errors?: FieldError[],
    readonly extra?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(detail);
    this.name = 'ProblemError';
  }

  toProblem(): Problem {
    const problem: Problem = {
      type: 'about:blank',
      title: STATUS_CODES[this.status] ?? 'Error',
      status: this.status,
      detail: this.message,
      code: this.code,
      ...this.extra,
    };
    if (this.errors) problem.errors = this.errors;
    return problem;
  }
}

/** The error catalogue: one constructor per stable code. */
export const problems = {
  validation: (detail: string, errors: FieldError[]) =>
    new ProblemError(400, 'validation_failed', detail, errors),
  malformedJson: (detail: string) =>
    new ProblemError(400, 'malformed_json', detail, [{ path: '', message: 'body is not valid JSON' }]),
  unauthorized: (detail = 'A valid bearer token is required.') =>
    new ProblemError(401, 'unauthorized', detail, undefined, undefined, { 'WWW-Authenticate': 'Bearer' }),
  forbidden: (detail: string) => new ProblemError(403, 'forbidden', detail),
  notFound: (what = 'resource') => new ProblemError(404, 'not_found', `No such ${what}.`),
  conflict: (code: string, detail: string, extra?: Record<string, unknown>) =>
    new ProblemError(409, code, detail, undefined, extra),
  payloadTooLarge: (detail: string) => new ProblemError(413, 'payload_too_large', detail),
  unsupportedMediaType: (detail: string) => new ProblemError(415, 'unsupported_media_type', detail),
  rateLimited: (retryAfterS: number) =>
    new ProblemError(
      429,
      'rate_limited',
      `Too many requests; retry after ${retryAfterS} s.`,
      undefined,
      undefined,
      {
        'Retry-After': String(retryAfterS),
      },
    ),
  internal: () => new ProblemError(500, 'internal', 'An internal error occurred; it has been logged.'),
  unavailable: (detail: string) => new ProblemError(503, 'unavailable', detail),
};

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
