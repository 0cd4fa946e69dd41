import {
  type Attributes,
  type Context,
  context,
  type Link,
  propagation,
  type Span,
  type SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { FastifyInstance, FastifyPluginCallback } from 'fastify';
import type { TracingConfig } from './config.ts';

/**
 * OpenTelemetry tracing (CONTRACT §16; docs/operations.md, "Tracing"). On when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set (or a test hands `startServer` a span processor): then this
 * module registers a tracer provider for the process, spans go out over OTLP (http/protobuf, batched),
 * and `@fastify/otel` gives every route a span. Off: nothing is loaded or registered, and the code that
 * makes spans (`activeTracer()` is null) does no work at all, not even building an attribute object.
 *
 * Spans: HTTP routes (@fastify/otel: `GET /sessions/:sessionId`, with method, route and status), each
 * webhook attempt (`modules/webhooks/sender.ts`); under those, each group commit (`batcher.ts`, parent
 * the first traced submitter's span, links to the others'), each `Storage.atomically` transaction and
 * each SQL statement (`storage/tracing.ts`). Attributes follow the semantic conventions; no payload, token or
 * query string is ever put in one.
 *
 * One provider per process (the OpenTelemetry API's globals): `liveline start --workers N` sets up one
 * in each worker; two traced servers in one process at once are refused.
 */

let current: Tracer | null = null;

/** The tracer while tracing is on; null when off (then make no span and build no attributes). */
export function activeTracer(): Tracer | null {
  return current;
}

/**
 * The tracer when the active context (or `ctx`) is inside a recording span: a traced request, a
 * webhook attempt. Storage and group-commit spans are made only there: the periodic jobs' polls
 * (the tail every 50 ms, the dispatcher, the sweeps) would otherwise each be a trace of their own,
 * and a request the sampler left out (OTEL_TRACES_SAMPLER) costs no more than this look.
 */
export function tracerInSpan(ctx: Context = context.active()): Tracer | null {
  if (!current) return null;
  return trace.getSpan(ctx)?.isRecording() ? current : null;
}

/** Routes that get no span: probes and scrapes, many a minute, say nothing about a request's time. */
const UNTRACED_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

export interface Tracing {
  /** `@fastify/otel`'s plugin: registered first in `buildApp`, so every route and hook after it is seen. */
  readonly fastifyPlugin: FastifyPluginCallback;
  /** Sends the spans still buffered and unregisters the provider (on server close). */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /**
   * Where finished spans go instead of the OTLP exporter, and turns tracing on without
   * OTEL_EXPORTER_OTLP_ENDPOINT: tests pass a `SimpleSpanProcessor` over an `InMemorySpanExporter`,
   * the tracing bench a `BatchSpanProcessor`.
   */
  spanProcessor?: SpanProcessor;
}

/** Sets tracing up for this process before the server is built; null when it is off. */
export async function setupTracing(
  config: TracingConfig | null,
  options: TracingOptions = {},
): Promise<Tracing | null> {
  if (!config && !options.spanProcessor) return null;
  if (current) throw new Error('tracing is already set up in this process (one traced server per process)');
  // Loaded only when on: an untraced server does not pay for loading the SDK.
  const [{ NodeTracerProvider }, { BatchSpanProcessor }, { resourceFromAttributes }, otel] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-node'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/resources'),
      import('@fastify/otel'),
    ]);
  let processor = options.spanProcessor;
  if (!processor) {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
    // The exporter reads OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT and _COMPRESSION from the environment itself.
    processor = new BatchSpanProcessor(new OTLPTraceExporter({ url: config?.tracesUrl }));
  }
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config?.serviceName ?? 'liveline' }),
    spanProcessors: [processor],
  });
  // The process's provider, context manager (AsyncLocalStorage: a span started in a request's async
  // flow is its child) and W3C trace-context propagator.
  provider.register();
  const instrumentation = new otel.FastifyOtelInstrumentation({
    // One span per request: a span per hook (auth, rate limit, headers...) and one for the handler
    // would triple the spans of every request (the bench measured the cost) for little: the work
    // that takes time (storage, group commits) has spans of its own under the request's.
    instrumentHooks: false,
    instrumentHandler: false,
    ignorePaths: (route: { url: string }) => UNTRACED_ROUTES.has(route.url),
    requestHook: (span, request) => {
      const route = request.routeOptions.url;
      if (route) span.updateName(`${request.method} ${route}`);
      // @fastify/otel records the raw URL, query string and all (a device's `?access_token=`).
      span.setAttribute('url.path', request.url.split('?')[0]);
    },
  });
  instrumentation.setTracerProvider(provider);
  current = provider.getTracer('liveline');
  return {
    fastifyPlugin: instrumentation.plugin() as FastifyPluginCallback,
    async shutdown() {
      current = null;
      instrumentation.disable();
      try {
        await provider.shutdown();
      } finally {
        trace.disable();
        context.disable();
        propagation.disable();
      }
    },
  };
}

/** Registers the route instrumentation on `app` (first, before any route or hook), when tracing is on. */
export async function registerTracing(app: FastifyInstance, tracing: Tracing | null | undefined) {
  if (tracing) await app.register(tracing.fastifyPlugin);
}

/**
 * Runs `work` in a span of `tracer` (a child of `parent`, else of the active context), ending it when
 * the promise settles and marking it failed when it rejects. For callers that checked
 * `activeTracer()` first, so an untraced call never gets here.
 */
export function inSpan<T>(
  tracer: Tracer,
  name: string,
  options: { attributes?: Attributes; kind?: SpanKind; links?: Link[]; parent?: Context },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const { parent, ...spanOptions } = options;
  return tracer.startActiveSpan(name, spanOptions, parent ?? context.active(), async (span) => {
    try {
      return await work(span);
    } catch (err) {
      failed(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Marks `span` failed with the error's type (its class or code); the message may quote data, so it stays out. */
export function failed(span: Span, err: unknown) {
  const type = (err as { code?: unknown })?.code ?? (err as Error)?.name ?? 'Error';
  span.setAttribute('error.type', String(type));
  span.setStatus({ code: SpanStatusCode.ERROR });
}
