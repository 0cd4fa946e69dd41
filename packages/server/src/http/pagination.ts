import { type TSchema, Type } from 'typebox';

export const DEFAULT_PAGE_SIZE = 50;

export const PageNumberParam = Type.Integer({ minimum: 1, description: '1-based page number.' });

export const PageSizeQuery = Type.Object(
  {
    pageSize: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, description: 'Items per page, 1–1000 (default 50).' }),
    ),
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
      [key]: Type.Array(item),
      page: Type.Integer(),
      pageSize: Type.Integer(),
      totalCount: Type.Integer(),
      totalPages: Type.Integer(),
      hasMore: Type.Boolean(),
    }),
  );
}

export const offsetOf = (req: PageRequest) => (req.page - 1) * req.pageSize;
