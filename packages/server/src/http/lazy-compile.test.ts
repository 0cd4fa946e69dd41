import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import { describe, expect, it } from 'vitest';
import { buildSerializer } from './serialization.ts';
import { validatorCompiler } from './validation.ts';

// Fastify calls the compilers for every route at start; the work is done on a route's first request.
describe('validators and serializers compiled on first use', () => {
  const route = { method: 'GET', url: '/x', httpStatus: '200' };

  it('a validator compiles on its first call, and hands Ajv’s errors on as Fastify reads them', () => {
    const broken = validatorCompiler({ schema: { type: 'no such type' }, httpPart: 'body', ...route });
    expect(() => (broken as (data: unknown) => boolean)({})).toThrow(/type/);

    const validate = validatorCompiler({
      schema: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } },
      httpPart: 'querystring',
      ...route,
    }) as ((data: unknown) => boolean) & { errors?: unknown[] | null };
    const query = { n: '42' };
    expect(validate(query)).toBe(true);
    expect(query).toEqual({ n: 42 }); // coerced in place, as Fastify expects of the query string
    expect(validate({})).toBe(false);
    expect(validate.errors).toEqual([expect.objectContaining({ keyword: 'required' })]);
    expect(validate({ n: 1 })).toBe(true);
    expect(validate.errors).toBeNull();
  });

  it('a serializer compiles on its first call and then serializes as fast-json-stringify does', () => {
    const schema = { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'string' } } };
    const broken = buildSerializer(undefined, {})({ ...route, schema: { type: 'no such type' } });
    expect(() => broken({})).toThrow();

    const lazy = buildSerializer(undefined, {})({ ...route, schema });
    const eager = SerializerSelector()(undefined, {})({ ...route, schema });
    const value = { a: 1, b: 'two', c: 'not in the schema' };
    expect(lazy(value)).toBe(eager(value));
    expect(JSON.parse(lazy(value))).toEqual({ a: 1, b: 'two' });
  });
});
