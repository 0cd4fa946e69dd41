import { type Kysely, type SelectQueryBuilder, sql } from 'kysely';

/**
 * One page of a list, read so that its cost does not grow with the table (issue 12): the rows come
 * from one index range read (storage/README.md, "List indexes"), one more row than asked tells
 * `hasMore`, and the count stops at a bound instead of scanning every matching row on every page.
 */

/** A list's order: `column` in `direction`, ties broken by `id` ascending (`id` null: `column` is the id). */
export interface ListOrder {
  column: string;
  direction: 'asc' | 'desc';
  id: string | null;
}

export interface PageSpec {
  /** 1-based; ignored when `after` is given. */
  page: number;
  pageSize: number;
  /** The opaque cursor of the last item already seen: the page starts right after it. */
  after?: string;
}

export interface Page<Row> {
  rows: Row[];
  /** Exact while the list holds at most the counting bound (or the page's end, if deeper); else a floor. */
  totalCount: number;
  totalCountExact: boolean;
  hasMore: boolean;
  /** The cursor of the page's last item while more follow, else null. */
  nextCursor: string | null;
}

/**
 * Matching items counted at most: a count is exact up to here, or up to the end of the page asked
 * for when it lies deeper (a deep page's offset reads those rows anyway).
 */
export const COUNT_BOUND = 10_000;

/** A cursor that is not one of this list's (malformed, or from a list in another order): a 400. */
export class CursorError extends Error {}

type Value = number | string;

function encodeCursor(order: ListOrder, row: Record<string, unknown>): string {
  const key =
    order.id === null ? [order.column, row[order.column]] : [order.column, row[order.column], row[order.id]];
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

function decodeCursor(order: ListOrder, cursor: string): { value: Value; id: string | null } {
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new CursorError('`after` is not a cursor this server handed out.');
  }
  const valid = (v: unknown): v is Value =>
    (typeof v === 'number' && Number.isSafeInteger(v)) || (typeof v === 'string' && v.length <= 128);
  const size = order.id === null ? 2 : 3;
  if (!Array.isArray(key) || key.length !== size || !key.slice(1).every(valid)) {
    throw new CursorError('`after` is not a cursor this server handed out.');
  }
  if (key[0] !== order.column) throw new CursorError('`after` is a cursor of another list.');
  return { value: key[1] as Value, id: order.id === null ? null : String(key[2]) };
}

/**
 * Reads one page of `base` (a query with its filters, nothing selected yet) in `order`, by page
 * number or after a cursor. `select` chooses the columns, which must include the order's columns.
 */
export async function readPage<DB, TB extends keyof DB, Row extends Record<string, unknown>>(
  db: Kysely<DB>,
  // biome-ignore lint/complexity/noBannedTypes: a query with nothing selected yet, as Kysely types it
  base: SelectQueryBuilder<DB, TB, {}>,
  // biome-ignore lint/complexity/noBannedTypes: as above
  select: (q: SelectQueryBuilder<DB, TB, {}>) => SelectQueryBuilder<DB, TB, Row>,
  order: ListOrder,
  page: PageSpec,
): Promise<Page<Row>> {
  const column = sql.ref(order.column);
  let rowsQuery = select(base).orderBy(column, order.direction);
  if (order.id !== null) rowsQuery = rowsQuery.orderBy(sql.ref(order.id), 'asc');
  let offset = 0;
  if (page.after !== undefined) {
    const { value, id } = decodeCursor(order, page.after);
    const beyond = order.direction === 'desc' ? sql.raw('<') : sql.raw('>');
    const within = order.direction === 'desc' ? sql.raw('<=') : sql.raw('>=');
    rowsQuery = rowsQuery.where(
      order.id === null
        ? sql<boolean>`${column} ${beyond} ${value}`
        : // `column <= v` alone bounds the index range; the rest skips the ties already seen.
          sql<boolean>`${column} ${within} ${value} and (${column} ${beyond} ${value} or ${sql.ref(order.id)} > ${id})`,
    );
  } else offset = (page.page - 1) * page.pageSize;
  const countLimit = Math.max(COUNT_BOUND, offset + page.pageSize) + 1;
  const matching = base.select(sql<number>`1`.as('one')).limit(countLimit).as('matching');
  // biome-ignore lint/suspicious/noExplicitAny: the derived table's type is beyond Kysely's generic DB
  const counted = (db as Kysely<any>).selectFrom(matching).select(sql<number | string>`count(*)`.as('n'));
  const [rows, count] = await Promise.all([
    rowsQuery
      .limit(page.pageSize + 1)
      .offset(offset)
      .execute() as Promise<Row[]>,
    counted.executeTakeFirstOrThrow() as Promise<{ n: number | string }>,
  ]);
  const hasMore = rows.length > page.pageSize;
  if (hasMore) rows.pop();
  const n = Number(count.n);
  const last = rows.at(-1);
  return {
    rows,
    totalCount: n === countLimit ? countLimit - 1 : n,
    totalCountExact: n < countLimit,
    hasMore,
    nextCursor: hasMore && last ? encodeCursor(order, last) : null,
  };
}
