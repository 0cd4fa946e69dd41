import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimDue, type DeliveryRow, type EndpointRow } from '../../src/modules/webhooks/store.ts';
import type { Storage } from '../../src/storage/index.ts';
import { type Backend, backends, freshStore, openFreshStore } from '../helpers/server.ts';

/**
 * The dispatcher's usual claim is one statement (`claimDue`, sent with the endpoints' rows as one
 * `Storage.atomically`): the oldest due rows, each endpoint's within its cap counting what the process
 * holds already, at most `free` of them, moved one lease ahead under the claim id. On both stores;
 * on PostgreSQL, rows another transaction holds are passed over, not waited for.
 */
describe.each(backends)('claiming due webhook deliveries (%s)', (backend: Backend) => {
  const store = freshStore(backend);
  let storage: Storage;

  beforeAll(async () => {
    storage = await openFreshStore(backend, store);
    await storage.db
      .insertInto('tenants')
      .values({ tenant_id: 'tenant-1', name: 't', created_at: 0 })
      .execute();
  });
  afterAll(async () => {
    await storage?.close();
    await store.destroy();
  });
  beforeEach(async () => {
    await storage.db.deleteFrom('webhook_deliveries').execute();
    await storage.db.deleteFrom('webhook_endpoints').execute();
    await storage.db
      .insertInto('webhook_endpoints')
      .values([endpoint('wh-a'), endpoint('wh-b')])
      .execute();
  });

  const NOW = 100_000;
  const LEASE_UNTIL = 160_000;

  const endpoint = (id: string): EndpointRow => ({
    webhook_id: id,
    tenant_id: 'tenant-1',
    url: `https://example.com/${id}`,
    description: null,
    event_types: null,
    types: null,
    enabled: 1,
    disabled_reason: null,
    secret: `whsec_${id}`,
    previous_secret: null,
    previous_secret_until: null,
    failing_since: null,
    outage_since: null,
    batch: 0,
    created_at: 1_000,
    updated_at: 1_000,
  });
  const delivery = (id: string, webhookId: string, over: Partial<DeliveryRow> = {}): DeliveryRow => ({
    delivery_id: id,
    webhook_id: webhookId,
    tenant_id: 'tenant-1',
    type: 'session.event',
    event_type: 'Custom',
    payload: '{}',
    status: 'pending',
    attempts: 0,
    next_attempt_at: 50_000,
    claim_id: null,
    created_at: 1_000,
    last_attempt_at: null,
    last_status_code: null,
    last_error: null,
    completed_at: null,
    ...over,
  });
  /** a-1…a-5 and b-1…b-3 due in the order a-1, b-1, a-2, b-2, a-3, b-3, a-4, a-5; and rows that are not due. */
  const seed = () =>
    storage.db
      .insertInto('webhook_deliveries')
      .values([
        ...[1, 2, 3, 4, 5].map((i) => delivery(`a-${i}`, 'wh-a', { next_attempt_at: 10_000 * i })),
        ...[1, 2, 3].map((i) => delivery(`b-${i}`, 'wh-b', { next_attempt_at: 10_000 * i + 5_000 })),
        delivery('a-later', 'wh-a', { next_attempt_at: NOW + 1 }),
        delivery('a-claimed', 'wh-a', { next_attempt_at: NOW + 30_000, claim_id: 'other-claim' }),
        delivery('a-done', 'wh-a', { status: 'delivered', next_attempt_at: 1_000, completed_at: 2_000 }),
      ])
      .execute();
  const claim = (claimId: string, over: { free?: number; cap?: number; held?: [string, number][] } = {}) =>
    claimDue(storage, {
      now: NOW,
      leaseUntil: LEASE_UNTIL,
      claimId,
      want: 256,
      free: over.free ?? 100,
      cap: over.cap ?? 100,
      held: over.held ?? [],
    });
  const ids = (rows: { delivery_id: string }[]) => rows.map((r) => r.delivery_id).sort();

  it('takes every due row, moves it one lease ahead under the claim id, and returns its endpoints', async () => {
    await seed();
    const { claimed, endpoints } = await claim('claim-1');
    expect(ids(claimed)).toEqual(['a-1', 'a-2', 'a-3', 'a-4', 'a-5', 'b-1', 'b-2', 'b-3']);
    for (const d of claimed) {
      expect(d).toMatchObject({ status: 'pending', claim_id: 'claim-1', next_attempt_at: LEASE_UNTIL });
      expect(d.payload).toBe('{}');
    }
    expect(endpoints.map((e) => e.webhook_id).sort()).toEqual(['wh-a', 'wh-b']);
    expect(endpoints.find((e) => e.webhook_id === 'wh-a')).toMatchObject({
      secret: 'whsec_wh-a',
      enabled: 1,
    });
    const stored = await storage.db
      .selectFrom('webhook_deliveries')
      .select(['delivery_id', 'claim_id', 'next_attempt_at'])
      .where('claim_id', '=', 'claim-1')
      .execute();
    expect(ids(stored)).toEqual(ids(claimed));
    // Nothing is due any more: a second claim takes nothing, and nothing of the first.
    expect((await claim('claim-2')).claimed).toEqual([]);
    expect((await claim('claim-2')).endpoints).toEqual([]);
  });

  it('keeps each endpoint within its cap, counting what is held already, and claims the oldest `free` rows', async () => {
    await seed();
    // wh-a holds 2 of its 3: one more of it (its oldest); wh-b, nothing held, two of its three.
    const capped = await claim('claim-1', { cap: 3, held: [['wh-a', 2]] });
    expect(ids(capped.claimed)).toEqual(['a-1', 'b-1', 'b-2', 'b-3']);
    // At its cap already: nothing of wh-a; of the rest, the oldest two in due order.
    const full = await claim('claim-2', { cap: 3, held: [['wh-a', 3]], free: 2 });
    expect(full.claimed).toEqual([]);
    const oldest = await claim('claim-3', { free: 2 });
    expect(ids(oldest.claimed)).toEqual(['a-2', 'a-3']);
    expect(oldest.endpoints.map((e) => e.webhook_id)).toEqual(['wh-a']);
  });

  it('where rows lock, passes over rows another transaction holds instead of waiting for it', async () => {
    if (!storage.skipLocked) return expect(backend).toBe('sqlite');
    await seed();
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked!: () => void;
    const holding = new Promise<void>((resolve) => {
      locked = resolve;
    });
    const other = storage.db.transaction().execute(async (trx) => {
      await trx
        .selectFrom('webhook_deliveries')
        .select('delivery_id')
        .where('delivery_id', 'in', ['a-1', 'b-1'])
        .forUpdate()
        .execute();
      locked();
      await released;
    });
    await holding;
    try {
      const { claimed } = await claim('claim-1');
      expect(ids(claimed)).toEqual(['a-2', 'a-3', 'a-4', 'a-5', 'b-2', 'b-3']);
    } finally {
      release();
      await other;
    }
    expect(ids((await claim('claim-2')).claimed)).toEqual(['a-1', 'b-1']);
  });
});
