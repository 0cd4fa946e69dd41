import type { FastifyRequest } from 'fastify';
import type { TSchema } from 'typebox';
import { problems } from './problem.ts';
import { bodyAjv, validationProblem } from './validation.ts';

const LIMIT = 16 * 1024;
const compiled = new WeakMap<TSchema, ReturnType<typeof bodyAjv.compile>>();

/**
 * Reads the JSON body of a GET request. The spec sends `{minutes}` in the body of GETs, which
 * Fastify (rightly) does not parse; we read it here, whatever its content type (curl -d sends a
 * form type), and validate it against `schema`. Undefined when there is no body.
 */
export async function readGetBody<T>(request: FastifyRequest, schema: TSchema): Promise<T | undefined> {
  const { headers } = request;
  const declared = headers['content-length'];
  if (declared === undefined && headers['transfer-encoding'] === undefined) return undefined;
  if (declared !== undefined && Number(declared) > LIMIT) {
    throw problems.payloadTooLarge(`The body of a GET may hold at most ${LIMIT} bytes.`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    size += (chunk as Buffer).length;
    if (size > LIMIT) throw problems.payloadTooLarge(`The body of a GET may hold at most ${LIMIT} bytes.`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw problems.malformedJson('The request body is not valid JSON.');
  }
  let validate = compiled.get(schema);
  if (!validate) {
    validate = bodyAjv.compile(schema);
    compiled.set(schema, validate);
  }
  if (!validate(value)) throw validationProblem(validate.errors ?? [], 'body');
  return value as T;
}
