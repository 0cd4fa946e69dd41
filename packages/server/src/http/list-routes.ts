import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import { type TProperties, type TSchema, Type } from 'typebox';
import { CursorError } from '../storage/pages.ts';
import {
  Cursor,
  DEFAULT_PAGE_SIZE,
  envelopeSchema,
  listEnvelope,
  MAX_PAGE_SIZE,
  type PageMeta,
  type PageRequest,
} from './pagination.ts';
import { problems } from './problem.ts';
import { Int32, problemResponses } from './schemas.ts';

/** The unpaginated form of a list is page 1 of this size (CONTRACT §4). */
export const UNPAGINATED_PAGE_SIZE = 1000;

const PageSize = Int32(1, MAX_PAGE_SIZE, 'Items per page, 1–1000 (default 50).');
/** A page past the last one is an empty list; past this bound it is a 400 (no store is asked to skip 10^20 rows). */
export const MAX_PAGE_NUMBER = 10_000_000;
export const PageNumber = Int32(1, MAX_PAGE_NUMBER, '1-based page number.');

export interface ListRoutes<Item> {
  /** The list's path; its pages are at `${url}/page/:pageNumber`. */
  url: string;
  /** The list's `operationId` (e.g. `listActiveSessions`); its pages' is the same + `Page`. */
  operationId: string;
  /** The envelope's key, e.g. `sessions`. */
  key: string;
  item: TSchema;
  tags: string[];
  /** What the list holds, e.g. "Sessions of a cohort, newest first". */
  summary: string;
  config: FastifyContextConfig;
  /** Path parameters besides `pageNumber`. */
  params?: TProperties;
  /** Query parameters besides `pageSize`. */
  query?: TProperties;
  /** The problem statuses the routes answer with. */
  errors?: number[];
  /** One page: its items and what the store says of it (`storage/pages.ts` `readPage`). */
  list(request: FastifyRequest, page: PageRequest): Promise<{ items: Item[] } & PageMeta>;
}

const After = Type.Optional(
  Cursor(
    'Read the items right after this cursor (a `nextCursor`), at any depth: the page number is then ignored.',
  ),
);

/** Reads a page; a cursor that is not one of this list's is a 400. */
async function readList<Item>(spec: ListRoutes<Item>, request: FastifyRequest, page: PageRequest) {
  try {
    const { items, ...meta } = await spec.list(request, page);
    return listEnvelope(spec.key, items, page, meta);
  } catch (err) {
    if (err instanceof CursorError) {
      throw problems.validation(err.message, [{ path: 'after', message: err.message }]);
    }
    throw err;
  }
}

/**
 * Registers a list and its pages (CONTRACT §4): `url` answers page 1 of 1000 and takes no `pageSize`;
 * `url/page/:pageNumber` answers one page of `pageSize` (default 50). Both use the list envelope and
 * take `after` (a cursor: the page right after it, at any depth).
 */
export function listRoutes<Item>(root: FastifyInstance, spec: ListRoutes<Item>) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  const response = {
    200: envelopeSchema(spec.key, spec.item),
    ...problemResponses(...(spec.errors ?? [400, 401, 403, 429])),
  };
  const object = (props: TProperties) => Type.Object(props, { additionalProperties: false });
  const params = spec.params && Object.keys(spec.params).length > 0 ? { params: object(spec.params) } : {};

  app.get(
    spec.url,
    {
      config: spec.config,
      schema: {
        tags: spec.tags,
        operationId: spec.operationId,
        summary: `${spec.summary}; page 1 of up to ${UNPAGINATED_PAGE_SIZE}.`,
        ...params,
        querystring: object({ ...spec.query, after: After }),
        response,
      },
    },
    async (request) => {
      const { after } = request.query as { after?: string };
      return readList(spec, request, { page: 1, pageSize: UNPAGINATED_PAGE_SIZE, after });
    },
  );

  app.get(
    `${spec.url}/page/:pageNumber`,
    {
      config: spec.config,
      schema: {
        tags: spec.tags,
        operationId: `${spec.operationId}Page`,
        summary: `${spec.summary}; one page.`,
        params: object({ ...spec.params, pageNumber: PageNumber }),
        querystring: object({ ...spec.query, pageSize: Type.Optional(PageSize), after: After }),
        response,
      },
    },
    async (request) => {
      const { pageNumber } = request.params as { pageNumber: number };
      const { pageSize, after } = request.query as { pageSize?: number; after?: string };
      return readList(spec, request, { page: pageNumber, pageSize: pageSize ?? DEFAULT_PAGE_SIZE, after });
    },
  );
}
