import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AttemptResult,
  type DeliveryRow,
  lockDeliveries,
  settleAttempted,
} from '../../src/modules/webhooks/store.ts';
import type { Storage } from '../../src/storage/index.ts';
import { type Backend, backends, freshStore, openFreshStore } from '../helpers/server.ts';

/**
 * The dispatcher's results are written a few statements for any number of them (`settleAttempted`:
 * one update joined to a typed `values` list, one multi-row insert of attempts). Each delivery takes
 * its own values, lands only while its claim holds, and a delivered one keeps the due time its claim
 * gave it; on both stores, with the rows locked in id order where rows lock.
 */
describe.each(backends)('settling attempted webhook deliveries (%s)', (backend: Backend) => {
  const store = freshStore(backend);
  let storage: Storage;

  beforeAll(async () => {
    storage = await openFreshStore(backend, store);
  });
  afterAll(async () => {
    await storage?.close();
    await store.destroy();
  });

  const delivery = (id: string, claimId: string | null): DeliveryRow => ({
    delivery_id: id,
    webhook_id: 'wh-1',
    tenant_id: 'tenant-1',
    type: 'session.event',
    event_type: 'Custom',
    payload: '{}',
    status: 'pending',
    attempts: 2,
    next_attempt_at: 5_000,
    claim_id: claimId,
    created_at: 1_000,
    last_attempt_at: null,
    last_status_code: null,
    last_error: null,
    completed_at: null,
  });
  const result = (id: string, claimId: string, over: Partial<AttemptResult>): AttemptResult => ({
    attempt: {
      attempt_id: `attempt-${id}`,
      delivery_id: id,
      webhook_id: 'wh-1',
      attempted_at: 7_000,
      status_code: 204,
      latency_ms: 12,
      error: null,
    },
    claimId,
    status: 'delivered',
    attempts: 3,
    nextAttemptAt: null,
    completedAt: 8_000,
    ...over,
  });

  it('settles each delivery with its own values while its claim holds, and records every attempt', async () => {
    const db = storage.db;
    await db
      .insertInto('webhook_deliveries')
      .values([
        delivery('d-1', 'claim-a'),
        delivery('d-2', 'claim-a'),
        delivery('d-3', 'claim-a'),
        delivery('d-4', 'claim-new'), // claimed again since (a replay): the old claim's result is stale
      ])
      .execute();
    const failedAttempt = { status_code: null, error: 'timed out', latency_ms: 10_000 };
    await db.transaction().execute(async (trx) => {
      if (storage.skipLocked) await lockDeliveries(trx, storage.dialect, ['d-4', 'd-2', 'd-3', 'd-1']);
      await settleAttempted(trx, storage.dialect, [
        result('d-1', 'claim-a', {}),
        result('d-2', 'claim-a', {
          attempt: { ...result('d-2', '', {}).attempt, ...failedAttempt },
          status: 'pending',
          nextAttemptAt: 9_000,
          completedAt: null,
        }),
        result('d-3', 'claim-a', {
          attempt: { ...result('d-3', '', {}).attempt, status_code: 500, error: 'HTTP 500' },
          status: 'failed',
          attempts: 8,
          nextAttemptAt: 8_000,
        }),
        result('d-4', 'claim-a', {}),
      ]);
    });

    const rows = await db.selectFrom('webhook_deliveries').selectAll().orderBy('delivery_id').execute();
    const state = (r: DeliveryRow) => ({
      id: r.delivery_id,
      status: r.status,
      attempts: Number(r.attempts),
      next: Number(r.next_attempt_at),
      claim: r.claim_id,
      lastAt: r.last_attempt_at === null ? null : Number(r.last_attempt_at),
      code: r.last_status_code,
      error: r.last_error,
      completed: r.completed_at === null ? null : Number(r.completed_at),
    });
    expect(rows.map(state)).toEqual([
      {
        id: 'd-1',
        status: 'delivered',
        attempts: 3,
        next: 5_000,
        claim: null,
        lastAt: 7_000,
        code: 204,
        error: null,
        completed: 8_000,
      },
      {
        id: 'd-2',
        status: 'pending',
        attempts: 3,
        next: 9_000,
        claim: null,
        lastAt: 7_000,
        code: null,
        error: 'timed out',
        completed: null,
      },
      {
        id: 'd-3',
        status: 'failed',
        attempts: 8,
        next: 8_000,
        claim: null,
        lastAt: 7_000,
        code: 500,
        error: 'HTTP 500',
        completed: 8_000,
      },
      {
        id: 'd-4',
        status: 'pending',
        attempts: 2,
        next: 5_000,
        claim: 'claim-new',
        lastAt: null,
        code: null,
        error: null,
        completed: null,
      },
    ]);

    const attempts = await db.selectFrom('webhook_attempts').selectAll().orderBy('delivery_id').execute();
    expect(
      attempts.map((a) => [
        a.delivery_id,
        a.status_code,
        Number(a.latency_ms),
        a.error,
        Number(a.attempted_at),
      ]),
    ).toEqual([
      ['d-1', 204, 12, null, 7_000],
      ['d-2', null, 10_000, 'timed out', 7_000],
      ['d-3', 500, 12, 'HTTP 500', 7_000],
      ['d-4', 204, 12, null, 7_000],
    ]);
  });

  it('takes more results than one statement holds', async () => {
    const db = storage.db;
    const ids = Array.from({ length: 1_203 }, (_, i) => `m-${String(i).padStart(5, '0')}`);
    for (let i = 0; i < ids.length; i += 300)
      await db
        .insertInto('webhook_deliveries')
        .values(ids.slice(i, i + 300).map((id) => delivery(id, 'claim-m')))
        .execute();
    await db.transaction().execute(async (trx) => {
      if (storage.skipLocked) await lockDeliveries(trx, storage.dialect, ids);
      await settleAttempted(
        trx,
        storage.dialect,
        ids.map((id) => result(id, 'claim-m', {})),
      );
    });
    const settled = await db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('delivery_id', 'like', 'm-%')
      .where('status', '=', 'delivered')
      .where('claim_id', 'is', null)
      .executeTakeFirstOrThrow();
    expect(Number(settled.n)).toBe(ids.length);
    const recorded = await db
      .selectFrom('webhook_attempts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('delivery_id', 'like', 'm-%')
      .executeTakeFirstOrThrow();
    expect(Number(recorded.n)).toBe(ids.length);
  });
});
