import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorHandler, toProblemError } from '../../../http/errors.ts';
import { problems } from '../../../http/problem.ts';
import { handlerValidatesBody } from '../../../http/validation.ts';
import { addressKey, type FailureWindow } from '../../../limits/index.ts';
import type { ClientCredentials, OAuthFailure } from '../grant.ts';
import {
  MAX_OAUTH_ERROR_DESCRIPTION,
  OAuthErrorSchema,
  TokenRequestBody,
  TokenResponseSchema,
} from '../schemas.ts';
import type { AuthService } from '../service.ts';

/** Token responses are never cached (RFC 6749 §5.1). */
function oauthError(reply: FastifyReply, { status, error, description }: OAuthFailure) {
  if (status === 401) reply.header('WWW-Authenticate', 'Basic realm="liveline"');
  return reply
    .code(status)
    .header('Cache-Control', 'no-store')
    .send({ error, error_description: description.slice(0, MAX_OAUTH_ERROR_DESCRIPTION) });
}

/**
 * Every refusal of this route is an RFC 6749 §5.2 error, also those made before the handler runs (a
 * body that is not a form, bad JSON, too large, an unknown query parameter, the rate limit): `invalid_request`
 * with the contract's status (400, or 413, 415, 429). Only a failure of the server is a problem document.
 */
function oauthErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const problem = toProblemError(error);
  if (problem.status >= 500) return errorHandler(error, request, reply);
  if (problem.headers) reply.headers(problem.headers);
  return oauthError(reply, {
    status: problem.status,
    error: 'invalid_request',
    description:
      problem.status === 415 ? 'Send the request as application/x-www-form-urlencoded.' : problem.message,
  });
}

/** Credentials from HTTP Basic (RFC 6749 §2.3.1: form-urlencoded, then base64) or the request body. */
function clientCredentials(
  header: string | undefined,
  body: Record<string, unknown>,
): ClientCredentials | null {
  if (header?.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return null;
    try {
      return {
        id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')),
        secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')),
      };
    } catch {
      return null;
    }
  }
  const { client_id: id, client_secret: secret } = body;
  return typeof id === 'string' && typeof secret === 'string' ? { id, secret } : null;
}

/**
 * The grant, with refused client authentications (401 `invalid_client`) counted per client id and
 * address: the failure is reserved before the secret is checked, so a concurrent burst cannot pass
 * the limit, and given back when the client authenticated. Past the limit: 429, whatever the secret.
 */
async function limitedGrant(
  auth: AuthService,
  failures: FailureWindow | undefined,
  ip: string,
  credentials: ClientCredentials | null,
  form: Record<string, unknown>,
) {
  if (!failures) return auth.grantClientCredentials(credentials, form);
  const key = `${addressKey(ip)}\u0000${(credentials?.id ?? '?').slice(0, 256)}`;
  const reservation = await failures.reserve(key);
  if (!reservation.ok) throw problems.rateLimited(reservation.retryAfterS);
  const answer = await auth.grantClientCredentials(credentials, form);
  if (!('failure' in answer) || answer.failure.status !== 401) await failures.release(key, reservation.token);
  return answer;
}

/** `POST /oauth/token`: the client-credentials grant. */
export function registerTokenRoute(root: FastifyInstance, auth: AuthService, failures?: FailureWindow) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    '/oauth/token',
    {
      // Errors here follow RFC 6749 §5.2 (`{error, error_description}`), so the handler checks the
      // form itself; the schemas document it.
      validatorCompiler: handlerValidatesBody,
      errorHandler: oauthErrorHandler,
      schema: {
        tags: ['auth'],
        operationId: 'issueAccessToken',
        summary: 'Exchange client credentials for an access token (RFC 6749 §4.4).',
        description:
          'Client authentication by HTTP Basic (`client_id:client_secret`) or in the form. ' +
          'Errors: 401 `invalid_client`; 400 `invalid_request`, `unsupported_grant_type`, `invalid_scope`; ' +
          '429 `invalid_request` with `Retry-After` after 10 refused client authentications a minute ' +
          'for one client id from one address (LIVELINE_TOKEN_FAILURES_PER_MINUTE).',
        consumes: ['application/x-www-form-urlencoded'],
        body: TokenRequestBody,
        response: { 200: TokenResponseSchema, '4xx': OAuthErrorSchema },
      },
    },
    async (request, reply) => {
      const form = (request.body ?? {}) as Record<string, unknown>;
      const credentials = clientCredentials(request.headers.authorization, form);
      const answer = await limitedGrant(auth, failures, request.ip, credentials, form);
      if ('failure' in answer) return oauthError(reply, answer.failure);
      return reply.header('Cache-Control', 'no-store').send(answer.token);
    },
  );
}
