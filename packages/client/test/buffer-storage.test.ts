/**
 * The event buffer kept in a directory (`fileEventStorage`) across "restarts" (a new device on the
 * same directory), and the buffer's bounds with `on('dropped')`. Against the fake server; the real
 * server's exactly-once is in packages/server/test/integration/client-buffer.test.ts.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { fileEventStorage } from '../src/file-storage.ts';
import type { DroppedEvents } from '../src/index.ts';
import { fakeLivelineFixture } from './fake-liveline.ts';

const fx = fakeLivelineFixture();
let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), 'liveline-buffer-'));
  // Removed after every afterEach hook, the fixture's included: a device left open by a test is closed
  // (and has written its last) first. An afterEach here would run before the fixture's (vitest runs
  // "after" hooks in reverse order) and race the device's writes into the directory (ENOTEMPTY).
  const dir = directory;
  return () => rm(dir, { recursive: true, force: true });
});

async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const custom = (label: string) => ({ eventType: 'Custom', custom01: label }) as const;
const file = () => readFile(join(directory, 'events.jsonl'), 'utf8').catch(() => '');
const storage = () => fileEventStorage({ directory, writeIntervalMs: 20 });

describe('fileEventStorage', () => {
  it('resends after a restart what the previous run left, to its session, with the same ids', async () => {
    const first = fx.device({ storage: storage() });
    const { sessionId } = await first.startSession();
    await first.flush();
    const sent = first.track(custom('sent'));
    await first.flush();
    await fx.fake.stop();
    const left = ['a', 'b', 'c'].map((label) => first.track(custom(label)));
    // Written in the background: the file has the three events (and the sent one, added then removed).
    await waitFor(async () => (await file()).includes(left[2].id));
    await first.close(); // the process dies: nothing more is sent

    await fx.fake.restart();
    const second = fx.device({ storage: storage() });
    expect(second.session).toBeNull();
    await second.flush(); // no session of its own: the leftovers go to the session they were tracked in
    expect(fx.fake.storedIds(sessionId)).toEqual([sent.id, ...left.map((event) => event.id)]);
    expect(second.stats()).toMatchObject({ sent: 3, buffered: 0 });
    await second.close();
    const third = fx.device({ storage: storage() });
    await third.flush();
    expect(third.stats()).toMatchObject({ sent: 0, buffered: 0 });
    expect(await file()).toBe(''); // compacted on load: nothing left to resend
  });

  it('gives events tracked without a session to the next session started, after a restart too', async () => {
    const first = fx.device({ storage: storage() });
    const early = first.track(custom('before-any-session'));
    await first.close(); // close() writes what was queued

    const second = fx.device({ storage: storage() });
    expect(second.pendingEvents()).toEqual([]); // still loading
    await expect(second.flush()).rejects.toMatchObject({ code: 'no_session' });
    expect(second.pendingEvents()).toEqual([early]);
    const { sessionId } = await second.startSession();
    await second.flush();
    expect(fx.fake.storedIds(sessionId)).toEqual([early.id]);
  });

  it('skips a line cut short by a crash and keeps the order of runs', async () => {
    const first = fx.device({ storage: storage() });
    await first.startSession();
    await fx.fake.stop();
    const older = first.track(custom('older'));
    await first.close();
    await writeFile(join(directory, 'events.jsonl'), `${await file()}{"k":"half`, 'utf8');

    await fx.fake.restart();
    const second = fx.device({ storage: storage() });
    const newer = second.track(custom('newer')); // tracked while the leftovers load: sent after them
    const { sessionId } = await second.startSession();
    await second.flush();
    expect(fx.fake.batches()).toEqual([[older.id], [newer.id]]);
    expect(fx.fake.storedIds(sessionId)).toEqual([newer.id]);
  });

  it('writes each event once when events arrive while a compaction is waiting to run', async () => {
    const store = storage();
    await store.load();
    const stored = (key: string) => ({
      key,
      sessionId: 's',
      event: { id: key, eventType: 'Custom', timestamp: 1, custom01: key } as never,
    });
    const first = Array.from({ length: 1200 }, (_, i) => stored(`a${i}`));
    store.add(first);
    store.remove(first.map((e) => e.key));
    const compacting = store.flush(); // compacts: 1,200 removals, nothing live
    const later = Array.from({ length: 600 }, (_, i) => stored(`b${i}`));
    store.add(later); // queued before the compaction has run
    await Promise.all([compacting, store.flush()]);
    const keys = (await file())
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { k: string }).k);
    expect(keys).toEqual(later.map((e) => e.key)); // each once (each twice when appended after the snapshot)
    await store.close();
  });

  it('compacts the file once removals outnumber the live events', async () => {
    const d = fx.device({ storage: storage(), batchSize: 1000 });
    await d.startSession();
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 600; i++) d.track(custom(`${round}-${i}`));
      await d.flush();
    }
    const last = d.track(custom('last'));
    await d.close();
    const lines = (await file()).trim().split('\n');
    expect(lines.length).toBeLessThan(1000); // 1,801 adds and 3 removal lines without compaction
    const second = fx.device({ storage: storage() });
    await second.flush();
    expect(second.stats().sent).toBe(1);
    expect(fx.fake.batches().at(-1)).toEqual([last.id]);
  });
});

describe('a storage that fails', () => {
  it('reports what it cannot read or write as storage_failed, and keeps the buffer in memory', async () => {
    const notADirectory = join(directory, 'file');
    await writeFile(notADirectory, 'x');
    const d = fx.device({ storage: fileEventStorage({ directory: notADirectory }) });
    const codes: string[] = [];
    d.on('error', ({ error }) => codes.push(error.code));
    const { sessionId } = await d.startSession();
    const event = d.track(custom('kept in memory'));
    await d.flush();
    expect(fx.fake.storedIds(sessionId)).toEqual([event.id]);
    await d.close();
    // The load failed (ENOTDIR), and so did every write, reported once at close().
    expect(codes).toEqual(['storage_failed', 'storage_failed']);
  });
});

describe('bounds and the drop policy', () => {
  it('drops the oldest events past maxBufferedBytes and reports them through on("dropped")', async () => {
    const dropped: DroppedEvents[] = [];
    const d = fx.device({ maxBufferedBytes: 350 });
    d.on('dropped', (event) => dropped.push(event));
    const events = ['1', '2', '3', '4', '5'].map((label) => d.track(custom(label.repeat(60))));
    const size = JSON.stringify(events[0]).length; // ~166 characters: two fit, not three
    expect(size * 2).toBeLessThanOrEqual(350);
    expect(size * 3).toBeGreaterThan(350);
    expect(d.pendingEvents()).toEqual(events.slice(3));
    expect(dropped).toEqual([1, 2, 3].map((i) => ({ events: [events[i - 1]], reason: 'maxBufferedBytes' })));
    expect(d.stats()).toMatchObject({ dropped: 3, buffered: 2 });
  });

  it('reports maxBufferedEvents drops, and the storage forgets them', async () => {
    const reasons: string[] = [];
    const d = fx.device({ maxBufferedEvents: 2, batchSize: 2, storage: storage() });
    d.on('dropped', (event) => reasons.push(event.reason));
    const events = ['a', 'b', 'c'].map((label) => d.track(custom(label)));
    await d.close();
    expect(reasons).toEqual(['maxBufferedEvents']);
    const second = fx.device({ storage: storage() });
    await expect(second.flush()).rejects.toMatchObject({ code: 'no_session' });
    expect(second.pendingEvents()).toEqual(events.slice(1));
  });
});
