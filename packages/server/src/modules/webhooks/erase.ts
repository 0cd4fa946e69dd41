import { type Kysely, type SqlBool, sql } from 'kysely';
import type { Database } from '../../storage/index.ts';
import { encodeFanout, type FanoutItem, itemsOf, messageOf } from './fanout-row.ts';

/** Needles in one query's `like` list (a player with many sessions is searched for in parts). */
const NEEDLES_PER_QUERY = 100;
/** Fan-out rows rewritten per call. */
const FANOUT_ROWS = 20;

/** `like` pattern of a literal substring (`\` escapes). */
const pattern = (needle: string) => `%${needle.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

function mentions(column: 'payload' | 'messages', needles: string[]) {
  return sql<SqlBool>`(${sql.join(
    needles.map((n) => sql`${sql.ref(column)} like ${pattern(n)} escape ${'\\'}`),
    sql` or `,
  )})`;
}

/**
 * Erasure (CONTRACT §16: "nothing of the player survives in the delivery log beyond deliveries already
 * sent"): deliveries of the tenant not delivered (pending, or failed: a replay would send them again)
 * whose body contains one of `needles` (the erased sessions' ids and the player's `"playerId":…`) are
 * deleted with their attempts, except `player.erased` itself; fan-out rows not yet expanded lose the
 * messages that mention them. `like` finds candidates (case-insensitive on SQLite), an exact
 * `includes` decides. At most about `limit` rows per call, each statement its own short transaction;
 * returns how many deliveries and fan-out messages went.
 */
export async function eraseUnsent(
  db: Kysely<Database>,
  tenantId: string,
  needles: string[],
  limit: number,
): Promise<number> {
  let erased = 0;
  for (let i = 0; i < needles.length && erased < limit; i += NEEDLES_PER_QUERY) {
    const part = needles.slice(i, i + NEEDLES_PER_QUERY);
    erased += await eraseDeliveries(db, tenantId, part, limit - erased);
    erased += await eraseFanout(db, tenantId, part);
  }
  return erased;
}

async function eraseDeliveries(db: Kysely<Database>, tenantId: string, needles: string[], limit: number) {
  let erased = 0;
  let after = '';
  while (erased < limit) {
    const page = await db
      .selectFrom('webhook_deliveries')
      .select(['delivery_id', 'payload'])
      .where('tenant_id', '=', tenantId)
      // Through `webhook_deliveries_due` (status first): the delivered rows, most of the log, are not read.
      .where('status', 'in', ['pending', 'failed'])
      .where('type', '!=', 'player.erased')
      .where('delivery_id', '>', after)
      .where(mentions('payload', needles))
      .orderBy('delivery_id')
      .limit(limit)
      .execute();
    if (page.length === 0) break;
    after = page[page.length - 1].delivery_id;
    const ids = page.filter((r) => needles.some((n) => r.payload.includes(n))).map((r) => r.delivery_id);
    if (ids.length > 0) {
      erased += await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', ids).execute();
        // A delivery sent meanwhile is in the log as sent: it stays.
        const gone = await trx
          .deleteFrom('webhook_deliveries')
          .where('delivery_id', 'in', ids)
          .where('status', '!=', 'delivered')
          .executeTakeFirst();
        return Number(gone.numDeletedRows);
      });
    }
    if (page.length < limit) break;
  }
  return erased;
}

/** Fan-out rows of the tenant lose the messages naming a needle (a row left with none is deleted). */
async function eraseFanout(db: Kysely<Database>, tenantId: string, needles: string[]) {
  const rows = await db
    .selectFrom('webhook_fanout')
    .select('fanout_id')
    .where('tenant_id', '=', tenantId)
    .where(mentions('messages', needles))
    .limit(FANOUT_ROWS)
    .execute();
  let erased = 0;
  for (const { fanout_id } of rows) {
    erased += await db.transaction().execute(async (trx) => {
      // Read again in the transaction: the dispatcher may have expanded (deleted) it meanwhile.
      const row = await trx
        .selectFrom('webhook_fanout')
        .selectAll()
        .where('fanout_id', '=', fanout_id)
        .executeTakeFirst();
      if (!row) return 0;
      const messages = itemsOf(row);
      const newIndex = new Map<number, number>();
      const kept: FanoutItem[] = [];
      messages.forEach((m, i) => {
        const message = messageOf(m);
        if (needles.some((n) => message.includes(n))) return;
        newIndex.set(i, kept.length);
        kept.push(m);
      });
      if (kept.length === messages.length) return 0;
      const targets = (JSON.parse(row.targets) as [string, number[] | null][])
        .map(([webhookId, indexes]): [string, number[] | null] => [
          webhookId,
          indexes === null ? null : indexes.flatMap((i) => (newIndex.has(i) ? [newIndex.get(i)!] : [])),
        ])
        .filter(([, indexes]) => indexes === null || indexes.length > 0);
      if (kept.length === 0 || targets.length === 0) {
        await trx.deleteFrom('webhook_fanout').where('fanout_id', '=', fanout_id).execute();
      } else {
        await trx
          .updateTable('webhook_fanout')
          .set({
            ...encodeFanout(kept),
            targets: JSON.stringify(targets),
            deliveries: targets.reduce(
              (n, [, indexes]) => n + (indexes === null ? kept.length : indexes.length),
              0,
            ),
          })
          .where('fanout_id', '=', fanout_id)
          .execute();
      }
      return messages.length - kept.length;
    });
  }
  return erased;
}
