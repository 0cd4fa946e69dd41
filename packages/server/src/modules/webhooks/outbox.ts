import type { Kysely } from 'kysely';
import { uuidv7 } from 'uuidv7';
import type { Outbox, OutboxMessage, OutboxType } from '../../outbox.ts';
import type { Database, Storage } from '../../storage/index.ts';
import type { EventRow } from '../events/index.ts';

interface StoredGroup {
  inserted: EventRow[];
  tenants: Map<string, string>;
}

import { type EndpointCache, type EndpointFilter, matches } from './endpoint-cache.ts';
import { insertDeliveries } from './store.ts';

export type MessageType = OutboxType | 'webhook.test';

/** The body of a message, exactly as sent and signed: `{type, timestamp (ISO 8601), data}`. */
export function messageBody(type: MessageType, occurredAtIso: string, dataJson: string): string {
  return `{"type":${JSON.stringify(type)},"timestamp":"${occurredAtIso}","data":${dataJson}}`;
}

/** One pending delivery's values, in DELIVERIES_TABLE's column order. */
export function deliveryValues(
  webhookId: string,
  tenantId: string,
  type: MessageType,
  eventType: string | null,
  payload: string,
  now: number,
): unknown[] {
  return [uuidv7(), webhookId, tenantId, type, eventType, payload, 'pending', 0, now, now];
}

const wantsEvents = (e: EndpointFilter) => e.types === null || e.types.has('session.event');

type CohortsOf = (db: Kysely<Database>, sessionIds: string[]) => Promise<Map<string, string | null>>;

/**
 * The transactional outbox (CONTRACT §6): one delivery row per matching enabled endpoint, written
 * in the caller's transaction. Endpoint lists come from the cache, so a tenant without webhooks
 * costs no query and no write.
 */
export class WebhookOutbox implements Outbox {
  constructor(
    private readonly storage: Storage,
    private readonly cache: EndpointCache,
    private readonly now: () => number,
    /** Called after rows were written; the dispatcher looks for them as soon as they can be committed. */
    private readonly onEnqueued: () => void,
  ) {}

  async enqueue(trx: Kysely<Database>, messages: OutboxMessage[]): Promise<void> {
    if (messages.length === 0) return;
    const endpoints = await this.cache.get(trx, new Set(messages.map((m) => m.tenantId)));
    const now = this.now();
    const values: unknown[][] = [];
    for (const m of messages) {
      const targets = (endpoints.get(m.tenantId) ?? []).filter((e) => matches(e, m.type, m.eventType));
      if (targets.length === 0) continue;
      const payload = messageBody(m.type, new Date(m.occurredAt).toISOString(), JSON.stringify(m.data));
      for (const e of targets) {
        values.push(deliveryValues(e.webhookId, m.tenantId, m.type, m.eventType ?? null, payload, now));
      }
    }
    await this.write(trx, values);
  }

  /**
   * The ingestion transaction hook: a `session.event` for every stored event, its data the event as
   * stored plus the session's `tenantCohortId`.
   */
  async onEventsStored(trx: Kysely<Database>, group: StoredGroup, cohortsOf: CohortsOf): Promise<void> {
    if (group.inserted.length === 0) return;
    // The hot path: every tenant of the group in the cache, none with an endpoint for session events.
    let unknownOrWanted = false;
    for (const tenantId of group.tenants.values()) {
      const hit = this.cache.peek(tenantId);
      if (hit === undefined || hit.some(wantsEvents)) {
        unknownOrWanted = true;
        break;
      }
    }
    if (!unknownOrWanted) return;
    const endpoints = await this.cache.get(trx, new Set(group.tenants.values()));
    const wanted = new Map<string, EndpointFilter[]>();
    for (const [tenantId, list] of endpoints) {
      const forEvents = list.filter(wantsEvents);
      if (forEvents.length > 0) wanted.set(tenantId, forEvents);
    }
    if (wanted.size === 0) return;

    const rows = group.inserted.filter((r) => wanted.has(group.tenants.get(r.session_id) ?? ''));
    if (rows.length === 0) return;
    const cohorts = await cohortsOf(trx, [...new Set(rows.map((r) => r.session_id))]);
    const now = this.now();
    const iso = new Map<number, string>();
    const values: unknown[][] = [];
    for (const r of rows) {
      const tenantId = group.tenants.get(r.session_id)!;
      const targets = wanted.get(tenantId)!.filter((e) => matches(e, 'session.event', r.event_type));
      if (targets.length === 0) continue;
      let at = iso.get(r.received_at);
      if (at === undefined) {
        at = new Date(r.received_at).toISOString();
        iso.set(r.received_at, at);
      }
      // `body` is the stored event's JSON object; the cohort joins it without a parse and re-serialise.
      const data = `${r.body.slice(0, -1)},"tenantCohortId":${JSON.stringify(cohorts.get(r.session_id) ?? null)}}`;
      const payload = messageBody('session.event', at, data);
      for (const e of targets) {
        values.push(deliveryValues(e.webhookId, tenantId, 'session.event', r.event_type, payload, now));
      }
    }
    await this.write(trx, values);
  }

  /** A `webhook.test` message for one endpoint, whatever its filters. */
  async enqueueTest(
    trx: Kysely<Database>,
    tenantId: string,
    webhookId: string,
    data: Record<string, unknown>,
  ) {
    const now = this.now();
    const values = deliveryValues(
      webhookId,
      tenantId,
      'webhook.test',
      null,
      messageBody('webhook.test', new Date(now).toISOString(), JSON.stringify(data)),
      now,
    );
    await this.write(trx, [values]);
    return String(values[0]);
  }

  private async write(trx: Kysely<Database>, values: unknown[][]) {
    if (values.length === 0) return;
    await insertDeliveries(this.storage, trx, values);
    this.onEnqueued();
  }
}
