import type { Clock } from '../../clock.ts';
import type { SessionRow } from './store.ts';

export interface LiveSessionsOptions {
  /**
   * How long a remembered row is trusted at most since the store last said its session was live (a
   * bound on what a missed "session ended" can cost). `check` reads again, in the background, the
   * rows in use that are half this old; a row the checks do not reach is read on its next use.
   */
  maxAgeMs: number;
  /** How many sessions are remembered; the oldest remembered goes first. */
  maxEntries: number;
  /** At most this many sessions per statement of `check`. */
  checkChunk: number;
}

interface Entry {
  row: SessionRow;
  /** When the store last said the session was live (the start of that read). */
  checkedAt: number;
  /** Used since `checkedAt`. */
  used: boolean;
}

/**
 * The live sessions commands are sent to, remembered, so that accepting a command reads no row:
 * at thousands of commands per second the session lookup was a read per command. Only a live
 * session is remembered, and what a command needs of it (its tenant, that it is live) changes only
 * when it ends: `forget` is called when a session ends here (`session.ended`) or anywhere (the bus's
 * `close` message), and `clear` when the bus may have missed messages.
 *
 * `maxAgeMs` bounds what a missed message could cost. So that a session in steady use is not read
 * again on the command path every `maxAgeMs` (a read a second for every ten sessions in use), the
 * `sessions.live-check` job calls `check`, which reads the rows in use in a few statements and
 * drops the rows nobody used.
 */
export class LiveSessions {
  private readonly rows = new Map<string, Entry>();
  /** Counts `forget` and `clear` calls: a row read while one happened may predate it, and is not remembered. */
  private forgets = 0;

  constructor(
    private readonly source: {
      findForTenant(tenantId: string, sessionId: string): Promise<SessionRow | null>;
      stillLive(sessionIds: readonly string[]): Promise<Set<string>>;
    },
    private readonly clock: Clock,
    private readonly options: LiveSessionsOptions = {
      maxAgeMs: 10_000,
      maxEntries: 100_000,
      checkChunk: 500,
    },
  ) {}

  /** How often `check` should run so that a row in use is checked before it is too old. */
  get checkEveryMs() {
    return this.options.maxAgeMs / 4;
  }

  /** The tenant's session: a remembered live row, else the store's row (remembered when live). */
  async findForTenant(tenantId: string, sessionId: string): Promise<SessionRow | null> {
    const now = this.clock.now();
    const hit = this.rows.get(sessionId);
    if (hit && hit.row.tenant_id === tenantId && now < hit.checkedAt + this.options.maxAgeMs) {
      hit.used = true;
      return hit.row;
    }
    const forgets = this.forgets;
    const row = await this.source.findForTenant(tenantId, sessionId);
    if (row && row.status !== 'live') this.rows.delete(sessionId);
    else if (row && forgets === this.forgets) this.remember(row, now);
    return row;
  }

  /**
   * Reads again the rows used since their last check that are half `maxAgeMs` old, and forgets
   * those whose session is no longer live; rows of that age nobody used are forgotten unread.
   * Returns how many rows it read.
   */
  async check(): Promise<number> {
    const start = this.clock.now();
    const due: string[] = [];
    for (const [sessionId, entry] of this.rows) {
      if (start - entry.checkedAt < this.options.maxAgeMs / 2) continue;
      if (entry.used) due.push(sessionId);
      else this.rows.delete(sessionId);
    }
    for (let i = 0; i < due.length; i += this.options.checkChunk) {
      const chunk = due.slice(i, i + this.options.checkChunk);
      const at = this.clock.now();
      const live = await this.source.stillLive(chunk);
      for (const sessionId of chunk) {
        const entry = this.rows.get(sessionId);
        // Forgotten meanwhile (the session ended, or the bus was cut), or read anew since `at`.
        if (!entry || entry.checkedAt >= at) continue;
        if (live.has(sessionId)) {
          entry.checkedAt = at;
          entry.used = false;
        } else this.rows.delete(sessionId);
      }
    }
    return due.length;
  }

  /** The session ended (or may have): its row is read again next time. */
  forget(sessionId: string) {
    this.forgets++;
    this.rows.delete(sessionId);
  }

  clear() {
    this.forgets++;
    this.rows.clear();
  }

  get size() {
    return this.rows.size;
  }

  private remember(row: SessionRow, at: number) {
    this.rows.delete(row.session_id);
    if (this.rows.size >= this.options.maxEntries) {
      const oldest = this.rows.keys().next();
      if (!oldest.done) this.rows.delete(oldest.value);
    }
    this.rows.set(row.session_id, { row, checkedAt: at, used: false });
  }
}
