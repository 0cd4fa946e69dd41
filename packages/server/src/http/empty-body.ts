import type { FastifyRequest } from 'fastify';

/**
 * A `preValidation` hook for routes whose body is optional: no body at all is the same as `{}`
 * (clients of action routes often send none, some send an empty JSON body).
 */
export async function noBodyIsEmptyObject(request: FastifyRequest) {
  if (request.body === undefined) request.body = {};
}
