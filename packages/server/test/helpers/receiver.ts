import http from 'node:http';
import type net from 'node:net';

/** One webhook request as a receiver saw it. */
export interface Received {
  id: string;
  timestamp: string;
  signature: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

/** What the receiver does with a request: answer with a status, never answer, or drop the connection. */
export type Behaviour = (r: Received) => number | 'hang' | 'drop';

/**
 * A real local HTTP receiver for webhook tests. Records every request; answers per `behaviour`
 * (200 by default). `stop()` takes it down (connections refused), `restart()` brings it back on the
 * same port.
 */
export async function startReceiver(options: { behaviour?: Behaviour; delayMs?: number } = {}) {
  const received: Received[] = [];
  let behaviour: Behaviour = options.behaviour ?? (() => 200);
  const sockets = new Set<net.Socket>();
  let server: http.Server | null = null;
  let port = 0;

  const handler: http.RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      const r: Received = {
        id: headers['webhook-id'] ?? '',
        timestamp: headers['webhook-timestamp'] ?? '',
        signature: headers['webhook-signature'] ?? '',
        headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      received.push(r);
      const answer = behaviour(r);
      if (answer === 'hang') return;
      if (answer === 'drop') {
        req.socket.destroy();
        return;
      }
      const send = () => res.writeHead(answer, { 'content-type': 'text/plain' }).end('ok');
      if (options.delayMs) setTimeout(send, options.delayMs);
      else send();
    });
  };

  async function listen(onPort: number) {
    const s = http.createServer(handler);
    s.keepAliveTimeout = 60_000;
    s.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(onPort, '127.0.0.1', () => resolve());
    });
    const address = s.address();
    port = typeof address === 'object' && address ? address.port : onPort;
    server = s;
  }

  async function stop() {
    const s = server;
    server = null;
    if (!s) return;
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  await listen(0);
  return {
    received,
    get port() {
      return port;
    },
    get url() {
      return `http://127.0.0.1:${port}/hooks`;
    },
    setBehaviour(b: Behaviour) {
      behaviour = b;
    },
    stop,
    restart: () => listen(port),
    close: stop,
    /** The bodies received, parsed. */
    messages() {
      return received.map(
        (r) => JSON.parse(r.body) as { type: string; timestamp: string; data: Record<string, unknown> },
      );
    },
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** Polls `check` until it returns true, failing after `timeoutMs` with `what`. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  if (await check()) return;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
