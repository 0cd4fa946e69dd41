import type { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';

/**
 * Streamed NDJSON answers (the tenant export, a player's export): the lines come from an async
 * generator read a page at a time, so memory stays flat however long the answer.
 */
export const NDJSON = 'application/x-ndjson';

/** The 200 answer of an NDJSON route, for the OpenAPI document. */
export function ndjsonResponse(description: string) {
  return {
    description,
    content: {
      [NDJSON]: {
        // Each line is a JSON object; the body has no bound.
        schema: Type.String({ maxLength: Number.MAX_SAFE_INTEGER }),
      },
    },
  };
}

/**
 * Sends `lines` as the body. A failure after the first byte cannot become a problem document: the
 * connection is cut, and the missing `end` line tells the reader the answer is incomplete.
 */
export function sendNdjson(reply: FastifyReply, lines: Readable) {
  return reply
    .type(NDJSON)
    .header('cache-control', 'no-store')
    .send(lines as never);
}
