import type { Kysely } from 'kysely';
import type { Database } from '../../storage/index.ts';
import type { SessionRow } from '../sessions/index.ts';

/** Where a page of the export resumes: after this session in `(started_at, session_id)` order. */
export interface ExportCursor {
  startedAt: number;
  sessionId: string;
}

/**
 * One page of a tenant's sessions started at or after `since`, in `(started_at, session_id)` order
 * after `after`: one range of `sessions_tenant_started` (migration 010), whatever the tenant holds.
 */
export function sessionPageQuery(
  db: Kysely<Database>,
  tenantId: string,
  since: number,
  after: ExportCursor | null,
  limit: number,
) {
  let query = db
    .selectFrom('sessions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('started_at', '>=', since);
  if (after) {
    query = query.where((eb) =>
      eb(eb.refTuple('started_at', 'session_id'), '>', eb.tuple(after.startedAt, after.sessionId)),
    );
  }
  return query.orderBy('started_at').orderBy('session_id').limit(limit);
}

export function sessionPage(...args: Parameters<typeof sessionPageQuery>): Promise<SessionRow[]> {
  return sessionPageQuery(...args).execute();
}
