import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { TokenError } from './auth.ts';
import {
  PRESENCE_KINDS,
  type PresenceData,
  type PresenceKind,
  TailError,
  type TailEvent,
  type TailMessage,
  type TailOptions,
  type TailTarget,
} from './tail-types.ts';

/** What `tail` needs from the client: where, how to fetch, and the bearer token. */
export interface TailConnection {
  baseUrl: string;
  fetch: typeof fetch;
  token(): Promise<string>;
  /** After a 401: forgets the token so the next `token()` fetches a fresh one; false when it cannot. */
  invalidate(): boolean;
}

const DEFAULT_RETRY_MS = 1000;
const DEFAULT_MAX_RETRY_MS = 30_000;
// The server sends a keep-alive comment every 15 s: three missed ones mean the connection is gone.
const DEFAULT_IDLE_TIMEOUT_MS = 45_000;
const presenceKinds: ReadonlySet<string> = new Set(PRESENCE_KINDS);

/** The stream's path for a target. */
export function tailPath(target: TailTarget): string {
  if ('sessionId' in target && target.sessionId !== undefined)
    return `/sessions/${encodeURIComponent(target.sessionId)}/events/stream`;
  if ('tenantCohortId' in target && target.tenantCohortId !== undefined)
    return `/cohorts/${encodeURIComponent(target.tenantCohortId)}/events/stream`;
  return '/events/stream';
}

/** One Server-Sent Event as a typed message, or null for one this client does not know. */
function toMessage(m: EventSourceMessage): TailMessage | null {
  let data: unknown;
  try {
    data = JSON.parse(m.data);
  } catch {
    return null;
  }
  if (typeof data !== 'object' || data === null) return null;
  if (m.id) {
    const event = data as TailEvent;
    return { kind: 'event', id: m.id, eventType: m.event ?? event.eventType, event };
  }
  if (m.event && presenceKinds.has(m.event)) {
    return { kind: m.event as PresenceKind, data: data as PresenceData };
  }
  return null;
}

async function problemOf(res: Response): Promise<TailError['problem']> {
  const text = await res.text().catch(() => '');
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null) return parsed as TailError['problem'];
  } catch {
    // not JSON
  }
  return { detail: text || `HTTP ${res.status}` };
}

/** Waits `ms`, or less when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Seconds of a `Retry-After` header as milliseconds, or 0. */
function retryAfterMs(res: Response): number {
  const seconds = Number(res.headers.get('retry-after'));
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0;
}

const isRefusal = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429;

/**
 * The live tail (CONTRACT §11) as an async iterator: stored events (with their cursor `id`) and
 * presence changes, in the order the server sends them. A dropped connection (network error, the
 * server ending the stream, or silence past `idleTimeoutMs`) is reopened with `Last-Event-ID` after a
 * backoff (the server's `retry:` doubled per failure up to `maxRetryMs`, with jitter), so no stored
 * event is missed or repeated; presence changes while disconnected are not replayed. It ends when
 * `signal` aborts or the loop leaves (`return()`); it throws `TailError` for a refusal (4xx other than a
 * 401 that a fresh token did not cure, 408 or 429) and `TokenError` when the credentials are refused.
 */
export async function* tail(
  conn: TailConnection,
  target: TailTarget = {},
  options: TailOptions = {},
): AsyncGenerator<TailMessage, void, undefined> {
  const url = new URL(conn.baseUrl.replace(/\/+$/, '') + tailPath(target));
  for (const type of options.eventTypes ?? []) url.searchParams.append('eventType', type);
  const outer = options.signal;
  const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const maxRetryMs = options.maxRetryMs ?? DEFAULT_MAX_RETRY_MS;
  let lastEventId = options.lastEventId;
  let retryMs = DEFAULT_RETRY_MS;
  let failures = 0;
  let refreshed = false;

  while (!outer?.aborted) {
    const local = new AbortController();
    const stop = () => local.abort(outer?.reason);
    outer?.addEventListener('abort', stop, { once: true });
    let idle: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(
        () => local.abort(new Error(`no data for ${idleTimeoutMs} ms: the connection is taken as dead`)),
        idleTimeoutMs,
      );
    };
    let error: unknown;
    let wait = 0;
    try {
      const headers: Record<string, string> = {
        accept: 'text/event-stream',
        authorization: `Bearer ${await conn.token()}`,
      };
      if (lastEventId) headers['last-event-id'] = lastEventId;
      arm();
      const res = await conn.fetch(url.href, { headers, signal: local.signal });
      if (res.status === 401 && !refreshed && conn.invalidate()) {
        // A revoked or rotated token: once with a fresh one, at once.
        refreshed = true;
        await res.body?.cancel().catch(() => {});
        continue;
      }
      if (isRefusal(res.status)) throw new TailError(res.status, await problemOf(res));
      if (!res.ok || !res.body) {
        wait = retryAfterMs(res);
        error = new Error(`HTTP ${res.status}`);
        await res.body?.cancel().catch(() => {});
      } else {
        refreshed = false;
        failures = 0;
        options.onOpen?.({ lastEventId });
        const ready: TailMessage[] = [];
        const parser = createParser({
          onEvent: (m) => {
            const message = toMessage(m);
            if (message) ready.push(message);
          },
          onRetry: (ms) => {
            if (ms > 0) retryMs = ms;
          },
        });
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            arm();
            parser.feed(value);
            while (ready.length > 0) {
              const message = ready.shift() as TailMessage;
              if (message.kind === 'event') lastEventId = message.id;
              yield message;
            }
          }
          error = new Error('the server ended the stream');
        } finally {
          reader.cancel().catch(() => {});
        }
      }
    } catch (err) {
      if (err instanceof TailError) throw err;
      if (err instanceof TokenError && isRefusal(err.status)) throw err;
      if (outer?.aborted) return;
      error = err;
    } finally {
      clearTimeout(idle);
      outer?.removeEventListener('abort', stop);
      local.abort();
    }
    failures++;
    const backoff = Math.min(maxRetryMs, retryMs * 2 ** Math.min(failures - 1, 16));
    const delayMs = Math.max(wait, Math.round(backoff * (0.75 + Math.random() * 0.25)));
    options.onReconnect?.({ attempt: failures, delayMs, lastEventId, error });
    await sleep(delayMs, outer);
  }
}
