import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { components } from './generated/api.ts';

export { WebhookVerificationError };

/** A stored event as `session.event` carries it: the event, its session and the session's cohort. */
export interface SessionEventData {
  id: string;
  sessionId: string;
  eventType: string;
  timestamp: number;
  tenantCohortId: string | null;
  streamingSessionId?: string;
  [field: string]: unknown;
}

/** An alert rule's message about one session (CONTRACT §13). */
export interface AlertData {
  alertId: string;
  name: string;
  /** The incident: the same in an incident's `alert.triggered` (again after a cooldown) and its `alert.resolved`. */
  incidentId: string;
  sessionId: string;
  playerId: string;
  tenantCohortId: string | null;
  /** The event that met the condition (triggered) or no longer met it (resolved); null when the session's end resolved it. */
  event: SessionEventData | null;
}

/**
 * `webhook.endpoint.disabled` (CONTRACT §16): another endpoint of the tenant was disabled, by the
 * server after nothing but failures (`failing`) or by a `PATCH {enabled: false}` (`manual`).
 * Operational types are opt-in: an endpoint gets them only when its `types` names them.
 */
export interface EndpointDisabledData {
  webhookId: string;
  url: string;
  reason: 'failing' | 'manual';
  /** Unix ms. */
  disabledAt: number;
}

/**
 * `webhook.endpoint.recovered`: an endpoint answered 2xx again after an outage (a retry failed too,
 * or it was disabled for failing). Sent to the recovered endpoint as well.
 */
export interface EndpointRecoveredData {
  webhookId: string;
  url: string;
  /** Unix ms: when the outage's first failure was recorded. */
  failingSince: number;
  /** Unix ms. */
  recoveredAt: number;
}

/** What liveline sends: `{type, timestamp (ISO 8601), data}` (CONTRACT §6). */
export type WebhookMessage =
  | { type: 'session.event'; timestamp: string; data: SessionEventData }
  | { type: 'reward.claimed'; timestamp: string; data: Record<string, unknown> }
  | { type: 'reward.verified'; timestamp: string; data: Record<string, unknown> }
  | { type: 'alert.triggered'; timestamp: string; data: AlertData & { event: SessionEventData } }
  | {
      type: 'alert.resolved';
      timestamp: string;
      data: AlertData & { reason: 'condition_cleared' | 'session_ended' };
    }
  | { type: 'webhook.endpoint.disabled'; timestamp: string; data: EndpointDisabledData }
  | { type: 'webhook.endpoint.recovered'; timestamp: string; data: EndpointRecoveredData }
  | { type: 'webhook.test'; timestamp: string; data: { webhookId: string; message: string } }
  /** A player's data was erased (CONTRACT §16): everything of theirs is gone within 60 s of `erasedAt`. */
  | { type: 'player.erased'; timestamp: string; data: { playerId: string; erasedAt: number } };

export type WebhookType = WebhookMessage['type'];

/** A webhook endpoint as the tenant API returns it. */
export type WebhookEndpoint = components['schemas']['Webhook'];

/** Headers as Node's `req.headers`, a fetch `Headers`, or a plain record. */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

function plainHeaders(headers: HeadersLike): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof Headers !== 'undefined' && headers instanceof Headers) {
    headers.forEach((value, key) => {
      out[key.toLowerCase()] = value;
    });
    return out;
  }
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[key.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/**
 * Verifies a liveline webhook (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature`) and returns its message. `body` must be the raw request body, exactly as
 * received. Pass several secrets while you roll one (either may match). Throws
 * `WebhookVerificationError` when no signature matches or the timestamp is more than 5 minutes
 * off (a replayed or stale request).
 */
export function verifyWebhook(
  body: string | Buffer | Uint8Array,
  headers: HeadersLike,
  secret: string | readonly string[],
): WebhookMessage {
  const payload = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
  const plain = plainHeaders(headers);
  const secrets = typeof secret === 'string' ? [secret] : secret;
  if (secrets.length === 0) throw new TypeError('verifyWebhook needs at least one secret');
  let last: unknown;
  for (const s of secrets) {
    try {
      return new Webhook(s).verify(payload, plain) as WebhookMessage;
    } catch (err) {
      last = err;
      // A stale timestamp or missing headers fail the same way for every secret.
      if (!(err instanceof WebhookVerificationError) || err.message !== 'No matching signature found')
        throw err;
    }
  }
  throw last;
}
