import type { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';

/**
 * Sends JSON that is already text (stored event bodies) or a stream of it. Fastify sends strings
 * and streams as they are; the route's response schema still documents the shape, which the type
 * provider cannot see through, hence the cast.
 */
export function sendRawJson(reply: FastifyReply, payload: string | Readable) {
  return reply.type('application/json; charset=utf-8').send(payload as never);
}
