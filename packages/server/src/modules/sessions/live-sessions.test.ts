import { describe, expect, it } from 'vitest';
import { LiveSessions, type LiveSessionsOptions } from './live-sessions.ts';
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
  const checks: string[][] = [];
  /** While set, reads wait for it. */
  let gate: Promise<void> | null = null;
  return {
    reads,
    checks,
    byId,
    /** Holds the reads that begin from now until `open()`. */
    hold() {
      let open = () => {};
      gate = new Promise((resolve) => (open = resolve));
      return {
        open: () => {
          gate = null;
          open();
        },
      };
    },
    async findForTenant(tenantId: string, sessionId: string) {
      reads.push(sessionId);
      const r = byId.get(sessionId);
      if (gate) await gate;
      return r && r.tenant_id === tenantId ? r : null;
    },
    async stillLive(sessionIds: readonly string[]) {
      checks.push([...sessionIds]);
      const live = new Set(sessionIds.filter((id) => byId.get(id)?.status === 'live'));
      if (gate) await gate;
      return live;
    },
  };
}

/** A cache over `store` (trusting rows 10 s, 100 of them, checked 500 at a time unless told). */
const cache = (
  store: ReturnType<typeof source>,
  now: () => number,
  options: Partial<LiveSessionsOptions> = {},
) => new LiveSessions(store, { now }, { maxAgeMs: 10_000, maxEntries: 100, checkChunk: 500, ...options });

describe('LiveSessions', () => {
  it('reads a live session once, then answers from memory until it is forgotten or too old', async () => {
    const store = source([row('a')]);
    let now = 1_000;
    const live = cache(store, () => now, { maxAgeMs: 5_000, maxEntries: 10 });
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
    const live = cache(store, () => 0, { maxAgeMs: 60_000, maxEntries: 2 });
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

  it('check() reads again, together, the rows in use that are half maxAgeMs old, and forgets the rest', async () => {
    const ids = Array.from({ length: 7 }, (_, i) => `s${i}`);
    const store = source(ids.map((id) => row(id)));
    let now = 0;
    const live = cache(store, () => now, { checkChunk: 3 });
    for (const id of ids) await live.findForTenant('t1', id);
    expect(live.checkEveryMs).toBe(2_500);
    // Too young: nothing is read.
    now = 4_999;
    await live.findForTenant('t1', 's0');
    expect(await live.check()).toBe(0);
    expect(store.checks).toEqual([]);
    // s0–s4 are in use, s5 and s6 are not; s4 ended (the bus lost its message), s3 was erased.
    now = 5_000;
    for (const id of ids.slice(0, 5)) await live.findForTenant('t1', id);
    store.byId.set('s4', row('s4', 'ended'));
    store.byId.delete('s3');
    store.reads.length = 0;
    expect(await live.check()).toBe(5);
    // In chunks of at most checkChunk sessions; the unused ones are not read but forgotten.
    expect(store.checks).toEqual([
      ['s0', 's1', 's2'],
      ['s3', 's4'],
    ]);
    expect(live.size).toBe(3);
    // The rows still live are trusted anew from the check: no read on use until maxAgeMs after it...
    now = 14_999;
    for (const id of ['s0', 's1', 's2']) await live.findForTenant('t1', id);
    expect(store.reads).toEqual([]);
    // ...and the ended, erased and unused ones are read on their next use.
    for (const id of ['s3', 's4', 's5', 's6']) await live.findForTenant('t1', id);
    expect(store.reads).toEqual(['s3', 's4', 's5', 's6']);
  });

  it('a row in use and never checked is read again on use after maxAgeMs (the safety net)', async () => {
    const store = source([row('a')]);
    let now = 0;
    const live = cache(store, () => now);
    await live.findForTenant('t1', 'a');
    now = 9_999;
    await live.findForTenant('t1', 'a');
    expect(store.reads).toEqual(['a']);
    now = 10_000;
    await live.findForTenant('t1', 'a');
    expect(store.reads).toEqual(['a', 'a']);
  });

  it('a row read while a session was forgotten is not remembered, nor kept by a check under way', async () => {
    const store = source([row('a'), row('b')]);
    let now = 0;
    const live = cache(store, () => now);
    // A read that began before the session ended and was forgotten: its (live) row is not kept.
    const gate = store.hold();
    const reading = live.findForTenant('t1', 'a');
    live.forget('a');
    gate.open();
    expect(await reading).toMatchObject({ status: 'live' });
    await live.findForTenant('t1', 'a');
    expect(store.reads).toEqual(['a', 'a']);
    // A session that ends while a check reads it stays forgotten, though the check read it live.
    await live.findForTenant('t1', 'b');
    now = 5_000;
    await live.findForTenant('t1', 'b');
    const held = store.hold();
    const checking = live.check();
    live.forget('b');
    held.open();
    expect(await checking).toBe(1);
    store.reads.length = 0;
    await live.findForTenant('t1', 'b');
    expect(store.reads).toEqual(['b']);
  });
});
