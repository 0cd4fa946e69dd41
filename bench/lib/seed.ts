// A store with a history: rows a deployment would have gathered before a benchmark's run, inserted
// straight into a running server's store (one `insert … select` each, the same SQL on both stores).
import { sql } from 'kysely';
import { openStorage } from '../../packages/server/src/storage/index.ts';

/**
 * Adds `count` ended sessions of `tenantId` (a year of history before now, spread over 1,000 players
 * and 100 cohorts) to the server's store: what a deployment keeps once it has run for a while.
 */
export async function seedEndedSessions(
  server: { dataDir: string; schema?: string | null },
  tenantId: string,
  count: number,
) {
  if (count <= 0) return;
  const storage = await openStorage({
    // A server on PostgreSQL has a schema of its own (lib/procs.ts, lib.ts); on SQLite, none.
    databaseUrl: server.schema ? (process.env.DATABASE_URL ?? null) : null,
    databaseSchema: server.schema ?? 'public',
    dataDir: server.dataDir,
    sqliteSynchronous: 'NORMAL',
  });
  try {
    const start = Date.now() - 365 * 86_400_000;
    const step = Math.floor((365 * 86_400_000) / count);
    await sql
      .raw(
        `with recursive n(i) as (select 0 union all select i + 1 from n where i < ${count - 1}) ` +
          'insert into sessions (session_id, tenant_id, player_id, tenant_cohort_id, device, status, ' +
          'started_at, last_seen_at, ended_at, end_reason) ' +
          `select 'history-' || i, '${tenantId}', 'player-' || (i % 1000), 'cohort-' || (i % 100), '{}', ` +
          `'ended', ${start} + i * ${step}, ${start} + i * ${step} + 600000, ${start} + i * ${step} + 600000, 'device' from n`,
      )
      .execute(storage.db);
  } finally {
    await storage.close();
  }
}
