import type { Clock } from '../../clock.ts';
import type { SessionRow } from './store.ts';

export interface LiveSessionsOptions {
  /**
   * How long a remembered row is trusted at most without hearing of its session's end (a safety
   * net). Each row is trusted for a random time between half of it and all of it, so rows remembered
   * together (a fleet connecting at once) are not all read again in the same moment.
   */
  maxAgeMs: number;
  /** How many sessions are remembered; the oldest remembered goes first. */
  maxEntries: number;
}

/**
 * The live sessions commands are sent to, remembered, so that accepting a command reads no row:
 * at thousands of commands per second the session lookup was a read per command. Only a live
 * session is remembered, and what a command needs of it (its tenant, that it is live) changes only
 * when it ends: `forget` is called when a session ends here (`session.ended`) or anywhere (the bus's
 * `close` message), and `clear` when the bus may have missed messages. `maxAgeMs` bounds what a
 * missed message could cost.
 */
export class LiveSessions {
  /** Remembered rows, each with the time until which it is trusted. */
  private readonly rows = new Map<string, { row: SessionRow; until: number }>();

  constructor(
    private readonly source: {
      findForTenant(tenantId: string, sessionId: string): Promise<SessionRow | null>;
    },
    private readonly clock: Clock,
    private readonly options: LiveSessionsOptions = { maxAgeMs: 10_000, maxEntries: 100_000 },
  ) {}

  /** The tenant's session: a remembered live row, else the store's row (remembered when live). */
  async findForTenant(tenantId: string, sessionId: string): Promise<SessionRow | null> {
    const now = this.clock.now();
    const hit = this.rows.get(sessionId);
    if (hit && hit.row.tenant_id === tenantId && now < hit.until) return hit.row;
    const row = await this.source.findForTenant(tenantId, sessionId);
    if (row?.status === 'live') this.remember(row, now);
    else if (row) this.rows.delete(sessionId);
    return row;
  }

  /** The session ended (or may have): its row is read again next time. */
  forget(sessionId: string) {
    this.rows.delete(sessionId);
  }

  clear() {
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
    const trusted = this.options.maxAgeMs * (0.5 + 0.5 * Math.random());
    this.rows.set(row.session_id, { row, until: at + trusted });
  }
}
