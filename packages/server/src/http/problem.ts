import { STATUS_CODES } from 'node:http';
import { MAX_PROBLEM_DETAIL, MAX_PROBLEM_ERRORS, MAX_PROBLEM_FIELD } from './schemas.ts';

/** `text`, cut to at most `max` characters (never in the middle of a surrogate pair). */
function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

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
      detail: clip(this.message, MAX_PROBLEM_DETAIL),
      code: this.code,
      ...this.extra,
    };
    // Bounded as /openapi.json says: a detail or a path may quote what the client sent.
    if (this.errors) {
      problem.errors = this.errors.slice(0, MAX_PROBLEM_ERRORS).map((e) => ({
        path: clip(e.path, MAX_PROBLEM_FIELD),
        message: clip(e.message, MAX_PROBLEM_FIELD),
      }));
    }
    return problem;
  }
}

const TOKEN_NOT_ACCEPTED = {
  operator: 'The operator token cannot be used on this route.',
  tenant: 'Tenant tokens cannot be used on this route.',
  device: 'Device tokens cannot be used on this route.',
};

/**
 * The error catalogue (CONTRACT §0): every stable `code` is named here once, with its status. Modules
 * throw `problems.sessionEnded()`, never a free string, so a code cannot drift or be spelled twice.
 */
export const problems = {
  // 400
  validation: (detail: string, errors: FieldError[]) =>
    new ProblemError(400, 'validation_failed', detail, errors),
  malformedJson: (detail: string) =>
    new ProblemError(400, 'malformed_json', detail, [{ path: '', message: 'body is not valid JSON' }]),
  badRequest: (detail = 'The request could not be processed.', status = 400) =>
    new ProblemError(status, 'bad_request', detail),
  uriTooLong: () =>
    new ProblemError(414, 'uri_too_long', 'A part of the request path is longer than this API accepts.'),
  headersTooLarge: () =>
    new ProblemError(431, 'headers_too_large', 'The request headers are larger than this server accepts.'),
  requestTimeout: () => new ProblemError(408, 'request_timeout', 'The request did not arrive in time.'),
  /** A rejected event batch: `code` is `validation_failed` or `unknown_event_type`. */
  eventBatchRejected: (
    code: 'validation_failed' | 'unknown_event_type',
    detail: string,
    errors: FieldError[],
  ) => new ProblemError(400, code, detail, errors),
  invalidImage: (detail: string, errors: FieldError[]) =>
    new ProblemError(400, 'invalid_image', detail, errors),
  // 401, 403, 404
  unauthorized: (detail = 'A valid bearer token is required.') =>
    new ProblemError(401, 'unauthorized', detail, undefined, undefined, { 'WWW-Authenticate': 'Bearer' }),
  invalidToken: () => unauthorized('The bearer token is invalid or expired.'),
  clientRevoked: () => unauthorized('The client of this token has been revoked.'),
  invalidCampaignSecret: () =>
    new ProblemError(401, 'invalid_campaign_secret', 'The campaign secret is not valid.'),
  forbidden: (detail: string) => new ProblemError(403, 'forbidden', detail),
  /** A valid token of a kind the route does not take (operator, tenant or device). */
  tokenNotAccepted: (kind: 'operator' | 'tenant' | 'device') =>
    new ProblemError(403, 'forbidden', TOKEN_NOT_ACCEPTED[kind]),
  missingScope: (needed: readonly string[]) =>
    new ProblemError(403, 'forbidden', `This route needs the scope "${needed.join('" or "')}".`),
  notFound: (what = 'resource') => new ProblemError(404, 'not_found', `No such ${what}.`),
  noRoute: (method: string, path: string) =>
    new ProblemError(404, 'not_found', `No route ${method} ${path}.`),
  entitlementNotFound: () =>
    new ProblemError(404, 'entitlement_not_found', 'No claim with this code exists in the campaign.'),
  // 409: state conflicts
  sessionEnded: () => conflict('session_ended', 'The session has ended.'),
  idempotencyKeyReused: () =>
    conflict(
      'idempotency_key_reused',
      'This Idempotency-Key was used for a different request to this session.',
    ),
  alreadyStreaming: () =>
    conflict('already_streaming', 'The session already has a stream (starting, streaming or stopping).'),
  notStreaming: () => conflict('not_streaming', 'The session is not streaming.'),
  alreadyRecording: () =>
    conflict(
      'already_recording',
      'The session is already recording (or a recording is starting or stopping).',
    ),
  notRecording: () => conflict('not_recording', 'The session is not recording.'),
  webhookDisabled: (toDo: string) =>
    conflict('webhook_disabled', `The webhook is disabled; enable it ${toDo}.`),
  challengeClaimed: (detail: string) => conflict('challenge_claimed', detail),
  campaignNotActive: () => conflict('campaign_not_active', 'The campaign of this challenge is not running.'),
  challengeNotComplete: (progress: { value: number; target: number }) =>
    conflict('challenge_not_complete', 'The challenge is not complete yet.', { progress }),
  rewardCodeTaken: (detail: string) => conflict('reward_code_taken', detail),
  /** A command no longer queued or delivered cannot be cancelled; `commandStatus` says what it came to. */
  commandSettled: (status: string) =>
    conflict(
      'command_settled',
      `The command is already ${status}; only a queued or delivered one can be cancelled.`,
      { commandStatus: status },
    ),
  /**
   * A per-tenant quota (docs/configuration.md, "Quotas") is used up: a state conflict (409), since
   * retrying does not help until something is deleted. `limit` is the quota.
   */
  quotaExceeded: (
    code:
      | 'webhook_endpoint_quota_exceeded'
      | 'campaign_quota_exceeded'
      | 'challenge_quota_exceeded'
      | 'alert_rule_quota_exceeded',
    what: string,
    limit: number,
  ) => conflict(code, `This tenant already has the most ${what} it may have (${limit}).`, { limit }),
  /** A cohort-wide command (CONTRACT §12) goes to at most `limit` live sessions; nothing was sent. */
  cohortTooLarge: (limit: number, live: string) =>
    conflict(
      'cohort_too_large',
      `The cohort has ${live} live sessions; a cohort-wide command goes to at most ${limit}. Nothing was sent.`,
      { limit },
    ),
  // 413, 415, 429, 5xx
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
  /**
   * The session already has `limit` unsettled commands (`LIVELINE_QUOTA_PENDING_COMMANDS`): 429, since
   * the queue drains by itself (the device answers, or commands expire); `Retry-After` is when its
   * oldest command expires at the latest.
   */
  commandQueueFull: (limit: number, retryAfterS: number) =>
    new ProblemError(
      429,
      'command_queue_full',
      `The session already has ${limit} commands waiting for the device; retry after ${retryAfterS} s or cancel one.`,
      undefined,
      { limit },
      { 'Retry-After': String(retryAfterS) },
    ),
  internal: () => new ProblemError(500, 'internal', 'An internal error occurred; it has been logged.'),
  unavailable: (detail: string) => new ProblemError(503, 'unavailable', detail),
  /**
   * Load shedding (CONTRACT §16): the event loop lags past LIVELINE_MAX_EVENT_LOOP_DELAY_MS, so the
   * request is refused at once rather than queued behind the backlog; `Retry-After` in seconds.
   */
  overloaded: (delayMs: number, retryAfterS: number) =>
    new ProblemError(
      503,
      'overloaded',
      `The server is overloaded (its event loop lags ${Math.round(delayMs)} ms); retry after ${retryAfterS} s.`,
      undefined,
      undefined,
      { 'Retry-After': String(retryAfterS) },
    ),
};

/** A 401 that tells the client to present a bearer token (RFC 6750). */
function unauthorized(detail: string) {
  return new ProblemError(401, 'unauthorized', detail, undefined, undefined, {
    'WWW-Authenticate': 'Bearer',
  });
}

function conflict(code: string, detail: string, extra?: Record<string, unknown>) {
  return new ProblemError(409, code, detail, undefined, extra);
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
