import type { FastifyRequest } from 'fastify';
import { problems } from './problem.ts';

/**
 * The server's own address in the URLs it hands out (a device's `realtimeUrl`, a challenge's
 * `imageUrl`). With `LIVELINE_PUBLIC_URL` set, that URL and nothing else: the request's `Host` (or
 * `X-Forwarded-Host`) never reaches an answer. Unset (local development), the URL the caller reached,
 * with a `Host` that must at least be a host name or address with an optional port.
 */

/** Checks `LIVELINE_PUBLIC_URL`; returns why it is unusable, or null. */
export function publicUrlProblem(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `must be an absolute URL such as https://liveline.example.com, got "${raw}"`;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return `must be an http: or https: URL, got "${raw}"`;
  if (url.username || url.password) return 'must not contain credentials';
  if (url.search || url.hash || raw.includes('?') || raw.includes('#'))
    return 'must not have a query string or fragment';
  return null;
}

/** A host name, IPv4 address or bracketed IPv6 address, with an optional port: nothing else. */
const AUTHORITY = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?)(?::\d{1,5})?$/;

/** `LIVELINE_PUBLIC_URL` without its trailing slashes, or the URL the request reached (http(s)). */
export function serverBaseUrl(publicUrl: string | null, request: FastifyRequest): string {
  if (publicUrl) return publicUrl.replace(/\/+$/, '');
  const host = request.host;
  if (host.length > 255 || !AUTHORITY.test(host)) {
    throw problems.validation('The Host header is not a host name or address with an optional port.', [
      { path: 'headers.host', message: 'must be a host name or address, with an optional port' },
    ]);
  }
  return `${request.protocol === 'https' ? 'https' : 'http'}://${host}`;
}

/** The same base as a WebSocket URL: `ws://` for `http://`, `wss://` for `https://`. */
export function socketBaseUrl(publicUrl: string | null, request: FastifyRequest): string {
  return serverBaseUrl(publicUrl, request).replace(/^http/, 'ws');
}

/** Addresses only this machine can reach: listening there needs no public URL. */
function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(?:\.\d{1,3}){3}$/.test(h);
}

/**
 * The startup warning for a deployment that hands out URLs built from request headers: no
 * `LIVELINE_PUBLIC_URL` while `NODE_ENV=production` or listening on an address other machines reach.
 */
export function publicUrlWarning(config: {
  publicUrl: string | null;
  host: string;
  nodeEnv: string | null;
}): string | null {
  if (config.publicUrl) return null;
  const production = config.nodeEnv === 'production';
  if (!production && isLoopback(config.host)) return null;
  const why = production ? 'NODE_ENV is production' : `the server listens on ${config.host}`;
  return (
    `LIVELINE_PUBLIC_URL is not set and ${why}: device realtimeUrls and challenge imageUrls are built ` +
    'from the Host header of each request, which any client can set. Set LIVELINE_PUBLIC_URL to the ' +
    'URL clients reach this server at (see docs/configuration.md).'
  );
}
