import { type TSchema, Type } from 'typebox';
import type { PageSpec } from '../storage/pages.ts';
import { Count, Int32, Nullable } from './schemas.ts';

export const DEFAULT_PAGE_SIZE = 50;
/** The largest page (CONTRACT §4, §8). */
export const MAX_PAGE_SIZE = 1000;

export const PageSizeQuery = Type.Object(
  {
    pageSize: Type.Optional(Int32(1, MAX_PAGE_SIZE, 'Items per page, 1–1000 (default 50).')),
  },
  { additionalProperties: false },
);

/** A page asked for: by number, or (`after`) right after a cursor. */
export type PageRequest = PageSpec;

/** What a store says of the page it read (`storage/pages.ts` `readPage`); a bare count for short lists. */
export interface PageMeta {
  totalCount: number;
  totalCountExact: boolean;
  hasMore: boolean;
  nextCursor: string | null;
}

/**
 * The list envelope of every list route (CONTRACT §4, widened in docs/api.md "Lists"):
 * `{<key>: [...], page, pageSize, totalCount, totalCountExact, totalPages, hasMore, nextCursor}`.
 * `page` is null for a page read by cursor. A bare `totalCount` is an exact count of a list that
 * is read whole (short by nature or by quota): no cursor then.
 */
export function listEnvelope<T>(key: string, items: T[], req: PageRequest, meta: number | PageMeta) {
  const { totalCount, totalCountExact, hasMore, nextCursor } =
    typeof meta === 'number'
      ? {
          totalCount: meta,
          totalCountExact: true,
          hasMore: req.page < Math.ceil(meta / req.pageSize),
          nextCursor: null,
        }
      : meta;
  return {
    [key]: items,
    page: req.after === undefined ? req.page : null,
    pageSize: req.pageSize,
    totalCount,
    totalCountExact,
    totalPages: Math.ceil(totalCount / req.pageSize),
    hasMore,
    nextCursor,
  };
}

/** The schema of a list envelope, for responses. */
export function envelopeSchema(key: string, item: TSchema) {
  // The key varies by route, so the static type is loosened to a record; the JSON schema stays exact.
  return Type.Unsafe<Record<string, unknown>>(
    Type.Object({
      [key]: Type.Array(item, { maxItems: MAX_PAGE_SIZE }),
      page: Nullable(Count('The 1-based page number; null for a page read by cursor (`after`).')),
      pageSize: Int32(1, MAX_PAGE_SIZE),
      totalCount: Count(
        'Matching items: exact while `totalCountExact`; else a floor (counting stops at 10,000, or at the end of the page asked for when deeper).',
      ),
      totalCountExact: Type.Boolean({ description: 'Whether `totalCount` (and `totalPages`) are exact.' }),
      totalPages: Count(),
      hasMore: Type.Boolean({ description: 'Whether items follow this page (always exact).' }),
      nextCursor: Nullable(
        Cursor('Pass as `after` to read the items after this page; null when none follow.'),
      ),
    }),
  );
}

/** An opaque list cursor (`after`, `nextCursor`). */
export function Cursor(description: string) {
  return Type.String({ minLength: 1, maxLength: 512, pattern: '^[A-Za-z0-9_-]+$', description });
}

export const offsetOf = (req: PageRequest) => (req.page - 1) * req.pageSize;
