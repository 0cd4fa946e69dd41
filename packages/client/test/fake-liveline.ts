import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the fake server saw it. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  /** performance.now() on arrival. */
  at: number;
}

/**
 * What to do with one upcoming request instead of answering normally:
 * `pass` answers normally, `drop` destroys the connection before handling it, `storeThenDrop` handles
 * it (events are stored) and then destroys the connection instead of answering.
 */
export type Scripted =
  | 'pass'
  | 'drop'
  | 'storeThenDrop'
  | { status: number; code?: string; headers?: Record<string, string>; body?: unknown };

interface StoredSession {
  sessionId: string;
  tenantCohortId: string | null;
  device: unknown;
  startedAt: number;
  endedAt: number | null;
  eventIds: Set<string>;
  events: { id: string }[];
}

/**
 * Plays liveline's device endpoints over real HTTP: it starts sessions, stores events with id dedupe
 * and ends sessions, recording every request. It can be scripted to fail, be stopped and restarted on
 * the same port, and checks the bearer token.
 */
export class FakeLiveline {
  token = 'device-token';
  readonly requests: RecordedRequest[] = [];
  readonly sessions = new Map<string, StoredSession>();
  private readonly script: Scripted[] = [];
  private server: http.Server | undefined;
  private port = 0;

  static async start(): Promise<FakeLiveline> {
    const fake = new FakeLiveline();
    await fake.listen();
    return fake;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Scripts the next requests, in order. */
  failNext(...responses: Scripted[]): void {
    this.script.push(...responses);
  }

  eventRequests(): RecordedRequest[] {
    return this.requests.filter((request) => request.path.endsWith('/events'));
  }

  /** Event ids of each events request, as sent. */
  batches(): string[][] {
    return this.eventRequests().map((request) => eventIdsOf(request.body));
  }

  /** Ids of the events stored for a session, in arrival order. */
  storedIds(sessionId: string): string[] {
    return this.sessions.get(sessionId)?.events.map((event) => event.id) ?? [];
  }

  /** Stops listening and cuts every open connection, like a crashed server. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  /** Listens again on the same port, with the same state. */
  async restart(): Promise<void> {
    await this.listen();
  }

  private async listen(): Promise<void> {
    const server = http.createServer((req, res) => {
      this.handle(req, res).catch((error: unknown) => {
        res.destroy(error instanceof Error ? error : new Error(String(error)));
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const path = req.url ?? '/';
    this.requests.push({
      method: req.method ?? 'GET',
      path,
      headers: req.headers,
      body: text ? JSON.parse(text) : undefined,
      at: performance.now(),
    });

    const scripted = this.script.shift() ?? 'pass';
    if (scripted === 'drop') {
      req.socket.destroy();
      return;
    }
    if (typeof scripted === 'object') {
      const code = scripted.code ?? `http_${scripted.status}`;
      const body = scripted.body ?? problem(scripted.status, code);
      sendJson(res, scripted.status, body, {
        'content-type': 'application/problem+json',
        ...scripted.headers,
      });
      return;
    }

    const [status, body] = this.route(req.method ?? 'GET', path, req.headers.authorization, text);
    if (scripted === 'storeThenDrop') {
      req.socket.destroy();
      return;
    }
    sendJson(res, status, body, status >= 400 ? { 'content-type': 'application/problem+json' } : {});
  }

  private route(
    method: string,
    path: string,
    authorization: string | undefined,
    text: string,
  ): [number, unknown] {
    if (authorization !== `Bearer ${this.token}`) return [401, problem(401, 'unauthorized')];
    const body: Record<string, unknown> = text ? JSON.parse(text) : {};
    if (method === 'POST' && path === '/client/v1/sessions') {
      const sessionId = randomUUID();
      this.sessions.set(sessionId, {
        sessionId,
        tenantCohortId: typeof body.tenantCohortId === 'string' ? body.tenantCohortId : null,
        device: body.device ?? {},
        startedAt: Date.now(),
        endedAt: null,
        eventIds: new Set(),
        events: [],
      });
      const realtimeUrl = `ws://127.0.0.1:${this.port}/client/v1/sessions/${sessionId}/realtime`;
      return [201, { sessionId, realtimeUrl, heartbeatIntervalMs: 15_000 }];
    }
    const match = /^\/client\/v1\/sessions\/([^/]+)\/(events|end)$/.exec(path);
    const session = match ? this.sessions.get(decodeURIComponent(match[1])) : undefined;
    if (method !== 'POST' || !match || !session) return [404, problem(404, 'not_found')];
    if (match[2] === 'end') {
      session.endedAt ??= Date.now();
      return [200, sessionObject(session)];
    }
    const events = body.events;
    if (!Array.isArray(events) || events.length < 1 || events.length > 1000) {
      return [
        400,
        problem(400, 'validation_failed', [{ path: 'events', message: 'must hold 1–1000 events' }]),
      ];
    }
    let duplicates = 0;
    for (const event of events as { id: string }[]) {
      if (session.eventIds.has(event.id)) {
        duplicates++;
        continue;
      }
      session.eventIds.add(event.id);
      session.events.push(event);
    }
    return [200, { accepted: events.length - duplicates, duplicates }];
  }
}

export function eventIdsOf(body: unknown): string[] {
  return ((body as { events: { id: string }[] }).events ?? []).map((event) => event.id);
}

function problem(status: number, code: string, errors?: { path: string; message: string }[]) {
  return {
    type: 'about:blank',
    title: http.STATUS_CODES[status] ?? 'Error',
    status,
    detail: `Scripted ${code}.`,
    code,
    ...(errors ? { errors } : {}),
  };
}

function sessionObject(session: StoredSession) {
  return {
    sessionId: session.sessionId,
    tenantCohortId: session.tenantCohortId,
    playerId: 'player-1',
    device: session.device,
    status: session.endedAt === null ? 'live' : 'ended',
    connected: false,
    startedAt: session.startedAt,
    lastSeenAt: Date.now(),
    endedAt: session.endedAt,
    stream: { state: 'idle', streamingSessionId: null, resolution: null, aspectratio: null, startedAt: null },
    recording: { state: 'idle', recordingId: null, startedAt: null },
  };
}

function sendJson(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string>,
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(text);
}
