// The bare relay: the floor liveline's command path is compared with (bench/command-load.ts).
// A minimal node:http server with the same two paths as liveline's command path and nothing else:
// devices hold a WebSocket (`ws`) on GET /client/v1/sessions/{id}/realtime (no auth, no store), and
// POST /sessions/{id}/realtime/commands writes the request body as one text frame to that device's
// socket and answers 202 once the frame is written (liveline answers `delivered` at the same point).
// Frames from devices (acks, heartbeats) are read and dropped.
//
// Run by command-load.ts as a child process with an IPC channel (it sends {type:'ready', url});
// run by hand (`node --import tsx bench/relay.ts`, PORT to choose the port) it prints {"url":…}.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type WebSocket, WebSocketServer } from 'ws';

const COMMANDS = /^\/sessions\/([^/?]+)\/realtime\/commands(?:\?.*)?$/;
const REALTIME = /^\/client\/v1\/sessions\/([^/?]+)\/realtime(?:\?.*)?$/;

const sockets = new Map<string, WebSocket>();
const wss = new WebSocketServer({ noServer: true });

const server = http.createServer((req, res) => {
  const match = req.method === 'POST' ? COMMANDS.exec(req.url ?? '') : null;
  if (!match) {
    res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const ws = sockets.get(match[1]);
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
    ws.on('message', () => {});
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
