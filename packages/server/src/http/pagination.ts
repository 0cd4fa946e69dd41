import { type TSchema, Type } from 'typebox';
import { Count, Int32 } from './schemas.ts';

export const DEFAULT_PAGE_SIZE = 50;
/** The largest page (CONTRACT §4, §8). */
export const MAX_PAGE_SIZE = 1000;

export const PageSizeQuery = Type.Object(
  {
    pageSize: Type.Optional(Int32(1, MAX_PAGE_SIZE, 'Items per page, 1–1000 (default 50).')),
  },
  { additionalProperties: false },
);

export interface PageRequest {
  page: number;
  pageSize: number;
}

/** The list envelope of every list route: `{<key>: [...], page, pageSize, totalCount, totalPages, hasMore}`. */
export function listEnvelope<T>(key: string, items: T[], req: PageRequest, totalCount: number) {
  const totalPages = Math.ceil(totalCount / req.pageSize);
  return {
    [key]: items,
    page: req.page,
    pageSize: req.pageSize,
    totalCount,
    totalPages,
    hasMore: req.page < totalPages,
  };
}

/** The schema of a list envelope, for responses. */
export function envelopeSchema(key: string, item: TSchema) {
  // The key varies by route, so the static type is loosened to a record; the JSON schema stays exact.
  return Type.Unsafe<Record<string, unknown>>(
    Type.Object({
      [key]: Type.Array(item, { maxItems: MAX_PAGE_SIZE }),
      page: Count('The 1-based page number.'),
      pageSize: Int32(1, MAX_PAGE_SIZE),
      totalCount: Count(),
      totalPages: Count(),
      hasMore: Type.Boolean(),
    }),
  );
}

export const offsetOf = (req: PageRequest) => (req.page - 1) * req.pageSize;
