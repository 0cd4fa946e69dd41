/**
 * The event buffer in a directory, for Node (`@liveline/client/file-storage`; not in the main entry,
 * which stays free of `node:` imports for browsers).
 *
 * One append-only file of JSON lines, `events.jsonl`: `{"k","s","e"}` adds an event (key, session,
 * event), `{"d":[keys]}` removes events, `{"b":sessionId}` gives every event without a session that
 * one. Changes are queued in memory and appended every `writeIntervalMs` by one asynchronous write, so
 * tracking never waits on the disk. The file is compacted (the live events written to a temporary
 * file, renamed over it) when it is loaded and whenever removals outnumber the live events. A line cut
 * short by a crash is skipped when the file is read. One device instance per directory at a time.
 */
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { EventBufferStorage, StoredEvent } from './buffer-storage.ts';

export interface FileEventStorageOptions {
  /** Created if missing (mode 0700). */
  directory: string;
  /** How long changes wait in memory before they are appended. Default 200 ms. */
  writeIntervalMs?: number;
}

const FILE = 'events.jsonl';

type Line = { k: string; s: string | null; e: StoredEvent['event'] } | { d: string[] } | { b: string };

export function fileEventStorage(options: FileEventStorageOptions): EventBufferStorage {
  const path = join(options.directory, FILE);
  const interval = options.writeIntervalMs ?? 200;
  /** The live events, in order, as the storage believes the file holds them once written. */
  const live = new Map<string, StoredEvent>();
  let queued: string[] = [];
  /** Removals appended since the last compaction. */
  let removed = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** Writes run one after another on this chain. */
  let chain: Promise<void> = Promise.resolve();
  let failure: unknown = null;
  let closed = false;

  const enqueue = (line: Line) => {
    if (closed) return;
    queued.push(JSON.stringify(line));
    if (!timer) {
      timer = setTimeout(() => {
        timer = undefined;
        void write();
      }, interval);
      timer.unref?.();
    }
  };

  const append = async (text: string) => {
    const file = await open(path, 'a', 0o600);
    try {
      await file.appendFile(text);
    } finally {
      await file.close();
    }
  };

  const compact = async () => {
    const temporary = `${path}.tmp`;
    const lines = [...live.values()].map((stored) =>
      JSON.stringify({ k: stored.key, s: stored.sessionId, e: stored.event }),
    );
    // Removals from here on are the next compaction's (they are queued as lines after this snapshot).
    removed = 0;
    try {
      const file = await open(temporary, 'w', 0o600);
      try {
        await file.writeFile(lines.length > 0 ? `${lines.join('\n')}\n` : '');
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(temporary, path);
    } catch (error) {
      // The lines this snapshot replaced were not appended: the next write compacts again.
      removed = Number.MAX_SAFE_INTEGER;
      throw error;
    }
  };

  /** Appends what is queued (or compacts), on the chain; a failure is kept and thrown by flush(). */
  const write = () => {
    clearTimeout(timer);
    timer = undefined;
    chain = chain.then(async () => {
      // Taken when this write runs, not when it was asked for: a compaction before it has written
      // `live` with every change queued until then, and those lines must not be appended again.
      const text = queued.length > 0 ? `${queued.join('\n')}\n` : '';
      queued = [];
      try {
        if (removed > 1000 && removed > live.size) await compact();
        else if (text) await append(text);
      } catch (error) {
        failure = error;
      }
    });
    return chain;
  };

  /** A write that failed since the last call, thrown once (the device reports it as `storage_failed`). */
  const throwFailure = () => {
    if (!failure) return;
    const error = failure;
    failure = null;
    throw error;
  };

  return {
    async load() {
      await mkdir(options.directory, { recursive: true, mode: 0o700 });
      let text = '';
      try {
        text = await readFile(path, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
      for (const raw of text.split('\n')) {
        let line: Line;
        try {
          line = JSON.parse(raw) as Line;
        } catch {
          continue; // empty, or cut short by a crash
        }
        if ('k' in line) live.set(line.k, { key: line.k, sessionId: line.s, event: line.e });
        else if ('d' in line) for (const key of line.d) live.delete(key);
        else if ('b' in line) {
          for (const stored of live.values()) if (stored.sessionId === null) stored.sessionId = line.b;
        }
      }
      await compact();
      return [...live.values()].map((stored) => ({ ...stored }));
    },
    add(events) {
      for (const stored of events) {
        live.set(stored.key, { ...stored });
        enqueue({ k: stored.key, s: stored.sessionId, e: stored.event });
      }
    },
    remove(keys) {
      if (keys.length === 0) return;
      for (const key of keys) live.delete(key);
      removed += keys.length;
      enqueue({ d: [...keys] });
    },
    bindUnbound(sessionId) {
      for (const stored of live.values()) if (stored.sessionId === null) stored.sessionId = sessionId;
      enqueue({ b: sessionId });
    },
    async flush() {
      await write();
      throwFailure();
    },
    async close() {
      await write();
      closed = true;
      throwFailure();
    },
  };
}
