import WebSocket from 'ws';

export type Message = Record<string, unknown> & { type: string };

/**
 * A raw device socket for tests: connects, collects every message, and lets a test wait for the
 * next message matching a predicate.
 */
export class TestSocket {
  readonly messages: Message[] = [];
  private waiters: { match: (m: Message) => boolean; resolve: (m: Message) => void }[] = [];
  closed: { code: number; reason: string } | null = null;
  private readonly closedPromise: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString()) as Message;
      this.messages.push(message);
      const i = this.waiters.findIndex((w) => w.match(message));
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(message);
    });
    this.closedPromise = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        this.closed = { code, reason: reason.toString() };
        resolve(this.closed);
      }),
    );
  }

  /** Opens the socket; resolves when it is open (or rejects with the HTTP status of a refused upgrade). */
  static open(
    base: string,
    sessionId: string,
    token: string,
    viaQuery = false,
    options: WebSocket.ClientOptions = {},
  ) {
    const url = `${base.replace(/^http/, 'ws')}/client/v1/sessions/${sessionId}/realtime${viaQuery ? `?access_token=${token}` : ''}`;
    const ws = new WebSocket(
      url,
      viaQuery ? options : { ...options, headers: { authorization: `Bearer ${token}` } },
    );
    const socket = new TestSocket(ws);
    return new Promise<TestSocket>((resolve, reject) => {
      ws.once('open', () => resolve(socket));
      ws.once('unexpected-response', (req, res) => {
        req.destroy();
        reject(new Error(`HTTP ${res.statusCode}`));
      });
      ws.once('error', reject);
    });
  }

  /** Waits for a message already received or still to come. */
  next(match: (m: Message) => boolean = () => true, timeoutMs = 5000): Promise<Message> {
    const seen = this.messages.find(match);
    if (seen) {
      this.messages.splice(this.messages.indexOf(seen), 1);
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting for a message')), timeoutMs);
      this.waiters.push({
        match,
        resolve: (m) => {
          clearTimeout(timer);
          this.messages.splice(this.messages.indexOf(m), 1);
          resolve(m);
        },
      });
    });
  }

  ofType(type: string, timeoutMs?: number) {
    return this.next((m) => m.type === type, timeoutMs);
  }

  send(message: unknown) {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  waitClosed() {
    return this.closedPromise;
  }

  close() {
    this.ws.close();
    return this.closedPromise;
  }
}
