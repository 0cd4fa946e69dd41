// The bare relay: the floor liveline's command path is compared with (bench/command-load.ts).
// A minimal node:http server with the same two paths as liveline's command path and nothing else:
// devices hold a WebSocket (`ws`) on GET /client/v1/sessions/{id}/realtime (no auth, no store), and
// POST /sessions/{id}/realtime/commands writes the request body as one text frame to that device's
// socket and answers 202 once the frame is written (liveline answers `delivered` at the same point).
// Frames from devices (acks, heartbeats) are read and dropped.
//
// The durable relay (RELAY_DURABLE=sqlite|postgres; command-load.ts --durable-relay) adds what the
// command path cannot do without, and nothing else: each command is appended to liveline's command log
// before its frame is written, and each ack settles it, through liveline's own store (its migrations,
// `Storage.atomically`, on SQLite the writer thread), its own statements (`insertStatements`,
// `settleStatements`) and its group commit (`Batcher`, commands and acks sharing transactions). The
// frame is liveline's `command` frame; the 202 is sent once the frame is written. No HTTP framework,
// auth, validation, idempotency, quotas, bus or delivery bookkeeping: what is left between it and
// liveline is the cost of those. Store: RELAY_DATA_DIR (SQLite), or RELAY_DATABASE_URL with
// RELAY_DATABASE_SCHEMA (PostgreSQL).
//
// A relay pair across processes (RELAY_REDIS_URL with RELAY_REDIS_CHANNEL; command-load.ts --cross): a
// command for a device whose socket is not on this relay is published on the channel, and the relay
// holding the socket writes it (the 202 is sent once it is published). The commands of one turn of the
// event loop go in one message, as liveline's do. Durable, both relays share one store
// (RELAY_DATABASE_SCHEMA), so the holder's device's acks settle what the other one logged. The floor of
// a command path across processes: what is left between it and liveline is presence, delivery words,
// and the rest of the single-process difference.
//
// Run by command-load.ts as a child process with an IPC channel (it sends {type:'ready', url});
// run by hand (`node --import tsx bench/relay.ts`, PORT to choose the port) it prints {"url":…}.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { type WebSocket, WebSocketServer } from 'ws';
import { Batcher } from '../packages/server/src/batcher.ts';
import { uuidv7 } from '../packages/server/src/ids.ts';
import {
  ackLinger,
  type CommandRow,
  insertStatements,
  settleStatements,
} from '../packages/server/src/modules/commands/store.ts';
import { openStorage, type Storage } from '../packages/server/src/storage/index.ts';

const COMMANDS = /^\/sessions\/([^/?]+)\/realtime\/commands(?:\?.*)?$/;
const REALTIME = /^\/client\/v1\/sessions\/([^/?]+)\/realtime(?:\?.*)?$/;

const sockets = new Map<string, WebSocket>();
const wss = new WebSocketServer({ noServer: true });

type LogWrite = { insert: CommandRow } | { ack: { sessionId: string; commandId: string } };

/** The command log of the durable relay (RELAY_DURABLE): liveline's store, statements and group commit. */
async function openLog(kind: string) {
  const storage: Storage = await openStorage({
    databaseUrl: kind === 'postgres' ? (process.env.RELAY_DATABASE_URL ?? null) : null,
    databaseSchema: process.env.RELAY_DATABASE_SCHEMA ?? 'public',
    dataDir: process.env.RELAY_DATA_DIR ?? '',
    sqliteSynchronous: 'FULL',
  });
  const write = async (writes: LogWrite[]) => {
    const rows: CommandRow[] = [];
    const acks: { sessionId: string; commandId: string; status: 'acknowledged'; error: null }[] = [];
    for (const w of writes) {
      if ('insert' in w) rows.push(w.insert);
      else acks.push({ ...w.ack, status: 'acknowledged', error: null });
    }
    const settle = settleStatements(storage.db, storage.dialect, acks, Date.now(), {
      lockInOrder: storage.skipLocked,
    });
    // As liveline's log: a group of acks only commits without waiting for the disk.
    await storage.atomically([...insertStatements(storage.dialect, rows), ...settle.statements], {
      durable: rows.length > 0,
    });
    return writes.map(() => undefined);
  };
  return new Batcher<LogWrite, undefined>(write, {
    retryAlone: true,
    gather: true,
    linger: ackLinger(storage.dialect),
  });
}

const durable = process.env.RELAY_DURABLE;
const log = durable ? await openLog(durable) : null;

/** The other relays of a pair, over Redis: frames for sockets held elsewhere, a turn's in one message. */
function openPair(url: string, channel: string) {
  const publisher = new Redis(url);
  const subscriber = new Redis(url);
  void subscriber.subscribe(channel);
  subscriber.on('message', (_channel: string, text: string) => {
    for (const [sessionId, frame] of JSON.parse(text) as [string, string][]) {
      const ws = sockets.get(sessionId);
      if (ws && ws.readyState === ws.OPEN) ws.send(frame, { binary: false });
    }
  });
  let turn: { frames: [string, string][]; sent: Promise<unknown> } | null = null;
  return {
    /** Resolves once the frame is published, with the others of this turn. */
    send(sessionId: string, frame: string): Promise<unknown> {
      if (!turn) {
        const frames: [string, string][] = [];
        const sent = new Promise((resolve) => setImmediate(resolve)).then(() => {
          turn = null;
          return publisher.publish(channel, JSON.stringify(frames));
        });
        turn = { frames, sent };
      }
      turn.frames.push([sessionId, frame]);
      return turn.sent;
    },
  };
}

const pair = process.env.RELAY_REDIS_URL
  ? openPair(process.env.RELAY_REDIS_URL, process.env.RELAY_REDIS_CHANNEL ?? 'relay')
  : null;

/** A frame for a socket on the other relay of the pair: published, then the 202. */
function sendAcross(sessionId: string, frame: string, res: http.ServerResponse) {
  pair?.send(sessionId, frame).then(
    () => res.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"sent"}'),
    () => res.writeHead(500).end(),
  );
}

/** Durable: the command is in the log (committed) before its frame is written. */
async function durableFrame(sessionId: string, body: Buffer): Promise<string> {
  const { name, data } = JSON.parse(body.toString()) as { name: string; data: unknown };
  const now = Date.now();
  const row: CommandRow = {
    command_id: uuidv7(),
    session_id: sessionId,
    tenant_id: 'relay',
    name,
    data: JSON.stringify(data ?? null),
    status: 'queued',
    issued_at: now,
    expires_at: now + 30_000,
    delivered_at: null,
    settled_at: null,
    error: null,
    idempotency_key: null,
    request_hash: null,
    batch_id: null,
  };
  await log?.submit({ insert: row });
  return JSON.stringify({ type: 'command', commandId: row.command_id, name, data, issuedAt: now });
}

const server = http.createServer((req, res) => {
  const match = req.method === 'POST' ? COMMANDS.exec(req.url ?? '') : null;
  if (!match) {
    res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    if (log) {
      void durableSend(match[1], Buffer.concat(chunks), res);
      return;
    }
    const ws = sockets.get(match[1]);
    if (pair && !ws) {
      sendAcross(match[1], Buffer.concat(chunks).toString(), res);
      return;
    }
    if (!ws || ws.readyState !== ws.OPEN) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_connected"}');
      return;
    }
    ws.send(Buffer.concat(chunks), { binary: false }, (err) => {
      if (err) res.writeHead(500).end();
      else res.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"delivered"}');
    });
  });
});

/** The durable relay: a device's ack settles its command (group-committed with the others). */
function durableAck(sessionId: string, text: string) {
  const frame = JSON.parse(text) as { type?: string; commandId?: string };
  if (frame.type === 'ack' && typeof frame.commandId === 'string')
    void log?.submit({ ack: { sessionId, commandId: frame.commandId } }).catch(() => {});
}

/** The durable relay's POST: the command committed to the log, then its frame written, then the 202. */
async function durableSend(sessionId: string, body: Buffer, res: http.ServerResponse) {
  if (!sockets.has(sessionId) && !pair) {
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_connected"}');
    return;
  }
  let frame: string;
  try {
    frame = await durableFrame(sessionId, body);
  } catch {
    res.writeHead(500).end();
    return;
  }
  const ws = sockets.get(sessionId);
  if (pair && !ws) {
    sendAcross(sessionId, frame, res);
    return;
  }
  if (!ws || ws.readyState !== ws.OPEN) {
    res.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"queued"}');
    return;
  }
  ws.send(frame, { binary: false }, (err) => {
    if (err) res.writeHead(500).end();
    else res.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"delivered"}');
  });
}

server.on('upgrade', (req, socket, head) => {
  const match = REALTIME.exec(req.url ?? '');
  if (!match) {
    socket.destroy();
    return;
  }
  const sessionId = match[1];
  wss.handleUpgrade(req, socket, head, (ws) => {
    sockets.get(sessionId)?.close(4001, 'replaced');
    sockets.set(sessionId, ws);
    ws.on('message', log ? (raw) => durableAck(sessionId, raw.toString()) : () => {});
    ws.on('error', () => {});
    ws.on('close', () => {
      if (sockets.get(sessionId) === ws) sockets.delete(sessionId);
    });
    ws.send(JSON.stringify({ type: 'welcome', sessionId, heartbeatIntervalMs: 15000 }));
  });
});

server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  if (process.send) process.send({ type: 'ready', url });
  else process.stdout.write(`${JSON.stringify({ url })}\n`);
});

process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
