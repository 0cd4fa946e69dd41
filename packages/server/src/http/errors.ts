import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEM_CONTENT_TYPE, ProblemError, problems } from './problem.ts';
import { validationProblem } from './validation.ts';

/** Maps Fastify's own errors to the catalogue; anything else is a 500 that is logged, never shown. */
export function toProblemError(error: FastifyError): ProblemError {
  if (error instanceof ProblemError) return error;
  if (error.validation)
    return validationProblem(error.validation as never, error.validationContext ?? 'body');
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return problems.payloadTooLarge('The request body is larger than this route accepts.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return problems.unsupportedMediaType('Send the body as application/json.');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return problems.malformedJson('The request body is not valid JSON.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return problems.badRequest('The Content-Length header does not match the body.');
    // The router's own refusals (passed through `frameworkErrors`, see app.ts).
    case 'FST_ERR_BAD_URL':
      return problems.badRequest(
        'The request path is not a valid URL (a % not followed by two hex digits?).',
      );
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return problems.uriTooLong();
  }
  if (error.statusCode === 429) return problems.rateLimited(1);
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return problems.badRequest(undefined, error.statusCode);
  }
  return problems.internal();
}

export function sendProblem(reply: FastifyReply, problem: ProblemError) {
  if (problem.headers) reply.headers(problem.headers);
  return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problem.toProblem());
}

export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const problem = toProblemError(error);
  if (problem.status >= 500) request.log.error({ err: error }, 'request failed');
  return sendProblem(reply, problem);
}

export function notFoundHandler(request: FastifyRequest, reply: FastifyReply) {
  return sendProblem(reply, problems.noRoute(request.method, request.url.split('?')[0]));
}

/**
 * Refusals Node's HTTP parser makes before Fastify sees a request (headers over the size limit, a
 * client too slow to send its request, bytes that are not HTTP) are problem documents like every
 * other error; Fastify's own handler would answer them as plain JSON.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket) {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const problem =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? problems.headersTooLarge()
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? problems.requestTimeout()
        : problems.badRequest('The request is not valid HTTP.');
  const body = JSON.stringify(problem.toProblem());
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status]}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
