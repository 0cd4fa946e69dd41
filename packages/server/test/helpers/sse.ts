import http from 'node:http';
import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** One message of a live tail as a reader gets it. */
export interface TailMessage {
  id: string | undefined;
  event: string;
  data: Record<string, unknown>;
}

/**
 * A live tail reader for tests: a real HTTP request held open, its Server-Sent Events parsed by
 * eventsource-parser as they arrive. `paused` stops reading the socket (TCP pushes back on the server).
 */
export class SseReader {
  readonly messages: TailMessage[] = [];
  readonly comments: string[] = [];
  status = 0;
  headers: http.IncomingHttpHeaders = {};
  /** Set when the server ended or cut the stream. */
  ended = false;
  private waiters: (() => void)[] = [];
  private res: http.IncomingMessage | null = null;
  private readonly req: http.ClientRequest;
  private readonly opened: Promise<void>;

  constructor(url: string, token: string, lastEventId?: string) {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'text/event-stream' };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    const parser = createParser({
      onEvent: (m: EventSourceMessage) => {
        this.messages.push({ id: m.id, event: m.event ?? 'message', data: JSON.parse(m.data) });
        this.wake();
      },
      onComment: (c) => {
        this.comments.push(c);
        this.wake();
      },
    });
    this.req = http.get(url, { headers, agent: false });
    this.opened = new Promise((resolve, reject) => {
      this.req.once('error', (err) => {
        this.ended = true;
        this.wake();
        if (!this.res) reject(err);
      });
      this.req.once('response', (res) => {
        this.res = res;
        this.status = res.statusCode ?? 0;
        this.headers = res.headers;
        res.setEncoding('utf8');
        let body = '';
        res.on('data', (chunk: string) => {
          if (this.status === 200) parser.feed(chunk);
          else body += chunk;
        });
        const end = () => {
          this.ended = true;
          if (this.status !== 200) this.errorBody = body;
          this.wake();
        };
        res.once('end', end);
        res.once('close', end);
        res.once('error', end);
        resolve();
      });
    });
  }

  /** The body of a refusal (a problem document), once it has ended. */
  errorBody = '';

  /** Resolves once the answer's head has arrived. */
  async ready(): Promise<this> {
    await this.opened;
    return this;
  }

  /** Waits until `done()` holds (checked on every message), or fails after `timeoutMs`. */
  async until(done: () => boolean, timeoutMs = 10_000, what = 'the tail'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what} (${this.messages.length} messages)`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Events only (stored events carry an id; presence does not). */
  events() {
    return this.messages.filter((m) => m.id !== undefined);
  }

  presence() {
    return this.messages.filter((m) => m.id === undefined);
  }

  lastId(): string | undefined {
    return this.events().at(-1)?.id;
  }

  pause() {
    this.res?.pause();
  }

  resume() {
    this.res?.resume();
  }

  close() {
    this.req.destroy();
  }

  private wake() {
    for (const w of this.waiters.splice(0)) w();
  }
}

export function openTail(base: string, path: string, token: string, lastEventId?: string) {
  return new SseReader(base + path, token, lastEventId).ready();
}
