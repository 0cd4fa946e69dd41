/**
 * Where the event buffer is kept between runs of the app (`LivelineDeviceOptions.storage`).
 *
 * The pipeline's in-memory buffer stays the truth while the app runs; a storage is a write-behind
 * copy of it that the next run reads back. The pipeline tells it what changed with calls that return
 * at once (the frame loop never waits on a disk), and the storage writes them in batches. What it
 * holds after a crash is what it had written: at most its last write interval of changes is lost.
 * Without a storage (the default) the buffer lives in memory only.
 */
import type { StampedEvent } from './events.ts';

/** One buffered event as stored. */
export interface StoredEvent {
  /** Unique within the storage; assigned by the pipeline. */
  key: string;
  /**
   * The session the event goes to: the one current when it was tracked (or the next one started,
   * for an event tracked without a session). Null until then.
   */
  sessionId: string | null;
  event: StampedEvent;
}

export interface EventBufferStorage {
  /** What the previous run left, oldest first. Called once, before any other call. */
  load(): Promise<StoredEvent[]>;
  /** Events entered the buffer (appended, newest last). */
  add(events: readonly StoredEvent[]): void;
  /** Events left the buffer (sent, refused or dropped). */
  remove(keys: readonly string[]): void;
  /** Every event still without a session goes to `sessionId` (a session started). */
  bindUnbound(sessionId: string): void;
  /** Resolves once every change so far is written. */
  flush(): Promise<void>;
  /** Writes what is left and releases the storage (`device.close()`). */
  close(): Promise<void>;
}

/** A key unique across runs: the run's random prefix and a counter. */
export function keyMaker(): () => string {
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 36 ** 4).toString(36)}`;
  let next = 0;
  return () => `${run}.${(next++).toString(36)}`;
}

/**
 * A thin IndexedDB storage for browsers (one object store keyed by `key`, in insertion order through
 * an auto-increment index). Each change is its own transaction, queued by IndexedDB itself off the
 * frame loop. Open it with a database name per device/player.
 */
export function indexedDbEventStorage(options: { name: string; indexedDB?: IDBFactory }): EventBufferStorage {
  const factory = options.indexedDB ?? globalThis.indexedDB;
  if (!factory) throw new Error('IndexedDB is not available here');
  let db: IDBDatabase | null = null;
  let pending: Promise<unknown> = Promise.resolve();
  /** Insertion order across runs (keys are not ordered). */
  let order = 0;
  const done = (tx: IDBTransaction) =>
    new Promise<void>((resolve, reject) => {
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  const write = (work: (store: IDBObjectStore) => void) => {
    if (!db) return;
    const tx = db.transaction('events', 'readwrite');
    work(tx.objectStore('events'));
    // A failed write loses that change (as a crash would); it must not stop the next ones.
    pending = Promise.all([pending, done(tx).catch(() => undefined)]);
  };
  return {
    async load() {
      db = await new Promise<IDBDatabase>((resolve, reject) => {
        const request = factory.open(options.name, 1);
        request.onupgradeneeded = () => {
          const store = request.result.createObjectStore('events', { keyPath: 'key' });
          store.createIndex('order', 'order');
        };
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
      const tx = db.transaction('events', 'readonly');
      const all = tx.objectStore('events').index('order').getAll();
      const rows = await new Promise<(StoredEvent & { order: number })[]>((resolve, reject) => {
        all.onsuccess = () => resolve(all.result);
        all.onerror = () => reject(all.error);
      });
      order = rows.length > 0 ? rows[rows.length - 1].order + 1 : 0;
      return rows.map(({ key, sessionId, event }) => ({ key, sessionId, event }));
    },
    add(events) {
      write((store) => {
        for (const stored of events) store.put({ ...stored, order: order++ });
      });
    },
    remove(keys) {
      write((store) => {
        for (const key of keys) store.delete(key);
      });
    },
    bindUnbound(sessionId) {
      write((store) => {
        const cursor = store.openCursor();
        cursor.onsuccess = () => {
          const at = cursor.result;
          if (!at) return;
          if (at.value.sessionId === null) at.update({ ...at.value, sessionId });
          at.continue();
        };
      });
    },
    async flush() {
      await pending;
    },
    async close() {
      await pending;
      db?.close();
      db = null;
    },
  };
}
