import type { Kysely } from 'kysely';
import type { Database } from './storage/index.ts';

/** The webhook message types of CONTRACT §6 (and §13's alerts, §16's `player.erased` and operational ones). */
export type OutboxType =
  | 'session.event'
  | 'reward.claimed'
  | 'reward.verified'
  | 'alert.triggered'
  | 'alert.resolved'
  | 'player.erased'
  // Written by the webhooks module itself, about the tenant's endpoints (opt-in: `types` names them).
  | 'webhook.endpoint.disabled'
  | 'webhook.endpoint.recovered';

export interface OutboxMessage {
  tenantId: string;
  type: OutboxType;
  /** For `session.event`: the event's type, which endpoint filters (`eventTypes`) match on. */
  eventType?: string;
  data: Record<string, unknown>;
  occurredAt: number;
}

/**
 * The transactional outbox (ARCHITECTURE): a module that reports a fact to webhooks writes the
 * message inside the transaction that stores the fact, so both are committed or neither.
 * The webhooks module provides it; it writes one delivery row per matching endpoint.
 */
export interface Outbox {
  enqueue(trx: Kysely<Database>, messages: OutboxMessage[]): Promise<void>;
}
