import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON text the request's body was parsed from (`rememberJsonText`), or null. */
    jsonText: string | null;
  }
}

/**
 * Sends JSON that is already text (stored event bodies) or a stream of it. Fastify sends strings
 * and streams as they are; the route's response schema still documents the shape, which the type
 * provider cannot see through, hence the cast.
 */
export function sendRawJson(reply: FastifyReply, payload: string | Readable) {
  return reply.type('application/json; charset=utf-8').send(payload as never);
}

/** Every request has the field (one shape for every request object), null until a JSON body is parsed. */
export function decorateJsonText(app: FastifyInstance) {
  app.decorateRequest('jsonText', null);
}

/**
 * Remembers the JSON text a request's body was parsed from (the app's JSON parser does, for every
 * body): a field of the request, which costs nothing the next request pays for (a `WeakMap` entry
 * per body cost ~0.3 % of the main thread at 3,000 commands/s, and each is an ephemeron for the
 * garbage collector).
 */
export function rememberJsonText(request: FastifyRequest, text: string) {
  request.jsonText = text;
}

/** The JSON text the request's body was parsed from, if the JSON parser saw one. */
export function jsonTextOf(request: FastifyRequest): string | undefined {
  return request.jsonText ?? undefined;
}
