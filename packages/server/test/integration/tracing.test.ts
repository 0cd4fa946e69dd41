import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { SpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeTracer } from '../../src/tracing.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { exitWithin, startProcess } from '../helpers/process.ts';
import { type Receiver, startReceiver, waitFor } from '../helpers/receiver.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * Tracing (CONTRACT §16): spans for HTTP routes, storage and webhook sends. In-process servers get
 * an in-memory exporter through `startServer`'s `spanProcessor`; the OTLP path is checked end to end
 * with a child process started with OTEL_EXPORTER_OTLP_ENDPOINT and a local receiver.
 */

const attr = (span: ReadableSpan, name: string) => span.attributes[name];

describe.each(backends)('tracing on (%s)', (backend) => {
  const exporter = new InMemorySpanExporter();
  let server: TestServer;
  let receiver: Receiver;
  let t: TenantFixture;
  let base: string;
  beforeAll(async () => {
    receiver = await startReceiver();
    server = await startTestServer(
      backend,
      { LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true' },
      { spanProcessor: new SimpleSpanProcessor(exporter) },
    );
    base = server.url;
    t = await createTenant(base, server.adminToken);
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  const spans = () => exporter.getFinishedSpans();
  const inTrace = (traceId: string) => spans().filter((s) => s.spanContext().traceId === traceId);
  /** The route span of the request answered with `requestId` (its X-Request-Id). */
  async function routeSpan(route: string, method: string) {
    let found: ReadableSpan | undefined;
    await waitFor(
      () => {
        found = spans().find(
          (s) =>
            s.kind === SpanKind.SERVER &&
            attr(s, 'http.route') === route &&
            attr(s, 'http.request.method') === method,
        );
        return found !== undefined;
      },
      5000,
      `a span for ${method} ${route}`,
    );
    return found as ReadableSpan;
  }
  /** Whether `span` descends from `ancestor` within the spans exported. */
  function descends(span: ReadableSpan, ancestor: ReadableSpan): boolean {
    const byId = new Map(spans().map((s) => [s.spanContext().spanId, s]));
    let parent = span.parentSpanContext?.spanId;
    while (parent) {
      if (parent === ancestor.spanContext().spanId) return true;
      parent = byId.get(parent)?.parentSpanContext?.spanId;
    }
    return false;
  }

  it('an event batch: the route span (method, route, status) with the group commit and its SQL under it', async () => {
    expect(activeTracer()).not.toBeNull();
    const token = await deviceToken(base, t.token, 'player-1');
    const s = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    const sessionId = String(s.body.sessionId);
    exporter.reset();
    const res = await call(base, 'POST', `/sessions/${sessionId}/Events?`, {
      token: t.token,
      json: { events: [{ id: 'e1', eventType: 'Custom', timestamp: Date.now(), custom01: 'secret-value' }] },
    });
    expect(res.status, res.text).toBe(200);

    const route = await routeSpan('/sessions/:SessionId/Events', 'POST');
    expect(route.name).toBe('POST /sessions/:SessionId/Events');
    expect(attr(route, 'http.response.status_code')).toBe(200);
    // The path without its query string.
    expect(attr(route, 'url.path')).toBe(`/sessions/${sessionId}/Events`);
    const traceId = route.spanContext().traceId;
    const commit = inTrace(traceId).find((x) => x.name === 'events group commit');
    expect(commit, 'group commit span in the request trace').toBeDefined();
    expect(descends(commit as ReadableSpan, route)).toBe(true);
    expect(attr(commit as ReadableSpan, 'liveline.batch.size')).toBe(1);
    const insert = inTrace(traceId).find(
      (x) => attr(x, 'db.operation.name') === 'INSERT' && attr(x, 'db.collection.name') === 'events',
    );
    expect(insert, 'INSERT events span in the request trace').toBeDefined();
    expect(attr(insert as ReadableSpan, 'db.system.name')).toBe(
      backend === 'postgres' ? 'postgresql' : 'sqlite',
    );
    expect(descends(insert as ReadableSpan, commit as ReadableSpan)).toBe(true);
    // No payload in any attribute: the statement text has placeholders, never values.
    for (const span of spans()) expect(JSON.stringify(span.attributes)).not.toContain('secret-value');
    // Probes make no spans.
    exporter.reset();
    expect((await call(base, 'GET', '/healthz')).status).toBe(200);
    expect((await call(base, 'GET', '/readyz')).status).toBe(200);
    await new Promise((r) => setTimeout(r, 50));
    expect(spans().filter((x) => x.kind === SpanKind.SERVER)).toEqual([]);
  });

  it('a command: the route span, the command log group commit and its transaction in one trace', async () => {
    const token = await deviceToken(base, t.token, 'player-2');
    const s = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    exporter.reset();
    const sent = await call(base, 'POST', `/sessions/${s.body.sessionId}/realtime/commands`, {
      token: t.token,
      json: { name: 'text', data: 'hello' },
    });
    expect(sent.status, sent.text).toBe(202);
    const route = await routeSpan('/sessions/:SessionId/realtime/commands', 'POST');
    expect(attr(route, 'http.response.status_code')).toBe(202);
    const commit = inTrace(route.spanContext().traceId).find((x) => x.name === 'commands group commit');
    expect(commit).toBeDefined();
    expect(descends(commit as ReadableSpan, route)).toBe(true);
    const stored = inTrace(route.spanContext().traceId).filter(
      (x) => descends(x, commit as ReadableSpan) && attr(x, 'db.system.name') !== undefined,
    );
    expect(stored.length, 'storage spans under the group commit').toBeGreaterThan(0);
  });

  it('a webhook send: a client span with host, port, attempt and status code', async () => {
    const hook = await call(base, 'POST', '/webhooks', {
      token: t.token,
      json: { url: `${receiver.url}/hook?key=receiver-secret`, types: ['session.event'] },
    });
    expect(hook.status, hook.text).toBe(201);
    const token = await deviceToken(base, t.token, 'player-3');
    const s = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    exporter.reset();
    const res = await call(base, 'POST', `/sessions/${s.body.sessionId}/Events`, {
      token,
      json: { events: [{ id: 'w1', eventType: 'Custom', timestamp: Date.now() }] },
    });
    expect(res.status).toBe(200);
    let send: ReadableSpan | undefined;
    await waitFor(
      () => {
        send = spans().find((x) => x.kind === SpanKind.CLIENT && x.name === 'POST');
        return send !== undefined;
      },
      10_000,
      'a webhook send span',
    );
    const span = send as ReadableSpan;
    const target = new URL(receiver.url);
    expect(span.attributes).toMatchObject({
      'http.request.method': 'POST',
      'server.address': target.hostname,
      'server.port': Number(target.port),
      'http.response.status_code': 200,
      'liveline.webhook.attempt': 1,
    });
    expect(JSON.stringify(span.attributes)).not.toContain('receiver-secret');
    expect(receiver.received.length).toBeGreaterThan(0);
    // The dispatcher's polls and the other jobs' statements are not traces of their own: storage
    // spans exist only under a traced request or attempt.
    const orphans = spans().filter((x) => attr(x, 'db.system.name') !== undefined && !x.parentSpanContext);
    expect(orphans.map((x) => x.name)).toEqual([]);
  });
});

describe('tracing off', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
  });
  afterAll(async () => server?.close());

  it('installs nothing: no tracer, no provider, no span recorded', async () => {
    const t = await createTenant(server.url, server.adminToken);
    expect((await call(server.url, 'GET', '/webhooks', { token: t.token })).status).toBe(200);
    expect(activeTracer()).toBeNull();
    // The API's own no-op path: nothing registered, so a span started anywhere records nothing.
    const span = trace.getTracer('check').startSpan('x');
    expect(span.isRecording()).toBe(false);
    span.end();
  });
});

describe('OTLP export (OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  const posts: { path: string; type: string; body: Buffer }[] = [];
  let collector: http.Server;
  let dataDir: string;
  beforeAll(async () => {
    collector = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        posts.push({
          path: req.url ?? '',
          type: String(req.headers['content-type']),
          body: Buffer.concat(chunks),
        });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-otlp-'));
  });
  afterAll(async () => {
    await new Promise((resolve) => collector.close(resolve));
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('a server started with the endpoint in its environment sends its spans there, flushed on shutdown', async () => {
    const { port } = collector.address() as { port: number };
    const child = await startProcess({
      LIVELINE_DATA_DIR: dataDir,
      LIVELINE_ADMIN_TOKEN: 'test-admin-token-0123456789',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_SERVICE_NAME: 'liveline-otlp-test',
    });
    try {
      const res = await call(child.url, 'GET', '/admin/v1/tenants', { token: 'test-admin-token-0123456789' });
      expect(res.status).toBe(200);
    } finally {
      child.child.kill('SIGTERM');
    }
    expect((await exitWithin(child, 15_000)).code).toBe(0);
    const traces = posts.filter((p) => p.path === '/v1/traces');
    expect(traces.length).toBeGreaterThan(0);
    expect(traces[0].type).toBe('application/x-protobuf');
    // Protobuf keeps strings as UTF-8: the service name and the route span's name are in the export.
    const all = Buffer.concat(traces.map((p) => p.body)).toString('latin1');
    expect(all).toContain('liveline-otlp-test');
    expect(all).toContain('GET /admin/v1/tenants');
  });
});
