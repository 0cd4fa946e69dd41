/**
 * The WebSocket under the realtime channel, behind a small interface: Node has no global WebSocket
 * before version 22 and a browser's cannot send an Authorization header, so how a socket is opened
 * is pluggable. The default (`nodeWebSocketConnector`) uses the `ws` package.
 */

/** How a socket ended. `status` is set when the server refused the upgrade with an HTTP answer. */
export interface SocketClose {
  code: number;
  reason: string;
  status?: number;
}

export interface SocketHandlers {
  open(): void;
  /** A text frame. Binary frames are not part of the protocol and are not passed on. */
  message(text: string): void;
  /** A protocol-level ping from the server (connectors that cannot see pings never call it). */
  ping(): void;
  /** Called once, whether the socket closed, failed to open, or was refused. */
  close(info: SocketClose): void;
}

export interface RealtimeSocket {
  /** Sends a text frame if the socket is open; returns whether it did. */
  send(text: string): boolean;
  /** Starts the closing handshake. */
  close(code: number, reason: string): void;
  /** Drops the connection at once (no closing handshake). */
  terminate(): void;
}

/** Opens a socket to `url` with the device token; events go to `handlers`. */
export type SocketConnector = (
  url: string,
  token: string,
  handlers: SocketHandlers,
) => RealtimeSocket | Promise<RealtimeSocket>;

/**
 * The default connector for Node: the `ws` package (loaded on first use, so apps that never connect
 * do not need it), the token in the `Authorization` header, server pings visible.
 */
export function nodeWebSocketConnector(options: { handshakeTimeoutMs?: number } = {}): SocketConnector {
  return async (url, token, handlers) => {
    const { default: WebSocket } = await import('ws');
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${token}` },
      handshakeTimeout: options.handshakeTimeoutMs,
    });
    let status: number | undefined;
    let finished = false;
    ws.on('open', () => handlers.open());
    ws.on('message', (data, isBinary) => {
      if (!isBinary) handlers.message(data.toString());
    });
    ws.on('ping', () => handlers.ping());
    ws.on('unexpected-response', (_request, response) => {
      status = response.statusCode;
      response.resume();
      ws.terminate();
    });
    // Every error is followed by 'close', which reports it.
    ws.on('error', () => {});
    ws.on('close', (code, reason) => {
      if (finished) return;
      finished = true;
      const info: SocketClose = { code, reason: reason.toString() };
      if (status !== undefined) {
        info.status = status;
        info.reason = `HTTP ${status}`;
      }
      handlers.close(info);
    });
    return {
      send(text) {
        if (ws.readyState !== WebSocket.OPEN) return false;
        ws.send(text);
        return true;
      },
      close: (code, reason) => ws.close(code, reason),
      terminate: () => ws.terminate(),
    };
  };
}

class MissingWebSocket {
  constructor() {
    throw new TypeError('This runtime has no global WebSocket: pass a WebSocket class to the connector.');
  }
}

/** The parts of the standard (WHATWG) WebSocket the connector uses. */
interface StandardWebSocket {
  readonly readyState: number;
  onopen: (() => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: (() => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

/**
 * A connector for runtimes with a standard WebSocket (browsers, Node 22+): pass the class, or nothing
 * for `globalThis.WebSocket`. Such a socket cannot send headers, so the token travels as
 * `?access_token=` (the server accepts it there for this reason). Server pings are invisible to it.
 */
export function standardWebSocketConnector(
  WebSocketClass: new (url: string) => object = (globalThis as { WebSocket?: new (url: string) => object })
    .WebSocket ?? MissingWebSocket,
): SocketConnector {
  return (url, token, handlers) => {
    const withToken = new URL(url);
    withToken.searchParams.set('access_token', token);
    // The DOM's and the `ws` package's typings of the same API differ in detail: used structurally.
    const ws = new WebSocketClass(withToken.href) as StandardWebSocket;
    let finished = false;
    ws.onopen = () => handlers.open();
    ws.onmessage = (event) => {
      if (typeof event.data === 'string') handlers.message(event.data);
    };
    ws.onerror = () => {};
    ws.onclose = (event) => {
      if (finished) return;
      finished = true;
      handlers.close({ code: event.code, reason: event.reason });
    };
    return {
      send(text) {
        if (ws.readyState !== 1) return false;
        ws.send(text);
        return true;
      },
      close: (code, reason) => ws.close(code, reason),
      terminate() {
        ws.close();
        if (!finished) {
          finished = true;
          handlers.close({ code: 1006, reason: 'terminated' });
        }
      },
    };
  };
}
