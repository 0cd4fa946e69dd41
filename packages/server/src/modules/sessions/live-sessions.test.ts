import { describe, expect, it } from 'vitest';
import { LiveSessions } from './live-sessions.ts';
import type { SessionRow } from './store.ts';

const row = (sessionId: string, status = 'live', tenantId = 't1'): SessionRow => ({
  session_id: sessionId,
  tenant_id: tenantId,
  player_id: 'p',
  tenant_cohort_id: null,
  device: '{}',
  status,
  started_at: 0,
  last_seen_at: 0,
  ended_at: null,
  end_reason: null,
});

/** A store of rows that counts its reads. */
function source(rows: SessionRow[]) {
  const byId = new Map(rows.map((r) => [r.session_id, r]));
  const reads: string[] = [];
  return {
    reads,
    byId,
    async findForTenant(tenantId: string, sessionId: string) {
      reads.push(sessionId);
      const r = byId.get(sessionId);
      return r && r.tenant_id === tenantId ? r : null;
    },
  };
}

describe('LiveSessions', () => {
  it('reads a live session once, then answers from memory until it is forgotten or too old', async () => {
    const store = source([row('a')]);
    let now = 1_000;
    const live = new LiveSessions(store, { now: () => now }, { maxAgeMs: 5_000, maxEntries: 10 });
    expect(await live.findForTenant('t1', 'a')).toMatchObject({ session_id: 'a' });
    expect(await live.findForTenant('t1', 'a')).toMatchObject({ session_id: 'a' });
    expect(store.reads).toEqual(['a']);
    // Another tenant never gets it from memory (nor from the store).
    expect(await live.findForTenant('t2', 'a')).toBeNull();
    expect(store.reads).toEqual(['a', 'a']);
    // The session ended: forgotten, read again, and not remembered while not live.
    store.byId.set('a', row('a', 'ended'));
    live.forget('a');
    expect(await live.findForTenant('t1', 'a')).toMatchObject({ status: 'ended' });
    expect(await live.findForTenant('t1', 'a')).toMatchObject({ status: 'ended' });
    expect(store.reads).toEqual(['a', 'a', 'a', 'a']);
    // A remembered row older than maxAgeMs is read again.
    store.byId.set('a', row('a'));
    await live.findForTenant('t1', 'a');
    now += 5_000;
    await live.findForTenant('t1', 'a');
    expect(store.reads).toHaveLength(6);
  });

  it('unknown sessions are not remembered; clear() forgets everything; the oldest goes when full', async () => {
    const store = source([row('a'), row('b'), row('c')]);
    const live = new LiveSessions(store, { now: () => 0 }, { maxAgeMs: 60_000, maxEntries: 2 });
    expect(await live.findForTenant('t1', 'x')).toBeNull();
    expect(await live.findForTenant('t1', 'x')).toBeNull();
    expect(store.reads).toEqual(['x', 'x']);
    await live.findForTenant('t1', 'a');
    await live.findForTenant('t1', 'b');
    await live.findForTenant('t1', 'c');
    expect(live.size).toBe(2);
    store.reads.length = 0;
    await live.findForTenant('t1', 'c');
    await live.findForTenant('t1', 'a');
    expect(store.reads).toEqual(['a']);
    live.clear();
    expect(live.size).toBe(0);
  });

  it('rows remembered together are read again at spread times, each within maxAgeMs', async () => {
    const ids = Array.from({ length: 200 }, (_, i) => `s${i}`);
    const store = source(ids.map((id) => row(id)));
    let now = 0;
    const live = new LiveSessions(store, { now: () => now }, { maxAgeMs: 10_000, maxEntries: 1_000 });
    for (const id of ids) await live.findForTenant('t1', id);
    const readAgainAt = async (t: number) => {
      now = t;
      store.reads.length = 0;
      for (const id of ids) await live.findForTenant('t1', id);
      return store.reads.length;
    };
    // Trusted for at least half of maxAgeMs...
    expect(await readAgainAt(4_999)).toBe(0);
    // ...then some, not all, are read again (each then trusted anew from that read)...
    const some = await readAgainAt(7_500);
    expect(some).toBeGreaterThan(0);
    expect(some).toBeLessThan(ids.length);
    // ...and every one first read at 0 and not since is read again by maxAgeMs.
    const rest = await readAgainAt(10_000);
    expect(rest).toBeGreaterThanOrEqual(ids.length - some);
  });
});
