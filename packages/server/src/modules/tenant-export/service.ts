import type { AuthService } from '../auth/index.ts';
import type { EventsService } from '../events/index.ts';
import type { SessionsService, StartCursor } from '../sessions/index.ts';

/** Sessions read per page (each page's views are one batch of the sessions module's decorators). */
export const EXPORT_SESSION_PAGE = 100;

export interface TenantExportDeps {
  auth: Pick<AuthService, 'requireTenant'>;
  sessions: Pick<SessionsService, 'views' | 'startOrderPage'>;
  events: Pick<EventsService, 'sessionEventBodies'>;
}

/** Counts written in the export's last line, so a reader can tell a whole export from a cut one. */
export interface ExportSummary {
  sessions: number;
  events: number;
}

/**
 * A tenant's sessions and events as NDJSON (issue 12): each session as the API shows it, with
 * `"kind":"session"`, then each of its events as stored, with `"kind":"event"`, in timestamp then id
 * order; the last line is `{"kind":"end","sessions":n,"events":m}`. Sessions are read
 * `EXPORT_SESSION_PAGE` at a time by a keyset on `(started_at, session_id)` and events 1,000 at a
 * time per session, so memory stays flat however large the tenant. Not a snapshot: a session that
 * starts while the export runs may or may not be in it.
 */
export class TenantExport {
  constructor(private readonly deps: TenantExportDeps) {}

  /** 404 `not_found` for an unknown tenant (checked before the first byte is sent). */
  async requireTenant(tenantId: string): Promise<void> {
    await this.deps.auth.requireTenant(tenantId);
  }

  /** The export's lines, each ending in `\n`: sessions started at or after `since` (Unix ms). */
  async *lines(tenantId: string, since: number): AsyncGenerator<string> {
    const { sessions, events } = this.deps;
    const summary: ExportSummary = { sessions: 0, events: 0 };
    let after: StartCursor | null = null;
    for (;;) {
      const rows = await sessions.startOrderPage(tenantId, { since }, after, EXPORT_SESSION_PAGE);
      const views = await sessions.views(rows);
      for (const view of views) {
        yield `${JSON.stringify({ kind: 'session', ...view })}\n`;
        summary.sessions++;
        for await (const body of events.sessionEventBodies(view.sessionId)) {
          // A stored body is a JSON object: `{"kind":"event",` takes the place of its `{`.
          yield `{"kind":"event",${body.slice(1)}\n`;
          summary.events++;
        }
      }
      if (rows.length < EXPORT_SESSION_PAGE) break;
      const last = rows[rows.length - 1];
      after = { startedAt: Number(last.started_at), sessionId: last.session_id };
    }
    yield `${JSON.stringify({ kind: 'end', ...summary })}\n`;
  }
}
