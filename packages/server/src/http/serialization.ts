import SerializerSelector from '@fastify/fast-json-stringify-compiler';

const buildDefault: SerializerSelector.SerializerFactory = SerializerSelector();

/**
 * For Fastify's `schemaController.compilersFactory`: Fastify's own response serializers
 * (fast-json-stringify, from the response schemas), each compiled on the first answer that uses it
 * rather than when the app starts (why: `validatorCompiler` in validation.ts).
 */
export const buildSerializer: SerializerSelector.SerializerFactory = (externalSchemas, options) => {
  const compile = buildDefault(externalSchemas, options);
  return (route) => {
    let compiled: SerializerSelector.Serializer | undefined;
    return (data) => {
      compiled ??= compile(route);
      return compiled(data);
    };
  };
};
