import type { OutboxMessage } from '../../outbox.ts';

/**
 * Operational webhooks (CONTRACT §16): messages about the tenant's own endpoints. They are opt-in:
 * an endpoint gets them only when its `types` names them (`endpoint-cache.ts` `matches`), never
 * through "no filter", so endpoints registered before these types existed see nothing new.
 */
export const OPERATIONAL_TYPES = ['webhook.endpoint.disabled', 'webhook.endpoint.recovered'] as const;
export type OperationalType = (typeof OPERATIONAL_TYPES)[number];

const operational: ReadonlySet<string> = new Set(OPERATIONAL_TYPES);
export const isOperational = (type: string): type is OperationalType => operational.has(type);

/** The endpoint an operational message is about. */
export interface EndpointRef {
  tenantId: string;
  webhookId: string;
  url: string;
}

/**
 * `webhook.endpoint.disabled`: the server disabled the endpoint (`failing`) or the tenant did
 * (`manual`). Written in the transaction that disables it, which no longer counts the endpoint among
 * the enabled ones, so it goes to the tenant's other endpoints only.
 */
export function endpointDisabled(e: EndpointRef, reason: 'failing' | 'manual', at: number): OutboxMessage {
  return {
    tenantId: e.tenantId,
    type: 'webhook.endpoint.disabled',
    data: { webhookId: e.webhookId, url: e.url, reason, disabledAt: at },
    occurredAt: at,
  };
}

/**
 * `webhook.endpoint.recovered`: the first 2xx after an outage (`outage_since`: a failing run in
 * which a retry failed too, or which disabled the endpoint). Goes to the endpoint itself as well.
 */
export function endpointRecovered(e: EndpointRef, failingSince: number, at: number): OutboxMessage {
  return {
    tenantId: e.tenantId,
    type: 'webhook.endpoint.recovered',
    data: { webhookId: e.webhookId, url: e.url, failingSince, recoveredAt: at },
    occurredAt: at,
  };
}
