import type { Kysely } from 'kysely';
import { uuidv7 } from '../../ids.ts';
import type { Database, Storage } from '../../storage/index.ts';
import { messagesOf } from './fanout-row.ts';
import { deliveryValues } from './outbox.ts';
import * as store from './store.ts';

/** Most `session.event` messages in one batch delivery (an endpoint with `batch: true`). */
export const MAX_BATCH = 100;
/**
 * Messages one expansion aims at: it takes as many fan-out rows as held about this many at the last
 * expansion (`rowsToTake`; each row holds up to `FANOUT_CHUNK` events of one group and tenant: a few
 * hundred from a big ingestion group, a handful from a small one). The dispatcher expands again only
 * once it has claimed every due delivery, so the deliveries table holds about what is being sent,
 * and the events wait in their fan-out rows.
 */
const MESSAGES_PER_EXPANSION = 512;
const MAX_ROWS_PER_EXPANSION = 32;
/** Rows the first expansion takes, before any size is known. */
export const FIRST_EXPANSION_ROWS = 2;

/** How many fan-out rows the next expansion takes, from the rows and messages of the last one. */
export function rowsToTake(last: { rows: number; messages: number }, previous: number): number {
  if (last.rows === 0 || last.messages === 0) return previous;
  const perRow = last.messages / last.rows;
  return Math.max(1, Math.min(MAX_ROWS_PER_EXPANSION, Math.round(MESSAGES_PER_EXPANSION / perRow)));
}

/**
 * A batch delivery's body: `{"type":"session.events","timestamp":…,"data":{"events":[…]}}`, each
 * element the `session.event` message exactly as it would have been sent alone.
 */
export function batchBody(timestampIso: string, messages: readonly string[]): string {
  return `{"type":"session.events","timestamp":"${timestampIso}","data":{"events":[${messages.join(',')}]}}`;
}

interface Pending {
  /** `[eventType, body]` of each message, in ingestion order. */
  messages: [string, string][];
  createdAt: number;
}

/**
 * Expands the oldest fan-out rows into deliveries, in the caller's transaction: the rows are deleted
 * and their deliveries written together, or neither (a process that dies in between leaves the rows
 * for the next expansion). Each endpoint gets one delivery per message (its own webhook-id, attempts
 * and retries, as if written at ingestion), or, with `batch`, one per `MAX_BATCH` messages. An
 * endpoint deleted meanwhile gets nothing; one disabled meanwhile gets its deliveries failed (as if
 * they had been pending when it was disabled: replay resends them). Takes `limit` rows at most;
 * returns the deliveries written, whether rows may remain, and the rows and messages taken.
 */
export async function expandFanout(
  storage: Storage,
  trx: Kysely<Database>,
  now: number,
  limit: number,
): Promise<{ written: number; more: boolean; rows: number; messages: number }> {
  const rows = await store.takeFanout(trx, { limit, lock: storage.skipLocked });
  if (rows.length === 0) return { written: 0, more: false, rows: 0, messages: 0 };
  // Per endpoint, its messages in row (ingestion) order.
  const perEndpoint = new Map<string, Pending[]>();
  let count = 0;
  for (const row of rows) {
    const messages = messagesOf(row);
    count += messages.length;
    for (const [webhookId, indexes] of JSON.parse(row.targets) as [string, number[] | null][]) {
      const list = perEndpoint.get(webhookId) ?? [];
      list.push({
        messages: indexes === null ? messages : indexes.map((i) => messages[i]),
        createdAt: row.created_at,
      });
      perEndpoint.set(webhookId, list);
    }
  }
  const endpoints = new Map(
    (await store.endpointsByIds(trx, [...perEndpoint.keys()])).map((e) => [e.webhook_id, e]),
  );
  const pending: unknown[][] = [];
  const failed: store.DeliveryRow[] = [];
  const iso = new Date(now).toISOString();
  for (const [webhookId, parts] of [...perEndpoint].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const endpoint = endpoints.get(webhookId);
    if (!endpoint) continue;
    const add = (
      type: 'session.event' | 'session.events',
      eventType: string | null,
      payload: string,
      createdAt: number,
    ) => {
      if (endpoint.enabled === 1) {
        pending.push(deliveryValues(webhookId, endpoint.tenant_id, type, eventType, payload, createdAt));
        return;
      }
      failed.push({
        delivery_id: uuidv7(),
        webhook_id: webhookId,
        tenant_id: endpoint.tenant_id,
        type,
        event_type: eventType,
        payload,
        status: 'failed',
        attempts: 0,
        next_attempt_at: now,
        claim_id: null,
        created_at: createdAt,
        last_attempt_at: null,
        last_status_code: null,
        last_error: 'endpoint disabled',
        completed_at: now,
      });
    };
    if (endpoint.batch === 1) {
      const all = parts.flatMap((p) => p.messages.map((m) => m[1]));
      for (let i = 0; i < all.length; i += MAX_BATCH) {
        add('session.events', null, batchBody(iso, all.slice(i, i + MAX_BATCH)), parts[0].createdAt);
      }
    } else {
      for (const part of parts) {
        for (const [eventType, body] of part.messages) add('session.event', eventType, body, part.createdAt);
      }
    }
  }
  await store.insertDeliveries(storage, trx, pending);
  await store.insertFailedDeliveries(trx, failed);
  return { written: pending.length, more: rows.length === limit, rows: rows.length, messages: count };
}
