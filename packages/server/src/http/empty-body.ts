import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/**
 * A `preValidation` hook for routes whose body is optional: no body at all is the same as `{}`
 * (clients of action routes often send none, some send an empty JSON body).
 */
export function noBodyIsEmptyObject(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
) {
  if (request.body === undefined) request.body = {};
  done();
}
