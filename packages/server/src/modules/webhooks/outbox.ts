import type { Kysely } from 'kysely';
import { uuidv7 } from '../../ids.ts';
import type { Outbox, OutboxMessage, OutboxType } from '../../outbox.ts';
import type { Database, Storage } from '../../storage/index.ts';
import { type EndpointCache, type EndpointFilter, endpointFilter, matches } from './endpoint-cache.ts';
import { FanoutWriter, messageHead } from './fanout-row.ts';
import { enabledEndpointFilters, type FanoutRow, insertDeliveries, insertFanout } from './store.ts';

/** `session.events`: a batch of `session.event` messages, for endpoints with `batch: true`. */
export type MessageType = OutboxType | 'webhook.test' | 'session.events';

/** The body of a message, exactly as sent and signed: `{type, timestamp (ISO 8601), data}`. */
export function messageBody(type: MessageType, occurredAtIso: string, dataJson: string): string {
  return `${messageHead(type, occurredAtIso)}${dataJson}}`;
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

/**
 * Most messages in one fan-out row: a big ingestion group is written as several rows, so one
 * expansion (a transaction of the dispatcher's) writes a bounded number of deliveries.
 */
export const FANOUT_CHUNK = 500;

/**
 * Most characters of events in one fan-out row (its `messages` text): a row closes at this size
 * even before `FANOUT_CHUNK` events. V8 puts a string over 128 KiB in memory of its own, mapped
 * and faulted in page by page when made and unmapped when collected; in this VM joining 500 messages
 * (135 KB) took 690 µs and 250 of them (67 KB) 11 µs — 11 % of the ingestion main thread with one
 * endpoint went to it.
 */
export const FANOUT_MAX_CHARS = 96 * 1024;

/** One tenant's share of an ingestion group (up to `FANOUT_CHUNK` messages), and who takes which. */
interface TenantFanout {
  row: FanoutWriter;
  /** `all` while the endpoint took every message so far. */
  targets: { filter: EndpointFilter; all: boolean; indexes: number[] }[];
}

const newFanout = (endpoints: EndpointFilter[]): TenantFanout => ({
  row: new FanoutWriter(),
  targets: endpoints.map((filter) => ({ filter, all: true, indexes: [] })),
});

function fanoutRow(tenantId: string, fan: TenantFanout, now: number): FanoutRow {
  const targets = fan.targets.filter((t) => t.indexes.length > 0);
  return {
    fanout_id: uuidv7(),
    tenant_id: tenantId,
    // The events' texts back to back and what each message adds (fanout-row.ts): no escaping, and no
    // message built, on the ingestion path.
    ...fan.row.finish(),
    // Most endpoints take every event: `null` says so without listing them.
    targets: JSON.stringify(targets.map((t) => [t.filter.webhookId, t.all ? null : t.indexes])),
    deliveries: targets.reduce((n, t) => n + t.indexes.length, 0),
    created_at: now,
  };
}

const wantsEvents = (e: EndpointFilter) => e.types === null || e.types.has('session.event');

/**
 * One event as the events module stored it, with its session's cohort: what a `session.event`
 * message is made of. The events module supplies it from its ingestion transaction.
 */
export interface StoredEvent {
  tenantId: string;
  /** The cohort of the event's session (null: none); it joins the stored event in the message's data. */
  tenantCohortId: string | null;
  eventType: string;
  /** When the server stored the event (unix ms): the message's `timestamp`. */
  receivedAt: number;
  /** The event's JSON object exactly as stored. */
  body: string;
}

/**
 * The transactional outbox (CONTRACT §6): one delivery row per matching enabled endpoint, written
 * in the caller's transaction. Endpoint lists come from the cache, so a tenant without webhooks
 * costs no query and no write.
 */
export class WebhookOutbox implements Outbox {
  /** The last endpoint lookup of each transaction. */
  private readonly looked = new WeakMap<
    Kysely<Database>,
    { asked: ReadonlySet<string>; wanted: Map<string, EndpointFilter[]> }
  >();

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
    await this.enqueueTo(trx, messages, endpoints);
  }

  /**
   * The webhooks module's own operational messages (`operational.ts`), in the transaction that
   * disabled or healed the endpoint. The recipients are read through `trx`, not the cache: an
   * endpoint this transaction has just disabled is no longer among them (the cache may still list
   * it), and these messages are rare enough for a query each.
   */
  async enqueueOperational(trx: Kysely<Database>, messages: OutboxMessage[]): Promise<void> {
    if (messages.length === 0) return;
    const endpoints = new Map<string, EndpointFilter[]>();
    for (const r of await enabledEndpointFilters(trx, [...new Set(messages.map((m) => m.tenantId))])) {
      const list = endpoints.get(r.tenant_id) ?? [];
      list.push(endpointFilter(r));
      endpoints.set(r.tenant_id, list);
    }
    await this.enqueueTo(trx, messages, endpoints);
  }

  private async enqueueTo(
    trx: Kysely<Database>,
    messages: OutboxMessage[],
    endpoints: Map<string, EndpointFilter[]>,
  ) {
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
   * Which of these tenants take `session.event` messages (an enabled endpoint whose filters allow
   * them). Only their events need to be passed to `recordStoredEvents`: the caller can skip building
   * the others (and looking up their cohorts). Costs a map lookup per tenant while the cache holds
   * them; reads through `trx` otherwise.
   */
  async tenantsTakingEvents(trx: Kysely<Database>, tenantIds: Iterable<string>): Promise<Set<string>> {
    return new Set((await this.eventEndpoints(trx, tenantIds)).keys());
  }

  /** The endpoints taking `session.event` of those tenants that have any. */
  private async eventEndpoints(trx: Kysely<Database>, tenantIds: Iterable<string>) {
    const ids = new Set(tenantIds);
    // `tenantsTakingEvents` then `recordStoredEvents` in one transaction read the endpoints once,
    // even when the cache keeps nothing (a TTL of 0).
    const seen = this.looked.get(trx);
    if (seen && [...ids].every((id) => seen.asked.has(id))) return seen.wanted;
    const wanted = new Map<string, EndpointFilter[]>();
    this.looked.set(trx, { asked: ids, wanted });
    // The hot path: every tenant in the cache, none with an endpoint for session events.
    let unknownOrWanted = false;
    for (const tenantId of ids) {
      const hit = this.cache.peek(tenantId);
      if (hit === undefined || hit.some(wantsEvents)) {
        unknownOrWanted = true;
        break;
      }
    }
    if (!unknownOrWanted) return wanted;
    for (const [tenantId, list] of await this.cache.get(trx, ids)) {
      const forEvents = list.filter(wantsEvents);
      if (forEvents.length > 0) wanted.set(tenantId, forEvents);
    }
    return wanted;
  }

  /**
   * The ingestion side of the outbox, called in the transaction that stores the events: a
   * `session.event` for every stored event whose tenant has a matching endpoint, its data the event
   * as stored plus the session's `tenantCohortId`. Written as one fan-out row per tenant of the
   * group (the messages, and the endpoints each goes to), not a delivery row per event and endpoint:
   * the dispatcher expands it into deliveries in a transaction of its own (`fanout.ts`).
   */
  async recordStoredEvents(trx: Kysely<Database>, events: readonly StoredEvent[]): Promise<void> {
    if (events.length === 0) return;
    const wanted = await this.eventEndpoints(
      trx,
      events.map((e) => e.tenantId),
    );
    if (wanted.size === 0) return;
    const now = this.now();
    const open = new Map<string, TenantFanout>();
    const rows: FanoutRow[] = [];
    for (const e of events) {
      const endpoints = wanted.get(e.tenantId);
      if (endpoints === undefined) continue;
      let fan = open.get(e.tenantId);
      if (fan === undefined) {
        fan = newFanout(endpoints);
        open.set(e.tenantId, fan);
      }
      const index = fan.row.count;
      let taken = false;
      for (const t of fan.targets) {
        if (matches(t.filter, 'session.event', e.eventType)) {
          t.indexes.push(index);
          taken = true;
        } else t.all = false;
      }
      if (!taken) continue;
      fan.row.add(e.eventType, e.body, [e.receivedAt, e.tenantCohortId]);
      if (fan.row.count >= FANOUT_CHUNK || fan.row.chars >= FANOUT_MAX_CHARS) {
        rows.push(fanoutRow(e.tenantId, fan, now));
        open.set(e.tenantId, newFanout(endpoints));
      }
    }
    for (const [tenantId, fan] of open) if (fan.row.count > 0) rows.push(fanoutRow(tenantId, fan, now));
    if (rows.length === 0) return;
    await insertFanout(this.storage, trx, rows);
    this.onEnqueued();
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
