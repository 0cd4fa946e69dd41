import type { FastifyBaseLogger } from 'fastify';
import type { PresenceChange } from '../../bus/index.ts';
import type { Clock } from '../../clock.ts';
import type { TenantPrincipal } from '../auth/index.ts';
import { compareCursors, encodeTailCursor, sameCursor, type TailCursor } from './cursor.ts';
import type { TailRow, TailScope, TailStore } from './store.ts';

/** A presence change (it comes over the bus), sent on the streams it concerns; live only, never replayed. */
export type PresenceNote = PresenceChange;

/** What the hub writes to: an HTTP response held open (node's `ServerResponse`). */
export interface TailSink {
  write(chunk: string | Buffer): boolean;
  readonly writableLength: number;
  /** The last write filled the buffer: wait for `drain` before writing more. */
  readonly writableNeedDrain: boolean;
  readonly destroyed: boolean;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  destroy(): void;
  end(): void;
}

export interface TailOptions {
  /** How often the store is read for new events while someone reads the tail. */
  pollMs: number;
  /** A comment line this often keeps proxies from closing a quiet stream. */
  keepAliveMs: number;
  /** Bytes a reader may leave unread in its response before it is cut off. */
  maxBufferedBytes: number;
  /** How far back a `Last-Event-ID` is honoured. */
  backlogMs: number;
  /** Events per read of the store. */
  pageSize: number;
}

interface Reader {
  /** Who reads: the stream ends when its token expires or its client is revoked (`closeRefused`). */
  principal: TenantPrincipal;
  scope: TailScope;
  types: Set<string> | null;
  /** Key of what it takes (same key, same frames). */
  key: string;
  sink: TailSink;
  /** Fed by the poller; false while it is still reading its backlog. */
  live: boolean;
  /** Set when it resumed after a point the poller had not reached: what it had is not sent again. */
  floor: TailCursor | null;
}

export interface TailMetrics {
  readers(n: number): void;
  cutOff(): void;
  /** Where the bytes still buffered for readers are read from (a gauge, read when scraped). */
  bufferedFrom(read: () => number): void;
}

/**
 * The live tail of one process (CONTRACT §11). One poller reads the events that became final since
 * its last read — every event of the deployment, whichever process stored it, in the order of
 * migration 012 — and hands each reader its part in one write. A reader that resumes reads its own
 * backlog from the store up to where the poller is, then joins it: no gap, no repeat. Presence comes
 * from the bus (`presence`). Nothing is buffered for a reader beyond what its socket holds: one that
 * leaves more than `maxBufferedBytes` unread is cut off.
 */
export class TailHub {
  private readonly readers = new Set<Reader>();
  /** Where the poller is: every final event up to here has been handed to the live readers. */
  private position: TailCursor | null = null;
  private starting: Promise<TailCursor> | null = null;
  private running = false;
  private stopped = false;
  private keepAlive: NodeJS.Timeout | null = null;
  /** Ends the poller's wait early (`wake`). */
  private wakeUp: (() => void) | null = null;

  constructor(
    private readonly store: TailStore,
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    private readonly options: TailOptions,
    private readonly metrics: TailMetrics = { readers() {}, cutOff() {}, bufferedFrom() {} },
  ) {
    metrics.bufferedFrom(() => {
      let bytes = 0;
      for (const reader of this.readers) bytes += reader.sink.writableLength;
      return bytes;
    });
  }

  /** How many readers this process serves. */
  get size() {
    return this.readers.size;
  }

  /**
   * Serves one reader until it goes: its backlog after `resumeAfter` (when given), then live events.
   * The sink's headers are written already.
   */
  async open(
    principal: TenantPrincipal,
    scope: TailScope,
    sink: TailSink,
    resumeAfter: TailCursor | null,
  ): Promise<void> {
    if (this.stopped) {
      sink.end();
      return;
    }
    const types = scope.eventTypes?.length ? new Set(scope.eventTypes) : null;
    const key = JSON.stringify([
      scope.sessionId ?? null,
      scope.tenantCohortId ?? null,
      [...(types ?? [])].sort(),
    ]);
    const reader: Reader = { principal, scope, types, key, sink, live: false, floor: null };
    this.readers.add(reader);
    this.metrics.readers(this.readers.size);
    sink.once('close', () => this.remove(reader));
    this.ensureKeepAlive();
    try {
      const position = await this.start();
      if (resumeAfter === null) {
        // From now on: the next thing the poller hands out.
        if (sameCursor(position, this.position ?? position)) reader.live = true;
        else await this.catchUp(reader, position);
      } else {
        await this.catchUp(reader, resumeAfter);
      }
    } catch (err) {
      this.log.warn({ err }, 'tail reader failed');
      this.cutOff(reader, false);
    }
  }

  /**
   * Events were just stored by this process: the poller reads now instead of at its next tick
   * (events stored by other processes wait for the tick, `pollMs`).
   */
  wake() {
    this.wakeUp?.();
  }

  /** A presence change (from the bus): written at once to the readers it concerns. */
  presence(note: PresenceNote) {
    let frame: Buffer | null = null;
    for (const reader of this.readers) {
      if (!this.takes(reader, note.tenantId, note.sessionId, note.tenantCohortId, note.kind)) continue;
      frame ??= Buffer.from(
        `event: ${note.kind}\ndata: ${JSON.stringify({
          sessionId: note.sessionId,
          playerId: note.playerId,
          tenantCohortId: note.tenantCohortId,
          at: note.at,
        })}\n\n`,
      );
      this.write(reader, frame);
    }
  }

  /**
   * Ends the streams of readers whose token is refused now (expired, or its client revoked): the
   * client comes back with a fresh token and `Last-Event-ID` (the `realtime.token-check` job, every
   * second, and at once on a revocation from the bus).
   */
  closeRefused(refused: (principal: TenantPrincipal) => boolean) {
    for (const reader of this.readers) if (refused(reader.principal)) this.end(reader);
  }

  /**
   * Ends the streams reading one session (its player's data was erased: on every process, from the
   * bus). A reader that comes back is refused with 404, as the session is gone.
   */
  closeSession(sessionId: string) {
    for (const reader of [...this.readers]) if (reader.scope.sessionId === sessionId) this.end(reader);
  }

  /** Ends every stream (the server is stopping); no reader is taken after this. */
  close() {
    this.stopped = true;
    if (this.keepAlive) clearInterval(this.keepAlive);
    this.keepAlive = null;
    for (const reader of [...this.readers]) this.end(reader);
  }

  /** The poller's position, starting it if it is not running. */
  private start(): Promise<TailCursor> {
    if (this.position) return Promise.resolve(this.position);
    this.starting ??= this.store.head().then((head) => {
      this.position = head;
      this.starting = null;
      if (!this.running) void this.poll();
      return head;
    });
    return this.starting;
  }

  private async poll() {
    this.running = true;
    try {
      while (this.readers.size > 0 && !this.stopped && this.position) {
        let rows: TailRow[] = [];
        try {
          rows = await this.store.read(this.position, this.options.pageSize);
        } catch (err) {
          this.log.warn({ err }, 'tail read failed; trying again');
        }
        if (rows.length > 0) {
          this.position = rows[rows.length - 1].cursor;
          this.dispatch(rows);
        }
        if (rows.length < this.options.pageSize) await this.pause();
      }
    } finally {
      this.running = false;
      // Nobody reads: the next reader starts from "now" again.
      if (this.readers.size === 0) this.position = null;
      else if (!this.stopped) void this.poll();
    }
  }

  /** Each live reader gets its events of `rows` in one write; readers that take the same share frames. */
  private dispatch(rows: TailRow[]) {
    const frames = new Map<TailRow, string>();
    const frameOf = (row: TailRow) => {
      let f = frames.get(row);
      if (f === undefined) {
        f = frame(row);
        frames.set(row, f);
      }
      return f;
    };
    // One buffer per distinct share, written to every reader of it: encoded once, not once a reader.
    const chunks = new Map<string, Buffer>();
    for (const reader of this.readers) {
      if (!reader.live) continue;
      if (reader.floor) {
        const floor = reader.floor;
        const fresh = rows.filter((row) => compareCursors(row.cursor, floor) > 0);
        if (fresh.length === rows.length) reader.floor = null;
        const chunk = fresh
          .filter((row) => this.takes(reader, row.tenantId, row.sessionId, row.tenantCohortId, row.eventType))
          .map(frameOf)
          .join('');
        if (chunk !== '') this.write(reader, chunk);
        continue;
      }
      const chunkKey = `${reader.scope.tenantId}\u0000${reader.key}`;
      let chunk = chunks.get(chunkKey);
      if (chunk === undefined) {
        let text = '';
        for (const row of rows) {
          if (this.takes(reader, row.tenantId, row.sessionId, row.tenantCohortId, row.eventType))
            text += frameOf(row);
        }
        chunk = Buffer.from(text);
        chunks.set(chunkKey, chunk);
      }
      if (chunk.length > 0) this.write(reader, chunk);
    }
  }

  /**
   * The reader's events after `from` up to the poller's position, page by page (waiting for its
   * socket to drain between pages); it joins the poller once it has read up to where the poller is.
   */
  /** Waits `pollMs`, or less when woken. */
  private pause(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, this.options.pollMs);
      timer.unref();
      const self = this;
      function done() {
        clearTimeout(timer);
        self.wakeUp = null;
        resolve();
      }
      this.wakeUp = done;
    });
  }

  private async catchUp(reader: Reader, from: TailCursor) {
    const since = this.clock.now() - this.options.backlogMs;
    let cursor = from;
    for (;;) {
      const upTo = this.position!;
      const rows = await this.store.read(cursor, this.options.pageSize, { upTo, scope: reader.scope, since });
      if (!this.readers.has(reader)) return;
      if (rows.length > 0) {
        const chunk = rows.map(frame).join('');
        cursor = rows[rows.length - 1].cursor;
        if (!this.write(reader, chunk)) return;
        await this.drained(reader);
        if (!this.readers.has(reader)) return;
      }
      if (rows.length < this.options.pageSize) {
        // Everything up to `upTo` is read, and the poller has not moved since: join it.
        if (this.position && sameCursor(upTo, this.position)) {
          if (compareCursors(cursor, upTo) > 0) reader.floor = cursor;
          reader.live = true;
          return;
        }
        if (compareCursors(upTo, cursor) > 0) cursor = upTo;
      }
    }
  }

  private takes(reader: Reader, tenantId: string, sessionId: string, cohort: string | null, type: string) {
    const { scope } = reader;
    if (scope.tenantId !== tenantId) return false;
    if (scope.sessionId !== undefined && scope.sessionId !== sessionId) return false;
    if (scope.tenantCohortId !== undefined && scope.tenantCohortId !== cohort) return false;
    return reader.types === null || reader.types.has(type);
  }

  /**
   * Writes to a reader. One that still leaves more than `maxBufferedBytes` unread from earlier writes
   * is cut off instead (false): what a reader costs is bounded by that and one poll's worth.
   */
  private write(reader: Reader, chunk: string | Buffer): boolean {
    if (reader.sink.destroyed) {
      this.remove(reader);
      return false;
    }
    if (reader.sink.writableLength > this.options.maxBufferedBytes) {
      this.cutOff(reader, true);
      return false;
    }
    reader.sink.write(chunk);
    return true;
  }

  private drained(reader: Reader): Promise<void> {
    // `drain` comes only after a write that filled the buffer.
    if (!reader.sink.writableNeedDrain || reader.sink.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      reader.sink.once('drain', resolve);
      reader.sink.once('close', resolve);
    });
  }

  private cutOff(reader: Reader, slow: boolean) {
    if (slow) {
      this.metrics.cutOff();
      this.log.info({ tenantId: reader.scope.tenantId }, 'tail reader cut off: too slow');
    }
    this.remove(reader);
    reader.sink.destroy();
  }

  /** Ends a reader's stream as it is (what was written still reaches it). */
  private end(reader: Reader) {
    this.remove(reader);
    reader.sink.end();
  }

  private remove(reader: Reader) {
    if (this.readers.delete(reader)) this.metrics.readers(this.readers.size);
    if (this.readers.size === 0 && this.keepAlive) {
      clearInterval(this.keepAlive);
      this.keepAlive = null;
    }
  }

  private ensureKeepAlive() {
    if (this.keepAlive || this.stopped) return;
    this.keepAlive = setInterval(() => {
      for (const reader of this.readers) this.write(reader, ': keep-alive\n\n');
    }, this.options.keepAliveMs);
    this.keepAlive.unref();
  }
}

/** An event on the stream: its position as the id, its type as the SSE event name, its JSON as data. */
function frame(row: TailRow): string {
  return `id: ${encodeTailCursor(row.cursor)}\nevent: ${row.eventType}\ndata: ${row.body}\n\n`;
}
