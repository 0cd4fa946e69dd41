import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, beforeEach } from 'vitest';
import { type WebSocket, WebSocketServer } from 'ws';
import { LivelineDevice, type LivelineDeviceOptions } from '../src/index.ts';

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

/** A message a device sent over its socket. */
export type SocketMessage = Record<string, unknown> & { type: string };

/** One realtime connection, as the fake server saw it. */
export interface FakeConnection {
  sessionId: string;
  ws: WebSocket;
  headers: http.IncomingHttpHeaders;
  url: string;
  /** Every message the device sent, in order. */
  received: SocketMessage[];
  /** performance.now() of each heartbeat. */
  heartbeats: number[];
  closed: { code: number; reason: string } | null;
}

/**
 * What to do with one upcoming WebSocket upgrade instead of accepting it normally: refuse it with an
 * HTTP status, accept it and close at once with a close code (before any welcome), or cut it.
 */
export type ScriptedUpgrade = { status: number } | { close: number } | 'drop';

interface StoredSession {
  sessionId: string;
  tenantCohortId: string | null;
  device: unknown;
  startedAt: number;
  endedAt: number | null;
  endReason: string | null;
  eventIds: Set<string>;
  events: { id: string }[];
}

/**
 * Plays liveline's device endpoints over real HTTP: it starts sessions, validates event batches like the
 * real server (all-or-nothing, 400 with paths such as `events[3].timestamp`), stores events with id
 * dedupe and ends sessions, recording every request. It can be scripted to fail, be stopped and
 * restarted on the same port, and checks the bearer token.
 */
export class FakeLiveline {
  token = 'device-token';
  /** How many `errors` a refused batch reports at most; the real server reports 50. */
  maxReportedErrors = 50;
  readonly requests: RecordedRequest[] = [];
  readonly sessions = new Map<string, StoredSession>();
  /** Sent in the session's answer and in `welcome`. */
  heartbeatIntervalMs = 15_000;
  /** Whether `events` messages get an answer; when false the device's wait times out. */
  answerSocketEvents = true;
  /** Whether accepted connections are welcomed. */
  autoWelcome = true;
  /** What `realtimeUrl`s start with instead of this server's own `ws://` address (a misconfigured server). */
  realtimeBase: string | null = null;
  readonly connections: FakeConnection[] = [];
  /** performance.now() of every upgrade request, refused or not. */
  readonly upgradeAttempts: number[] = [];
  /** Stream and recording state per session, for the app-initiated routes. */
  readonly streams = new Map<string, { streamingSessionId: string | null; recordingId: string | null }>();
  private readonly script: Scripted[] = [];
  private readonly upgradeScript: ScriptedUpgrade[] = [];
  private readonly wss = new WebSocketServer({ noServer: true });
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

  /** Scripts the next WebSocket upgrades, in order. */
  scriptUpgrades(...upgrades: ScriptedUpgrade[]): void {
    this.upgradeScript.push(...upgrades);
  }

  /** The session's newest connection that is still open. */
  connection(sessionId: string): FakeConnection | undefined {
    return this.connections.findLast((c) => c.sessionId === sessionId && c.closed === null);
  }

  /** Waits until `count` connections have been accepted (in total), and returns the newest. */
  async waitForConnection(count = 1, timeoutMs = 5000): Promise<FakeConnection> {
    const deadline = Date.now() + timeoutMs;
    while (this.connections.length < count) {
      if (Date.now() > deadline) throw new Error(`only ${this.connections.length} connections`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return this.connections[count - 1];
  }

  /** Writes a `command` message to the session's open connection; returns its id. */
  sendCommand(
    sessionId: string,
    command: { name: string; data?: unknown; commandId?: string; issuedAt?: number },
  ): string {
    const connection = this.connection(sessionId);
    if (!connection) throw new Error(`session ${sessionId} has no open connection`);
    const commandId = command.commandId ?? randomUUID();
    connection.ws.send(
      JSON.stringify({
        type: 'command',
        commandId,
        name: command.name,
        data: command.data ?? {},
        issuedAt: command.issuedAt ?? Date.now(),
      }),
    );
    return commandId;
  }

  /** Every message of a type that the devices sent over any connection, in order. */
  socketMessages(type: string): SocketMessage[] {
    return this.connections.flatMap((c) => c.received.filter((m) => m.type === type));
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
    for (const client of this.wss.clients) client.terminate();
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
    server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) =>
      this.upgrade(req, socket, head),
    );
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

  /** Plays the realtime route: checks the token, then welcomes like the real server (or as scripted). */
  private upgrade(req: http.IncomingMessage, socket: Socket, head: Buffer): void {
    this.upgradeAttempts.push(performance.now());
    const url = new URL(req.url ?? '/', 'http://fake');
    const match = /^\/client\/v1\/sessions\/([^/]+)\/realtime$/.exec(url.pathname);
    const token = req.headers.authorization ?? `Bearer ${url.searchParams.get('access_token')}`;
    const scripted = this.upgradeScript.shift();
    const refusal =
      typeof scripted === 'object' && 'status' in scripted
        ? scripted.status
        : !match
          ? 404
          : token !== `Bearer ${this.token}`
            ? 401
            : null;
    if (scripted === 'drop') {
      socket.destroy();
      return;
    }
    if (refusal !== null || !match) {
      const status = refusal ?? 404;
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\n\r\n`);
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const sessionId = decodeURIComponent(match[1]);
      const connection: FakeConnection = {
        sessionId,
        ws,
        headers: req.headers,
        url: req.url ?? '',
        received: [],
        heartbeats: [],
        closed: null,
      };
      this.connections.push(connection);
      ws.on('close', (code, reason) => {
        connection.closed = { code, reason: reason.toString() };
      });
      const session = this.sessions.get(sessionId);
      if (scripted && 'close' in scripted) return ws.close(scripted.close, 'scripted');
      if (!session) return ws.close(4004, 'no such session');
      if (session.endedAt !== null) return ws.close(4009, 'the session has ended');
      // One connection per session, like the real server: the older one is replaced.
      for (const other of this.connections) {
        if (other !== connection && other.sessionId === sessionId && other.closed === null) {
          other.ws.close(4001, 'replaced by a newer connection');
        }
      }
      ws.on('message', (data) => this.receive(connection, session, data.toString()));
      if (this.autoWelcome) {
        ws.send(
          JSON.stringify({ type: 'welcome', sessionId, heartbeatIntervalMs: this.heartbeatIntervalMs }),
        );
      }
    });
  }

  private receive(connection: FakeConnection, session: StoredSession, text: string): void {
    const message = JSON.parse(text) as SocketMessage;
    connection.received.push(message);
    if (message.type === 'heartbeat') connection.heartbeats.push(performance.now());
    if (message.type !== 'events' || !this.answerSocketEvents) return;
    const [status, answer] = this.ingest(session, { events: message.events });
    const requestId = message.requestId;
    const reply =
      status === 200
        ? { type: 'events.ack', ...(answer as object), requestId }
        : {
            type: 'error',
            code: (answer as { code: string }).code,
            message: (answer as { detail: string }).detail,
            errors: (answer as { errors?: unknown }).errors,
            requestId,
          };
    connection.ws.send(JSON.stringify(reply));
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
        endReason: null,
        eventIds: new Set(),
        events: [],
      });
      const realtimeUrl = `${this.realtimeBase ?? `ws://127.0.0.1:${this.port}`}/client/v1/sessions/${sessionId}/realtime`;
      return [201, { sessionId, realtimeUrl, heartbeatIntervalMs: this.heartbeatIntervalMs }];
    }
    const match =
      /^\/client\/v1\/sessions\/([^/]+)\/(events|end|stream\/start|stream\/stop|record\/start|record\/stop)$/.exec(
        path,
      );
    const session = match ? this.sessions.get(decodeURIComponent(match[1])) : undefined;
    if (method !== 'POST' || !match || !session) return [404, problem(404, 'not_found')];
    if (match[2] === 'end') {
      if (session.endedAt === null) {
        session.endedAt = Date.now();
        session.endReason = 'device';
      }
      return [200, sessionObject(session)];
    }
    if (match[2] !== 'events') return this.streamRoute(session.sessionId, match[2]);
    return this.ingest(session, body);
  }

  /** The app-initiated stream and recording routes, with their 409s. */
  private streamRoute(sessionId: string, action: string): [number, unknown] {
    const state = this.streams.get(sessionId) ?? { streamingSessionId: null, recordingId: null };
    this.streams.set(sessionId, state);
    const conflict = (code: string): [number, unknown] => [409, problem(409, code)];
    switch (action) {
      case 'stream/start':
        if (state.streamingSessionId) return conflict('already_streaming');
        state.streamingSessionId = randomUUID();
        return [200, { streamingSessionId: state.streamingSessionId }];
      case 'stream/stop': {
        const streamingSessionId = state.streamingSessionId;
        if (!streamingSessionId) return conflict('not_streaming');
        state.streamingSessionId = null;
        state.recordingId = null;
        return [200, { streamingSessionId }];
      }
      case 'record/start':
        if (!state.streamingSessionId) return conflict('not_streaming');
        if (state.recordingId) return conflict('already_recording');
        state.recordingId = randomUUID();
        return [200, { recordingId: state.recordingId }];
      default: {
        const recordingId = state.recordingId;
        if (!recordingId) return conflict('not_recording');
        state.recordingId = null;
        return [200, { recordingId }];
      }
    }
  }

  /** Validates and stores a batch like the real server: [status, answer]. */
  private ingest(session: StoredSession, body: Record<string, unknown>): [number, unknown] {
    const checked = validateBatch(body, session.sessionId, this.maxReportedErrors);
    if (checked.errors.length > 0) {
      const detail = `The event batch was rejected, nothing was stored: ${checked.errors[0].path} ${checked.errors[0].message}.`;
      return [400, { ...problem(400, checked.code, checked.errors), detail }];
    }
    const events = body.events as { id: string }[];
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
    endReason: session.endReason,
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

type Check = (value: unknown) => string | undefined;

const text =
  (max = 1024, min = 0): Check =>
  (value) => {
    if (typeof value !== 'string') return 'must be string';
    if (value.length > max) return `must NOT have more than ${max} characters`;
    if (value.length < min) return `must NOT have fewer than ${min} characters`;
    return undefined;
  };

const numeric =
  (options: { min?: number; max?: number; integer?: boolean; exclusiveMin?: boolean } = {}): Check =>
  (value) => {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      return options.integer ? 'must be integer' : 'must be number';
    }
    if (options.integer && !Number.isInteger(value)) return 'must be integer';
    if (options.min !== undefined && (options.exclusiveMin ? value <= options.min : value < options.min)) {
      return `must be ${options.exclusiveMin ? '>' : '>='} ${options.min}`;
    }
    if (options.max !== undefined && value > options.max) return `must be <= ${options.max}`;
    return undefined;
  };

const oneOf =
  (...allowed: string[]): Check =>
  (value) =>
    typeof value === 'string' && allowed.includes(value)
      ? undefined
      : `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}`;

/** Each client event type's own fields (CONTRACT §5): required ones, and a check per field. */
const EVENT_TYPES: Record<
  string,
  { required: string[]; fields: Record<string, Check>; requiredOneOf?: string[] }
> = {
  Custom: {
    required: [],
    fields: Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [`custom${String(i + 1).padStart(2, '0')}`, text()]),
    ),
  },
  Health: {
    required: [],
    fields: {
      fps: numeric({ min: 0 }),
      cpuUsage: numeric({ min: 0, max: 100 }),
      batteryLevel: numeric({ min: 0, max: 100 }),
      memoryUsage: numeric({ min: 0 }),
      errorCount: numeric({ min: 0, integer: true }),
    },
  },
  Progression: {
    required: ['progressionStatus', 'progression01'],
    fields: {
      progressionStatus: oneOf('Start', 'Fail', 'Complete'),
      progression01: text(1024, 1),
      progression02: text(),
      progression03: text(),
      score: numeric({ integer: true }),
    },
  },
  Business: {
    required: ['amount', 'currency', 'itemType', 'itemId'],
    fields: {
      amount: numeric({ integer: true }),
      currency: text(3, 3),
      itemType: text(1024, 1),
      itemId: text(1024, 1),
      cartType: text(),
    },
  },
  Resource: {
    required: ['flowType', 'currency', 'amount', 'itemType', 'itemId'],
    fields: {
      flowType: oneOf('Sink', 'Source'),
      currency: text(1024, 1),
      amount: numeric({ min: 0, exclusiveMin: true }),
      itemType: text(1024, 1),
      itemId: text(1024, 1),
    },
  },
  Design: { required: ['eventId'], fields: { eventId: text(259, 1), value: numeric() } },
  Error: {
    required: ['severity', 'message'],
    fields: {
      severity: oneOf('Critical', 'Error', 'Warning', 'Information', 'Debug'),
      message: text(8192, 1),
    },
  },
  Impression: {
    required: ['adNetwork'],
    fields: { adNetwork: text(1024, 1), adType: text(), adPlacement: text(), adId: text() },
  },
  Screenshot: {
    required: [],
    requiredOneOf: ['imageUrl', 'imageId'],
    fields: {
      imageUrl: text(),
      imageId: text(),
      width: numeric({ min: 0, integer: true }),
      height: numeric({ min: 0, integer: true }),
      streamingSessionId: text(),
    },
  },
  SessionEnd: { required: [], fields: { duration: numeric({ min: 0 }), reason: text() } },
};
const SERVER_EVENT_TYPES = ['StreamStarted', 'StreamStopped', 'RecordingStarted', 'RecordingStopped'];
const MIN_TIMESTAMP = 946_684_800_000;
const MAX_FUTURE_MS = 24 * 3600_000;

interface BatchCheck {
  errors: { path: string; message: string }[];
  code: 'validation_failed' | 'unknown_event_type';
}

/**
 * The real server's batch validation, in small: all-or-nothing, every problem reported (up to
 * `maxErrors`) with a path into the body, `unknown_event_type` when unknown types are the only problem.
 */
function validateBatch(body: Record<string, unknown>, sessionId: string, maxErrors: number): BatchCheck {
  const errors: BatchCheck['errors'] = [];
  let onlyUnknownTypes = true;
  const add = (path: string, message: string, unknownType = false) => {
    if (!unknownType) onlyUnknownTypes = false;
    if (errors.length < maxErrors) errors.push({ path, message });
  };
  const result = (): BatchCheck => ({
    errors,
    code: onlyUnknownTypes && errors.length > 0 ? 'unknown_event_type' : 'validation_failed',
  });
  for (const key of Object.keys(body)) if (key !== 'events') add(key, 'is not an allowed field');
  const events = body.events;
  if (!Array.isArray(events) || events.length < 1 || events.length > 1000) {
    add('events', 'must be an array of 1 to 1000 events');
    return result();
  }
  for (const [i, event] of events.entries()) {
    if (!onlyUnknownTypes && errors.length >= maxErrors) break;
    const at = `events[${i}]`;
    if (typeof event !== 'object' || event === null || Array.isArray(event)) {
      add(at, 'must be an object');
      continue;
    }
    const ev = event as Record<string, unknown>;
    const type = typeof ev.eventType === 'string' ? ev.eventType : undefined;
    const spec = type === undefined ? undefined : EVENT_TYPES[type];
    if (type === undefined)
      add(`${at}.eventType`, ev.eventType === undefined ? 'is required' : 'must be string');
    else if (SERVER_EVENT_TYPES.includes(type)) {
      add(`${at}.eventType`, `"${type}" is emitted by the server only and cannot be sent by a client`);
    } else if (!spec) add(`${at}.eventType`, `${JSON.stringify(type)} is not a known event type`, true);
    const common: Record<string, Check> = {
      id: text(128, 1),
      timestamp: numeric({ min: MIN_TIMESTAMP, max: Date.now() + MAX_FUTURE_MS, integer: true }),
    };
    for (const field of ['id', 'timestamp']) {
      const problem = field in ev ? common[field](ev[field]) : 'is required';
      if (problem) add(`${at}.${field}`, problem);
    }
    if (ev.sessionId !== undefined && ev.sessionId !== sessionId) {
      add(`${at}.sessionId`, 'must equal the session id of the request path');
    }
    if (!spec) continue;
    for (const field of spec.required) if (!(field in ev)) add(`${at}.${field}`, 'is required');
    if (spec.requiredOneOf && !spec.requiredOneOf.some((field) => field in ev)) {
      add(at, `must have ${spec.requiredOneOf.map((field) => `\`${field}\``).join(' or ')}`);
    }
    for (const [field, value] of Object.entries(ev)) {
      if (field === 'id' || field === 'eventType' || field === 'timestamp' || field === 'sessionId') continue;
      const check = spec.fields[field];
      const problem = check ? check(value) : 'is not an allowed field';
      if (problem) add(`${at}.${field}`, problem);
    }
  }
  return result();
}

/**
 * A fresh fake server for every test of the file, and a device factory against it (no interval
 * flushes unless a test asks, tiny deterministic backoff); devices are closed after each test.
 */
export function fakeLivelineFixture() {
  let current: FakeLiveline | null = null;
  const devices: LivelineDevice[] = [];
  beforeEach(async () => {
    current = await FakeLiveline.start();
  });
  afterEach(async () => {
    await Promise.all(devices.splice(0).map((d) => d.close()));
    await current?.stop();
    current = null;
  });
  return {
    get fake(): FakeLiveline {
      if (!current) throw new Error('the fake server runs only inside a test');
      return current;
    },
    device(options: Partial<LivelineDeviceOptions> = {}): LivelineDevice {
      const created = new LivelineDevice({
        baseUrl: this.fake.baseUrl,
        token: this.fake.token,
        flushIntervalMs: 60_000,
        random: () => 1,
        retry: { initialDelayMs: 5, maxDelayMs: 20 },
        ...options,
      });
      devices.push(created);
      return created;
    },
  };
}
