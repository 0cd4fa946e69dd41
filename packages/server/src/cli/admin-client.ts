import fs from 'node:fs';
import path from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { CliError } from './errors.ts';

type Env = Record<string, string | undefined>;

/** Where a running server is and the operator token to talk to it with. */
export interface Connection {
  url: string;
  token: string;
}

export interface ConnectionOptions {
  url?: string;
  token?: string;
}

const REQUEST_TIMEOUT_MS = 30_000;

/** `--url`, else `LIVELINE_URL`, else the local server on `PORT` (default 8080). */
export function serverUrl(given: string | undefined, env: Env): string {
  const raw = given ?? env.LIVELINE_URL ?? `http://127.0.0.1:${env.PORT || '8080'}`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError('invalid_url', `"${raw}" is not a URL.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError('invalid_url', `"${raw}" must be an http: or https: URL.`);
  }
  return url.href.replace(/\/+$/, '');
}

/** `--token`, else `LIVELINE_ADMIN_TOKEN`, else the file the server wrote at first start. */
export function adminToken(given: string | undefined, env: Env): string {
  if (given) return given;
  if (env.LIVELINE_ADMIN_TOKEN?.trim()) return env.LIVELINE_ADMIN_TOKEN.trim();
  const file = path.resolve(env.LIVELINE_DATA_DIR?.trim() || './data', 'admin-token');
  try {
    const token = fs.readFileSync(file, 'utf8').trim();
    if (token) return token;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT')
      throw new CliError('no_admin_token', `Cannot read ${file}: ${code ?? String(err)}.`);
  }
  throw new CliError(
    'no_admin_token',
    `No operator token: pass --token, set LIVELINE_ADMIN_TOKEN, or set LIVELINE_DATA_DIR to the server's data directory (no ${file}).`,
  );
}

export function resolveConnection(options: ConnectionOptions, env: Env = process.env): Connection {
  return { url: serverUrl(options.url, env), token: adminToken(options.token, env) };
}

function networkReason(err: unknown): string {
  const cause = err instanceof Error ? (err.cause as NodeJS.ErrnoException | undefined) : undefined;
  if (cause?.code) return cause.code;
  if (cause?.message) return cause.message;
  if (err instanceof Error && err.name === 'TimeoutError')
    return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
  return err instanceof Error ? err.message : String(err);
}

/** A refused answer as a CliError: a problem document's `code` and `detail`, else the status and text. */
function refusal(status: number, statusText: string, text: string): CliError {
  let parsed: { code?: unknown; detail?: unknown } = {};
  try {
    parsed = (text ? JSON.parse(text) : {}) ?? {};
  } catch {
    parsed = {};
  }
  if (typeof parsed.code === 'string') {
    return new CliError(parsed.code, typeof parsed.detail === 'string' ? parsed.detail : `HTTP ${status}`);
  }
  return new CliError(`http_${status}`, text.trim() || statusText || 'The server refused the request.');
}

/**
 * GETs a streamed answer of the operator API (the tenant export) and pipes its body into `sink` as it
 * arrives: memory stays flat however long it is. The timeout covers the wait for the answer's
 * headers, not the transfer. A refusal becomes a CliError as in `adminRequest`; a cut transfer rejects.
 */
export async function adminDownload(
  conn: Connection,
  apiPath: string,
  sink: Writable,
  options: { end?: boolean } = {},
): Promise<void> {
  const abort = new AbortController();
  const timer = setTimeout(
    () => abort.abort(new DOMException('timed out', 'TimeoutError')),
    REQUEST_TIMEOUT_MS,
  );
  let res: Response;
  try {
    res = await fetch(conn.url + apiPath, {
      headers: { authorization: `Bearer ${conn.token}`, accept: 'application/x-ndjson, application/json' },
      signal: abort.signal,
    });
  } catch (err) {
    throw new CliError(
      'connection_failed',
      `Could not reach ${conn.url}: ${networkReason(abort.signal.reason ?? err)}.`,
    );
  } finally {
    clearTimeout(timer);
  }
  if (!res.ok) throw refusal(res.status, res.statusText, await res.text());
  if (!res.body) throw new CliError('empty_answer', 'The server sent no body.');
  try {
    await pipeline(Readable.fromWeb(res.body as WebReadableStream<Uint8Array>), sink, {
      end: options.end ?? true,
    });
  } catch (err) {
    throw new CliError('transfer_failed', `The transfer from ${conn.url} was cut: ${networkReason(err)}.`);
  }
}

/** Calls the operator API; a problem document becomes a CliError with its `code` and `detail`. */
export async function adminRequest<T>(
  conn: Connection,
  method: string,
  apiPath: string,
  body?: unknown,
): Promise<T> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${conn.token}`,
    accept: 'application/json',
  };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(conn.url + apiPath, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    throw new CliError('connection_failed', `Could not reach ${conn.url}: ${networkReason(err)}.`);
  }
  const text = await res.text();
  if (!res.ok) throw refusal(res.status, res.statusText, text);
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return parsed as T;
}
