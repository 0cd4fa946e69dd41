import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { Agent, buildConnector, request } from 'undici';
import { activeTracer, inSpan } from '../../tracing.ts';
import {
  BlockedAddressError,
  classifyAddress,
  connectLookup,
  type Resolve,
  systemResolve,
} from './address-guard.ts';

export interface SenderOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  /** Keep-alive connections per receiver origin. */
  connectionsPerOrigin: number;
  /** How receiver names are resolved at connect time (default: the system's `dns.lookup`). */
  resolve?: Resolve;
  /** Told of every refused target, with the address: for the server log, never the tenant. */
  onRefused?: (refusal: BlockedAddressError) => void;
}

/** What one attempt came to. `ok` is a 2xx answer within the timeout. */
export interface AttemptOutcome {
  ok: boolean;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
}

const MAX_RESPONSE_BYTES = 64 * 1024;

/** The refusal inside an attempt's error, if that is what it was (undici wraps the socket's error as `cause`). */
function refusalOf(err: unknown): BlockedAddressError | null {
  const seen = new Set<unknown>();
  let e: unknown = err;
  while (e instanceof Error && !seen.has(e)) {
    if (e instanceof BlockedAddressError) return e;
    seen.add(e);
    e = e.cause;
  }
  return null;
}

function describeError(err: unknown, timedOut: boolean): string {
  if (timedOut) return 'timed out';
  // The tenant reads this in the delivery log: the refusal's own message, without the address.
  const refusal = refusalOf(err);
  if (refusal) return `refused: ${refusal.message}`;
  const seen = new Set<unknown>();
  let e: unknown = err;
  // undici wraps the socket's error as `cause`: the innermost one says what happened.
  while (e instanceof Error && e.cause && !seen.has(e.cause)) {
    seen.add(e);
    e = e.cause;
  }
  const code = (e as { code?: unknown } | null)?.code;
  const message = e instanceof Error ? e.message : String(e);
  return (typeof code === 'string' ? `${code}: ${message}` : message).slice(0, 500);
}

/**
 * HTTP for webhook attempts: undici with keep-alive, an overall timeout per attempt, no redirects
 * followed, and the SSRF guard at connect time (a literal address is checked as it is; a name is
 * checked on every resolution, so DNS rebinding cannot reach an internal address).
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(private readonly options: SenderOptions) {
    // Names are resolved (and, unless private targets are allowed, checked) by our lookup, which hands
    // the checked addresses to the socket: what was checked is what is connected to.
    const base = buildConnector({
      timeout: options.timeoutMs,
      lookup: connectLookup(options.resolve ?? systemResolve, !options.allowPrivate),
    });
    const connect: buildConnector.connector = (opts, callback) => {
      if (!options.allowPrivate) {
        const host = opts.hostname.replace(/^\[|\]$/g, '');
        const cls = classifyAddress(host);
        if (cls !== null && cls !== 'public') {
          callback(new BlockedAddressError(host, host, cls), null);
          return;
        }
      }
      base(opts, callback);
    };
    this.agent = new Agent({
      connect,
      connections: options.connectionsPerOrigin,
      keepAliveTimeout: 30_000,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
  }

  /**
   * One attempt (`attempt`: 1 for the first). While tracing, in a client span with the receiver's
   * host and port, the attempt and the status code; never the URL's path or query (a receiver's
   * secret often lives there), the headers or the payload.
   */
  send(
    url: string,
    headers: Record<string, string>,
    body: string,
    stop: AbortSignal,
    attempt = 1,
  ): Promise<AttemptOutcome> {
    const tracer = activeTracer();
    if (!tracer) return this.attempt(url, headers, body, stop);
    const target = new URL(url);
    const attributes = {
      'http.request.method': 'POST',
      'server.address': target.hostname,
      'server.port': Number(target.port) || (target.protocol === 'https:' ? 443 : 80),
      'url.scheme': target.protocol.slice(0, -1),
      'liveline.webhook.attempt': attempt,
      ...(attempt > 1 ? { 'http.request.resend_count': attempt - 1 } : {}),
    };
    return inSpan(tracer, 'POST', { kind: SpanKind.CLIENT, attributes }, async (span) => {
      const outcome = await this.attempt(url, headers, body, stop);
      if (outcome.statusCode !== null) span.setAttribute('http.response.status_code', outcome.statusCode);
      if (!outcome.ok) {
        span.setAttribute(
          'error.type',
          outcome.statusCode === null ? 'no_response' : String(outcome.statusCode),
        );
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      return outcome;
    });
  }

  private async attempt(
    url: string,
    headers: Record<string, string>,
    body: string,
    stop: AbortSignal,
  ): Promise<AttemptOutcome> {
    // One controller, one timer cleared with the attempt, one listener removed with it: cheaper than
    // AbortSignal.timeout + AbortSignal.any per attempt (~5% of the main thread while draining), whose
    // timers outlive the attempt.
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.options.timeoutMs);
    const onStop = () => controller.abort(stop.reason);
    if (stop.aborted) onStop();
    else stop.addEventListener('abort', onStop, { once: true });
    const signal = controller.signal;
    const started = performance.now();
    const latency = () => Math.round(performance.now() - started);
    try {
      const res = await request(url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'liveline-webhooks/0.1',
          ...headers,
        },
        body,
        signal,
      });
      const latencyMs = latency();
      // The answer is in; its body does not matter, but reading it keeps the connection reusable.
      await res.body.dump({ limit: MAX_RESPONSE_BYTES }).catch(() => {});
      const ok = res.statusCode >= 200 && res.statusCode < 300;
      const error = ok
        ? null
        : res.statusCode >= 300 && res.statusCode < 400
          ? 'redirects are not followed'
          : `HTTP ${res.statusCode}`;
      return { ok, statusCode: res.statusCode, latencyMs, error };
    } catch (err) {
      const refusal = refusalOf(err);
      if (refusal) this.options.onRefused?.(refusal);
      return {
        ok: false,
        statusCode: null,
        latencyMs: latency(),
        error: describeError(err, timedOut),
      };
    } finally {
      clearTimeout(timer);
      stop.removeEventListener('abort', onStop);
    }
  }

  async close() {
    await this.agent.destroy();
  }
}
