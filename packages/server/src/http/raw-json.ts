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

const texts = new WeakMap<object, string>();

/** Remembers the JSON text a request body was parsed from (the app's JSON parser does, for every body). */
export function rememberJsonText(value: unknown, text: string) {
  if (typeof value === 'object' && value !== null) texts.set(value, text);
}

/** The JSON text `value` (a parsed request body) was parsed from, if the JSON parser saw it. */
export function jsonTextOf(value: unknown): string | undefined {
  return typeof value === 'object' && value !== null ? texts.get(value) : undefined;
}
