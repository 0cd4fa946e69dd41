import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import { type TProperties, type TSchema, Type } from 'typebox';
import {
  DEFAULT_PAGE_SIZE,
  envelopeSchema,
  listEnvelope,
  MAX_PAGE_SIZE,
  type PageRequest,
} from './pagination.ts';
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
  list(request: FastifyRequest, page: PageRequest): Promise<{ items: Item[]; totalCount: number }>;
}

/**
 * Registers a list and its pages (CONTRACT §4): `url` answers page 1 of 1000 and takes no `pageSize`;
 * `url/page/:pageNumber` answers one page of `pageSize` (default 50). Both use the list envelope.
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
        querystring: object(spec.query ?? {}),
        response,
      },
    },
    async (request) => {
      const page = { page: 1, pageSize: UNPAGINATED_PAGE_SIZE };
      const { items, totalCount } = await spec.list(request, page);
      return listEnvelope(spec.key, items, page, totalCount);
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
        querystring: object({ ...spec.query, pageSize: Type.Optional(PageSize) }),
        response,
      },
    },
    async (request) => {
      const { pageNumber } = request.params as { pageNumber: number };
      const { pageSize } = request.query as { pageSize?: number };
      const page = { page: pageNumber, pageSize: pageSize ?? DEFAULT_PAGE_SIZE };
      const { items, totalCount } = await spec.list(request, page);
      return listEnvelope(spec.key, items, page, totalCount);
    },
  );
}
