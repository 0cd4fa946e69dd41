import { LivelineError } from './http.ts';

const HTTP_SCHEME: Record<string, string> = {
  'ws:': 'http:',
  'wss:': 'https:',
  'http:': 'http:',
  'https:': 'https:',
};

/** The HTTP origin of a WebSocket URL (`ws:` as `http:`, `wss:` as `https:`), or null if it is not one. */
function httpOrigin(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  const scheme = HTTP_SCHEME[url.protocol];
  if (!scheme) return null;
  // Default ports match across the pairs (80 for ws/http, 443 for wss/https), so the origin compares.
  return `${scheme}//${url.host}`;
}

/**
 * The SDK opens a realtime socket only at the origin of its `baseUrl` (scheme mapped: `ws`↔`http`,
 * `wss`↔`https`). A `realtimeUrl` naming another host, port or a plaintext scheme (say, built by a
 * misconfigured server from a forged `Host` header) is refused: the device token is never sent there.
 */
export function assertSocketOrigin(baseUrl: string, realtimeUrl: string): void {
  const expected = httpOrigin(baseUrl);
  const actual = httpOrigin(realtimeUrl);
  if (expected !== null && actual === expected) return;
  throw new LivelineError({
    status: 0,
    code: 'realtime_origin_mismatch',
    detail:
      `The session's realtimeUrl (${actual ?? realtimeUrl}) is not at the origin of the SDK's baseUrl ` +
      `(${expected ?? baseUrl}); the SDK does not connect to it. Check the server's LIVELINE_PUBLIC_URL.`,
  });
}
