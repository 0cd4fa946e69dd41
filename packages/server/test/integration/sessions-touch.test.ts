import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertSessions, sessionRow, touchEach } from '../../src/modules/sessions/store.ts';
import type { Storage } from '../../src/storage/index.ts';
import { type Backend, backends, freshStore, openFreshStore } from '../helpers/server.ts';

/**
 * An ingestion group records each session's contact at its own time in one statement (`touchEach`:
 * an update joined to a typed `values` list; on PostgreSQL the rows locked in id order first), and
 * never moves a session's lastSeenAt back; on both stores.
 */
describe.each(backends)('touching many sessions at once (%s)', (backend: Backend) => {
  const store = freshStore(backend);
  let storage: Storage;

  beforeAll(async () => {
    storage = await openFreshStore(backend, store);
    await storage.db.insertInto('tenants').values({ tenant_id: 't1', name: 't1', created_at: 0 }).execute();
  });
  afterAll(async () => {
    await storage?.close();
    await store.destroy();
  });

  const lastSeen = async (ids: string[]) => {
    const rows = await storage.db
      .selectFrom('sessions')
      .select(['session_id', 'last_seen_at'])
      .where('session_id', 'in', ids)
      .execute();
    return Object.fromEntries(
      ids.map((id) => [id, Number(rows.find((r) => r.session_id === id)?.last_seen_at)]),
    );
  };

  it('gives each session its own time, forward only, for any number of sessions', async () => {
    const rows = Array.from({ length: 1_203 }, (_, i) =>
      sessionRow({ tenantId: 't1', playerId: `p${i}`, tenantCohortId: null, device: {}, now: 5_000 }),
    );
    await insertSessions(storage.db, rows);
    const ids = rows.map((r) => r.session_id).sort();
    // Every third one earlier than its current lastSeenAt (stays), the others later, each different.
    const contacts = ids.map((id, i): [string, number] => [id, i % 3 === 0 ? 4_000 - i : 6_000 + i]);
    await storage.db.transaction().execute((trx) => touchEach(storage, trx, contacts));
    const seen = await lastSeen(ids);
    ids.forEach((id, i) => {
      expect(seen[id], id).toBe(i % 3 === 0 ? 5_000 : 6_000 + i);
    });
    // An unknown session changes nothing and fails nothing.
    await storage.db.transaction().execute((trx) => touchEach(storage, trx, [['nope', 9_000]]));
  });
});
